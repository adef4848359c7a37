package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kwal/kwal/cmd/kwal/internal/latbench"
)

func init() {
	register(command{
		words: []string{"bench", "latency"},
		short: "classic vs remote WAL on the KIP-1176 appendix workloads: latency, throughput, ledger counts, $ (report, JSON, plots)",
		run:   runBenchLatency,
	})
}

func runBenchLatency(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("kwal bench latency", stderr)
	quick := fs.Bool("quick", false, "CI sizes: fewer records, a reduced sweep, still 3 repetitions (under 3 minutes)")
	out := fs.String("out", filepath.Join("out", "latency"), "directory for report.md, report.json and the PNG plots")
	reps := fs.Int("reps", 3, "repetitions of each workload and mode; figures are medians (at least 3)")
	var model string
	latencyModelFlag(fs, &model)
	storeURL := fs.String("store", latbench.DefaultStorageURL, "object store under the latency model: mem:// (objects in memory), fs (the fs backend in --dir: a write and two fsyncs per PUT on the brokers' disk), or a real one, s3://bucket/prefix?endpoint=…, minio://… (use --latency-model none with it)")
	metaBootstrap := fs.String("metadata-bootstrap", "", "real Kafka for __remote_wal_log_metadata (default: embedded kfake)")
	crossAZ := fs.Duration("cross-az", 500*time.Microsecond, "one-way latency between racks (default 0.5ms = 1ms round trip); 0 turns it off")
	sheet := fs.String("sheet", "", "object-store price sheet (default: s3express-2025, or s3-standard with --latency-model s3standard)")
	intervals := fs.String("intervals", "", "combiner intervals to sweep, comma-separated (default 5ms,10ms,20ms,50ms,100ms; quick 5ms,20ms,100ms)")
	sizes := fs.String("object-sizes", "", "object sizes (combiner upload bytes) to sweep, comma-separated bytes or 64KiB/4MiB (default 64KiB,256KiB,4MiB; quick 64KiB,4MiB)")
	noSweep := fs.Bool("no-sweep", false, "run only the headline workloads")
	headInterval := fs.Duration("interval", 0, "combiner interval of the headline workloads (default the broker's, 10ms); the sweep has its own (--intervals)")
	rf := fs.Int("rf", 2, "replication factor of every topic (2 as in the KIP appendix, or 3)")
	perf := fs.Int("perf-records", 0, "records of the producer/consumer perf tests (default 100000; quick 10000)")
	partitions := fs.Int("partitions", 1, "partitions of the topics produce-acks1 and produce-acksall write and consume reads (1 as in the KIP appendix; more spreads the producer over more leaders and batches per request)")
	dir := fs.String("dir", "", "directory for the cluster's logs and objects (default: a temporary one, removed)")
	verbose := fs.Bool("v", false, "broker logs on stderr")
	quiet := fs.Bool("q", false, "no progress line on stderr")
	workloads := fs.String("workloads", "", "headline workloads to run, comma-separated (default all: e2e-acks1,produce-acks1,consume,e2e-acksall,produce-acksall)")
	cpuprofile := fs.String("cpuprofile", "", "profile each headline step into PREFIX-<workload>-<mode>-rep<N>.pprof")
	bootstrap := fs.String("bootstrap", "", "not supported: the benchmark needs the brokers' ledgers, so it runs its own in-process cluster")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if *bootstrap != "" {
		return fmt.Errorf("--bootstrap is not supported yet: costs come from the in-process brokers' ledgers")
	}
	cfg := latbench.Config{
		Quick: *quick, Reps: *reps, OutDir: *out, Dir: *dir, LatencyModel: model, StorageURL: *storeURL, MetadataBootstrap: *metaBootstrap, CrossAZ: *crossAZ,
		NoCrossAZ: *crossAZ == 0, Sheet: *sheet, NoSweep: *noSweep, ReplicationFactor: int16(*rf), PerfRecords: *perf, ProducePartitions: *partitions,
		CPUProfile: *cpuprofile, Logger: slog.New(slog.DiscardHandler),
	}
	if *headInterval < 0 {
		return fmt.Errorf("--interval %v: must be positive (or 0 for the broker's default)", *headInterval)
	}
	cfg.Headline.Interval = *headInterval
	for _, w := range strings.Split(*workloads, ",") {
		if w = strings.TrimSpace(w); w != "" {
			cfg.Workloads = append(cfg.Workloads, latbench.Workload(w))
		}
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	var err error
	if cfg.Intervals, err = parseDurations(*intervals); err != nil {
		return fmt.Errorf("--intervals: %w", err)
	}
	if cfg.UploadSizes, err = parseSizes(*sizes); err != nil {
		return fmt.Errorf("--object-sizes: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := latbench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	files, err := rep.WriteFiles(cfg.OutDir)
	if err != nil {
		return err
	}
	if err := rep.WriteMarkdown(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join(files, ", "))
	return nil
}

func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func parseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		mult := int64(1)
		for _, u := range []struct {
			suffix string
			m      int64
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
			if strings.HasSuffix(f, u.suffix) {
				f, mult = strings.TrimSuffix(f, u.suffix), u.m
				break
			}
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

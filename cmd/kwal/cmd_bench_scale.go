package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kwal/kwal/cmd/kwal/internal/scalebench"
)

func init() {
	register(command{
		words: []string{"bench", "scale"},
		short: "one broker leading 1,000 then 10,000 remotewal partitions: PUTs/s, metadata traffic and topic size, follower bootstrap, memory, CPU, $",
		run:   runBenchScale,
	})
}

func runBenchScale(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("kwal bench scale", stderr)
	cfg := scalebench.Default()
	parts := fs.String("partitions", "1000,10000", "comma-separated leader partition counts, run in turn")
	rate := fs.String("rate", "50MB/s", "total produce rate (MB/s, 1e6 bytes)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured window per partition count")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "produced before the window opens")
	fs.IntVar(&cfg.BatchBytes, "batch-bytes", cfg.BatchBytes, "bytes per produced batch (a multiple of --record-bytes)")
	fs.IntVar(&cfg.RecordBytes, "record-bytes", cfg.RecordBytes, "bytes per record")
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "appending goroutines")
	fs.StringVar(&cfg.Store, "store", cfg.Store, "object store: mem (objects in the heap, left out of the heap figures) or fs (on disk, fsync per PUT)")
	latencyModelFlag(fs, &cfg.LatencyModel)
	fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "followers reading each partition back (priced GETs)")
	fs.Float64Var(&cfg.MetadataCrossings, "metadata-az-crossings", cfg.MetadataCrossings,
		"AZ boundaries each metadata byte crosses (publish 1, metadata topic replication 2, followers' reads 2)")
	fs.StringVar(&cfg.Sheet, "sheet", cfg.Sheet, "object-store price sheet")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "profile each window into PREFIX-<partitions>.pprof")
	quick := fs.Bool("quick", false, "50 and 200 partitions at 5 MB/s, 3 s windows (CI)")
	out := fs.String("out", "", "also write report.json and scale.png into this directory")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	ns, err := parseCounts(*parts)
	if err != nil {
		return err
	}
	if cfg.RateMBps, err = parseRate(*rate); err != nil {
		return err
	}
	cfg.Partitions = ns
	if *quick {
		// --quick sets what was not given explicitly.
		q := scalebench.Quick()
		if !set["partitions"] {
			cfg.Partitions = q.Partitions
		}
		if !set["rate"] {
			cfg.RateMBps = q.RateMBps
		}
		if !set["duration"] {
			cfg.Duration = q.Duration
		}
		if !set["warmup"] {
			cfg.Warmup = q.Warmup
		}
	}
	rep, err := scalebench.Run(context.Background(), cfg, stderr)
	if err != nil {
		return err
	}
	scalebench.WriteTable(stdout, rep)
	if *out == "" {
		return nil
	}
	return writeReportFiles(stdout, *out, map[string]func(io.Writer) error{
		"report.json": func(w io.Writer) error { return scalebench.WriteJSON(w, rep) },
		"scale.png":   func(w io.Writer) error { return scalebench.WritePNG(w, rep) },
	})
}

// parseCounts parses "1000,10000".
func parseCounts(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--partitions %q: want positive integers separated by commas", s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// parseRate parses "50MB/s", "50MB", "50" (MB/s, 1e6 bytes).
func parseRate(s string) (float64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "/s"), "MB")
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("--rate %q: want MB/s, like 50MB/s", s)
	}
	return v, nil
}

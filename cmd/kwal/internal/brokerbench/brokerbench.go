package brokerbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/kclient"
	"github.com/kwal/kwal/internal/stats"
	"github.com/kwal/kwal/localcluster"

	"github.com/kwal/kwal/cmd/kwal/internal/benchreport"
)

// Config is one invocation.
type Config struct {
	Records      int
	RecordBytes  int
	Partitions   int32
	Runs         int
	LatencyModel string // for the remotewal mode's object store
	Logger       *slog.Logger
}

// Row is one measured case.
type Row struct {
	Target      string    `json:"target"` // kwal-classic, kwal-remotewal, kfake, loopback-tcp
	Acks        string    `json:"acks"`
	MBps        []float64 `json:"mbps_runs"`
	MedianMBps  float64   `json:"median_mbps"`
	RecordsPerS float64   `json:"median_records_per_s"`
}

// Report is the whole result.
type Report struct {
	CPUs         int     `json:"cpus"`
	Records      int     `json:"records"`
	RecordBytes  int     `json:"record_bytes"`
	Partitions   int32   `json:"partitions"`
	LatencyModel string  `json:"latency_model"`
	Rows         []Row   `json:"rows"`
	Acks1VsKfake float64 `json:"kwal_classic_acks1_vs_kfake"`
}

// Run measures every case, alternating targets within each repetition so
// drift of the shared machine hits them alike.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "kwal-bench-broker-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	targets := []string{"kfake", "kwal-classic", "kwal-remotewal"}
	rows := map[string]*Row{}
	var order []string
	rowFor := func(t, acks string) *Row {
		k := t + "/" + acks
		if rows[k] == nil {
			rows[k] = &Row{Target: t, Acks: acks}
			order = append(order, k)
		}
		return rows[k]
	}
	// Every case gets a fresh cluster, so no case pays for the data or
	// the background work of the ones before it (kfake keeps every record
	// in the process's heap).
	for run := 0; run < cfg.Runs; run++ {
		for _, acks := range []string{"1", "all"} {
			for _, t := range targets {
				mbps, err := measureCase(ctx, cfg, dir, t, acks, run)
				if err != nil {
					return nil, fmt.Errorf("%s acks=%s: %w", t, acks, err)
				}
				r := rowFor(t, acks)
				r.MBps = append(r.MBps, mbps)
				if progress != nil {
					fmt.Fprintf(progress, "run %d/%d  %-15s acks=%-3s %8.1f MB/s\n", run+1, cfg.Runs, t, acks, mbps)
				}
			}
		}
		bw, err := loopbackMBps(256 << 20)
		if err != nil {
			return nil, err
		}
		r := rowFor("loopback-tcp", "-")
		r.MBps = append(r.MBps, bw)
	}
	rep := &Report{CPUs: runtime.NumCPU(), Records: cfg.Records, RecordBytes: cfg.RecordBytes, Partitions: cfg.Partitions, LatencyModel: cfg.LatencyModel}
	for _, k := range order {
		r := rows[k]
		r.MedianMBps = stats.Median(r.MBps)
		if r.Target != "loopback-tcp" {
			r.RecordsPerS = r.MedianMBps * 1e6 / float64(cfg.RecordBytes)
		}
		rep.Rows = append(rep.Rows, *r)
	}
	if k, c := rows["kfake/1"], rows["kwal-classic/1"]; k != nil && c != nil && k.MedianMBps > 0 {
		rep.Acks1VsKfake = c.MedianMBps / k.MedianMBps
	}
	return rep, nil
}

// measureCase starts the target cluster, produces to a fresh topic and
// stops the cluster.
func measureCase(ctx context.Context, cfg Config, dir, target, acks string, run int) (float64, error) {
	topic := fmt.Sprintf("bench-%d-%s", run, acks)
	if target == "kfake" {
		fake, err := kfake.NewCluster(kfake.NumBrokers(3))
		if err != nil {
			return 0, err
		}
		defer fake.Close()
		return produce(ctx, fake.ListenAddrs(), topic, "", acks, cfg)
	}
	cdir, err := os.MkdirTemp(dir, target+"-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(cdir)
	lc, err := localcluster.Start(ctx, localcluster.Config{Dir: cdir, LatencyModel: cfg.LatencyModel, Logger: cfg.Logger})
	if err != nil {
		return 0, err
	}
	defer lc.Close()
	return produce(ctx, lc.Bootstrap(), topic, strings.TrimPrefix(target, "kwal-"), acks, cfg)
}

func produce(ctx context.Context, seeds []string, topic, mode, acks string, cfg Config) (float64, error) {
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return 0, err
	}
	defer admin.Close()
	configs := map[string]string{}
	if mode == "remotewal" {
		configs[broker.TopicConfigRemoteWAL] = "true"
	}
	if err := kclient.CreateTopic(ctx, admin, topic, cfg.Partitions, 3, configs, false); err != nil {
		return 0, err
	}
	ack := kgo.LeaderAck()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5 * time.Millisecond),
		kgo.ProducerBatchMaxBytes(1 << 20), kgo.MaxBufferedRecords(50000), kgo.ProduceRequestTimeout(30 * time.Second),
		// Uncompressed, incompressible records: the broker must move and
		// check every byte, as with real payloads (franz-go would otherwise
		// snappy-compress, and zeros shrink to nothing).
		kgo.ProducerBatchCompression(kgo.NoCompression())}
	if acks == "all" {
		ack = kgo.AllISRAcks()
	} else {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	opts = append(opts, kgo.RequiredAcks(ack))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	// Warm up every partition (leaders known, followers fetching) with a
	// client that honours Record.Partition, and open the measured
	// client's connections.
	warm, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return 0, err
	}
	defer warm.Close()
	for p := int32(0); p < cfg.Partitions; p++ {
		if err := warm.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("warmup")}).FirstErr(); err != nil {
			return 0, fmt.Errorf("warm-up of partition %d: %w", p, err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warmup")}).FirstErr(); err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	value := make([]byte, cfg.RecordBytes)
	rng := rand.New(rand.NewPCG(uint64(len(topic)), 7))
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		firstEr error
	)
	start := time.Now()
	for i := 0; i < cfg.Records; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstEr == nil {
					firstEr = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	el := time.Since(start)
	if firstEr != nil {
		return 0, firstEr
	}
	return float64(cfg.Records*cfg.RecordBytes) / el.Seconds() / 1e6, nil
}

// loopbackMBps measures one TCP stream over 127.0.0.1.
func loopbackMBps(total int) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<20)
		n := 0
		for n < total {
			k, err := c.Read(buf)
			n += k
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, 1<<20)
	start := time.Now()
	for sent := 0; sent < total; sent += len(buf) {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
	}
	if err := <-done; err != nil {
		return 0, err
	}
	return float64(total) / time.Since(start).Seconds() / 1e6, nil
}

// WriteTable prints the report with ratios to kfake and to loopback TCP.
func WriteTable(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "produce throughput, franz-go, %d records of %d B, %d partitions, RF 3; medians of runs on %d CPUs; remotewal store latency model %q\n",
		rep.Records, rep.RecordBytes, rep.Partitions, rep.CPUs, rep.LatencyModel)
	var kfake1, kfakeAll, tcp float64
	for _, r := range rep.Rows {
		switch {
		case r.Target == "kfake" && r.Acks == "1":
			kfake1 = r.MedianMBps
		case r.Target == "kfake" && r.Acks == "all":
			kfakeAll = r.MedianMBps
		case r.Target == "loopback-tcp":
			tcp = r.MedianMBps
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tacks\tMB/s\trecords/s\tvs kfake\tvs loopback TCP\truns\t")
	for _, r := range rep.Rows {
		vsK := "-"
		base := kfake1
		if r.Acks == "all" {
			base = kfakeAll
		}
		if r.Target != "kfake" && r.Target != "loopback-tcp" && base > 0 {
			vsK = fmt.Sprintf("%.2fx", r.MedianMBps/base)
		}
		vsT := "-"
		if tcp > 0 {
			vsT = fmt.Sprintf("%.1f%%", 100*r.MedianMBps/tcp)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.0f\t%s\t%s\t%v\t\n", r.Target, r.Acks, r.MedianMBps, r.RecordsPerS, vsK, vsT, fmtRuns(r.MBps))
	}
	tw.Flush()
}

func fmtRuns(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.0f", x)
	}
	return s
}

// WriteJSON writes the report.
func WriteJSON(w io.Writer, rep *Report) error { return benchreport.WriteJSON(w, rep) }

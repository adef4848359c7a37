package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/kclient"
	"github.com/kwal/kwal/internal/stats"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/localcluster"
	"github.com/kwal/kwal/objstore/ledger"
)

// Config is the demo's flags.
type Config struct {
	Records     int
	RecordBytes int
	// Rate paces the producer (records/s); 0 is unthrottled, which
	// measures queueing in the client more than the cluster.
	Rate       int
	Partitions int32
	Topic      string
	// Mode is "remotewal" (default) or "classic".
	Mode string
	// Dir holds logs and the fs object store; empty makes a temp dir that
	// is removed at the end (unless Serve).
	Dir        string
	StorageURL string
	// StorePerRack gives each rack its own store (StorageURL a {rack}
	// template; default fs in Dir/remote-wal-<rack>), as the KIP puts a
	// bucket in each AZ.
	StorePerRack bool
	LatencyModel string
	// MetadataBootstrap points at a real Kafka for the metadata topic.
	MetadataBootstrap string
	Interval          time.Duration
	// Bootstrap runs only the clients against a running cluster
	// (docker-compose); ConsumerRack is the consumer's rack.
	Bootstrap    string
	ConsumerRack string
	// ProducerRack is the rack the producer is taken to run in: Kafka
	// producers send no rack, so the ledger records their bytes with an
	// unknown source, and the summary attributes them to this rack.
	ProducerRack string
	Serve        bool
	Logger       *slog.Logger
}

// Run runs the demo and writes progress and the summary to w.
func Run(ctx context.Context, cfg Config, w io.Writer) error {
	if cfg.Records <= 0 || cfg.RecordBytes <= 0 || cfg.Partitions <= 0 {
		return fmt.Errorf("demo: records, record size and partitions must be positive")
	}
	if cfg.Mode != "remotewal" && cfg.Mode != "classic" {
		return fmt.Errorf("demo: mode %q: use remotewal or classic", cfg.Mode)
	}
	if cfg.Bootstrap != "" {
		return runClients(ctx, cfg, strings.Split(cfg.Bootstrap, ","), nil, w)
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "kwal-demo-")
		if err != nil {
			return err
		}
		dir = d
		if !cfg.Serve {
			defer os.RemoveAll(d)
		}
	}
	fmt.Fprintf(w, "kwal demo: 3 brokers in racks az1, az2, az2; %s topic %q; object store %s with the %q latency model; metadata on %s\n",
		cfg.Mode, cfg.Topic, orDefault(cfg.StorageURL, "fs in "+dir), cfg.LatencyModel, orDefault(cfg.MetadataBootstrap, "embedded kfake"))
	lc, err := localcluster.Start(ctx, localcluster.Config{
		Racks: []string{"az1", "az2", "az2"}, Dir: dir, StorageURL: cfg.StorageURL, StorePerRack: cfg.StorePerRack,
		LatencyModel: cfg.LatencyModel, MetadataBootstrap: cfg.MetadataBootstrap,
		RemoteWAL: broker.RemoteWALConfig{CombinerTaskInterval: cfg.Interval},
		Logger:    cfg.Logger,
	})
	if err != nil {
		return err
	}
	defer lc.Close()
	if err := runClients(ctx, cfg, lc.Bootstrap(), lc, w); err != nil {
		return err
	}
	if cfg.Serve {
		fmt.Fprintf(w, "\nserving until interrupted (Ctrl-C)\n  bootstrap: %s\n  topic:     %s (%s)\n", strings.Join(lc.Bootstrap(), ","), cfg.Topic, cfg.Mode)
		fmt.Fprintf(w, "  metadata:  %s (topic __remote_wal_log_metadata)\n", strings.Join(lc.MetadataBootstrap(), ","))
		switch {
		case cfg.StorePerRack && cfg.StorageURL == "":
			fmt.Fprintf(w, "  stores:    file://%s/remote-wal-<rack>, one per rack (kwal audit --store … --store-id <rack> --bootstrap …)\n", dir)
		case cfg.StorageURL == "":
			fmt.Fprintf(w, "  store:     file://%s/shared/remote-wal (kwal audit --store … --bootstrap …)\n", dir)
		}
		for _, b := range lc.Brokers {
			info := b.Info()
			fmt.Fprintf(w, "  broker %d: rack %s, %s, log dir %s\n", info.ID, info.Rack, b.Addr(), b.LogDir())
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		select {
		case <-sig:
		case <-ctx.Done():
		}
		signal.Stop(sig)
	}
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

type runStats struct {
	producerRack string
	mu           sync.Mutex
	produce      []time.Duration
	e2e          []time.Duration
	acked        atomic.Int64
	consumed     atomic.Int64
	failed       atomic.Int64
	firstErr     atomic.Value
	duplicate    atomic.Int64
	outOfOrd     atomic.Int64
}

func runClients(ctx context.Context, cfg Config, seeds []string, lc *localcluster.Cluster, w io.Writer) error {
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer admin.Close()
	configs := map[string]string{}
	if cfg.Mode == "remotewal" {
		configs[broker.TopicConfigRemoteWAL] = "true"
	}
	if err := kclient.CreateTopic(ctx, admin, cfg.Topic, cfg.Partitions, 3, configs, true); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(cfg.Topic), kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProduceRequestTimeout(30*time.Second), kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
			var n int
			return func(r *kgo.Record, parts int) int {
				if string(r.Value) == "warmup" {
					return int(r.Partition)
				}
				n++
				return n % parts
			}
		})))
	if err != nil {
		return err
	}
	defer prod.Close()
	rack := cfg.ConsumerRack
	if rack == "" {
		rack = "az2"
	}
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < cfg.Partitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.Rack(rack),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offsets}), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cons.Close()

	// Warm up: one acknowledged record per partition, so the figures below
	// measure the steady state and not leader discovery, the first
	// metadata load or connection set-up.
	fmt.Fprintf(w, "warming up (one acks=all record per partition)...\n")
	for p := int32(0); p < cfg.Partitions; p++ {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := prod.ProduceSync(wctx, &kgo.Record{Partition: p, Value: []byte("warmup"), Timestamp: time.Now()}).FirstErr()
		cancel()
		if err != nil {
			return fmt.Errorf("demo: warm-up produce to partition %d: %w", p, err)
		}
	}

	st := runStats{producerRack: cfg.ProducerRack}
	start := time.Now()
	var ledgerStart []ledger.Snapshot
	if lc != nil {
		for _, l := range lc.Ledgers {
			ledgerStart = append(ledgerStart, l.Snapshot())
		}
	}
	consumeDone := make(chan error, 1)
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Minute)
	defer ccancel()
	go func() { consumeDone <- consume(cctx, cons, cfg, &st) }()

	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				progress(w, &st, cfg.Records, lc, ledgerStart, time.Since(start))
			}
		}
	}()

	r := rand.New(rand.NewPCG(1176, 1))
	payload := make([]byte, cfg.RecordBytes)
	var wg sync.WaitGroup
	for i := 0; i < cfg.Records; i++ {
		if cfg.Rate > 0 {
			due := start.Add(time.Duration(i) * time.Second / time.Duration(cfg.Rate))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		for j := range payload {
			payload[j] = byte('a' + r.IntN(26))
		}
		rec := &kgo.Record{Value: append([]byte(fmt.Sprintf("%09d|", i)), payload...), Timestamp: time.Now()}
		sent := time.Now()
		wg.Add(1)
		prod.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				st.failed.Add(1)
				st.firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			d := time.Since(sent)
			st.mu.Lock()
			st.produce = append(st.produce, d)
			st.mu.Unlock()
			st.acked.Add(1)
		})
	}
	wg.Wait()
	produceTime := time.Since(start)
	cerr := <-consumeDone
	close(stopProgress)
	<-progressDone
	progress(w, &st, cfg.Records, lc, ledgerStart, time.Since(start))
	fmt.Fprintln(w)
	if n := st.failed.Load(); n > 0 {
		return fmt.Errorf("demo: %d produce requests failed, first: %v", n, st.firstErr.Load())
	}
	if cerr != nil {
		return cerr
	}
	return summary(w, cfg, &st, lc, ledgerStart, produceTime)
}

func consume(ctx context.Context, cons *kgo.Client, cfg Config, st *runStats) error {
	next := map[int32]int64{}
	seen := make([]bool, cfg.Records)
	for st.consumed.Load() < int64(cfg.Records) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("demo: consumed %d of %d records before the deadline", st.consumed.Load(), cfg.Records)
		}
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "warmup" {
				next[r.Partition] = r.Offset + 1
				return
			}
			if want, ok := next[r.Partition]; ok && r.Offset != want {
				st.outOfOrd.Add(1)
			}
			next[r.Partition] = r.Offset + 1
			var i int
			if _, err := fmt.Sscanf(string(r.Value[:9]), "%09d", &i); err == nil && i >= 0 && i < len(seen) {
				if seen[i] {
					st.duplicate.Add(1)
					return
				}
				seen[i] = true
			}
			st.mu.Lock()
			st.e2e = append(st.e2e, now.Sub(r.Timestamp))
			st.mu.Unlock()
			st.consumed.Add(1)
		})
	}
	return nil
}

func progress(w io.Writer, st *runStats, total int, lc *localcluster.Cluster, base []ledger.Snapshot, el time.Duration) {
	line := fmt.Sprintf("\r%5.1fs  produced+acked %6d/%d  consumed %6d/%d", el.Seconds(), st.acked.Load(), total, st.consumed.Load(), total)
	if lc != nil {
		puts, gets, cross := ledgerTotals(lc, base, st.producerRack)
		line += fmt.Sprintf("  PUTs %5d  GETs %5d  cross-rack %s", puts, gets, human(cross))
	}
	fmt.Fprint(w, line)
}

func ledgerTotals(lc *localcluster.Cluster, base []ledger.Snapshot, producerRack string) (puts, gets, cross int64) {
	for i, l := range lc.Ledgers {
		s := l.Snapshot()
		if i < len(base) {
			s = s.Sub(base[i])
		}
		puts += s.ByKind[ledger.Put].Requests
		gets += s.ByKind[ledger.Get].Requests
		for _, t := range s.Transfers {
			if crosses(t, producerRack) {
				cross += t.Bytes
			}
		}
	}
	return
}

// crosses says whether a transfer left its rack, taking produce bytes of
// an unknown source to come from the producer's rack.
func crosses(t ledger.TransferRow, producerRack string) bool {
	if t.Component == "produce" && t.FromRack == "" && producerRack != "" {
		return t.ToRack != producerRack
	}
	return t.CrossRack()
}

func summary(w io.Writer, cfg Config, st *runStats, lc *localcluster.Cluster, base []ledger.Snapshot, produceTime time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "summary (%s mode, measured)\t\n", cfg.Mode)
	fmt.Fprintf(tw, "  records\t%d of %d B, %d partitions, RF 3\n", cfg.Records, cfg.RecordBytes, cfg.Partitions)
	pace := "unthrottled"
	if cfg.Rate > 0 {
		pace = fmt.Sprintf("paced at %d/s", cfg.Rate)
	}
	fmt.Fprintf(tw, "  produce throughput\t%.0f records/s (acks=all, %s)\n", float64(cfg.Records)/produceTime.Seconds(), pace)
	st.mu.Lock()
	p50, p99 := pct(st.produce, 50), pct(st.produce, 99)
	e50, e99 := pct(st.e2e, 50), pct(st.e2e, 99)
	st.mu.Unlock()
	fmt.Fprintf(tw, "  producer latency\tp50 %v  p99 %v\n", p50, p99)
	fmt.Fprintf(tw, "  end-to-end latency\tp50 %v  p99 %v (consumer in the follower's rack)\n", e50, e99)
	fmt.Fprintf(tw, "  consumed\t%d, duplicates %d, out of order %d\n", st.consumed.Load(), st.duplicate.Load(), st.outOfOrd.Load())
	var problems []string
	if st.duplicate.Load() > 0 || st.outOfOrd.Load() > 0 {
		problems = append(problems, "the consumer saw duplicates or reordering")
	}
	if lc != nil {
		puts, gets, _ := ledgerTotals(lc, base, cfg.ProducerRack)
		byComp := map[string]int64{}
		for i, l := range lc.Ledgers {
			s := l.Snapshot().Sub(base[i])
			for _, t := range s.Transfers {
				if crosses(t, cfg.ProducerRack) {
					byComp[t.Component] += t.Bytes
				}
			}
		}
		fmt.Fprintf(tw, "  object store\t%d PUTs, %d GETs (latency model %s)\n", puts, gets, lc.Model.Name)
		comps := make([]string, 0, len(byComp))
		for c := range byComp {
			comps = append(comps, c)
		}
		slices.Sort(comps)
		var parts []string
		for _, c := range comps {
			parts = append(parts, fmt.Sprintf("%s %s", c, human(byComp[c])))
		}
		fmt.Fprintf(tw, "  cross-rack bytes\t%s\n", orDefault(strings.Join(parts, ", "), "none"))
		fmt.Fprintf(tw, "  \t(replica-fetch: record bytes leader → follower; produce: producer in %s to leaders in\n", cfg.ProducerRack)
		fmt.Fprintf(tw, "  \tother racks; consume: reads outside the consumer's rack; fallback: follower reads from the leader)\n")
		ok, detail := checkIdentity(lc, cfg)
		fmt.Fprintf(tw, "  follower logs byte-identical\t%s\n", detail)
		if !ok {
			problems = append(problems, "a follower's log differs from its leader's")
		}
	}
	tw.Flush()
	if len(problems) > 0 {
		return errors.New("demo: " + strings.Join(problems, "; "))
	}
	return nil
}

// checkIdentity compares every follower's segment bytes with its leader's
// once the followers have caught up.
func checkIdentity(lc *localcluster.Cluster, cfg Config) (bool, string) {
	deadline := time.Now().Add(30 * time.Second)
	checked := 0
	for p := int32(0); p < cfg.Partitions; p++ {
		tp := broker.TopicPartition{Topic: cfg.Topic, Partition: p}
		var leader *broker.Broker
		for _, b := range lc.Brokers {
			if st, ok := b.PartitionStatus(tp); ok && st.IsLeader {
				leader = b
			}
		}
		if leader == nil {
			return false, fmt.Sprintf("no leader for %s", tp)
		}
		ll, _ := leader.PartitionLog(tp)
		for _, b := range lc.Brokers {
			if b == leader {
				continue
			}
			fl, ok := b.PartitionLog(tp)
			if !ok {
				continue
			}
			for fl.LogEndOffset() < ll.LogEndOffset() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			a, err1 := allBytes(ll.Segments(), ll.ReadSegmentRange)
			f, err2 := allBytes(fl.Segments(), fl.ReadSegmentRange)
			if err := errors.Join(err1, err2); err != nil {
				return false, err.Error()
			}
			if !bytes.Equal(a, f) {
				return false, fmt.Sprintf("NO: %s on broker %d differs from the leader (%d vs %d bytes)", tp, b.Info().ID, len(f), len(a))
			}
			checked++
		}
	}
	return true, fmt.Sprintf("yes (%d follower replicas compared with their leaders, every segment byte)", checked)
}

func allBytes(segs []kafkalog.SegmentInfo, read func(int64, int64, int64) ([]byte, error)) ([]byte, error) {
	var all []byte
	for _, s := range segs {
		b, err := read(s.BaseOffset, 0, s.Size)
		if err != nil {
			return nil, err
		}
		all = append(all, b...)
	}
	return all, nil
}

func pct(ds []time.Duration, p float64) time.Duration {
	return stats.DurationPercentile(ds, p).Round(10 * time.Microsecond)
}

func human(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

package scalebench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/cost"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fsstore"
	"github.com/kwal/kwal/objstore/latency"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/rwnode"
)

// Config is one benchmark: one run per partition count.
type Config struct {
	Partitions  []int
	RateMBps    float64       // produced MB/s (1e6 bytes) over all partitions
	Duration    time.Duration // measured window per partition count
	Warmup      time.Duration // produced before the window opens
	BatchBytes  int           // bytes per produced batch, a multiple of RecordBytes
	RecordBytes int
	Producers   int    // appending goroutines, each owning a share of the partitions
	Store       string // "fs" (objects on disk) or "mem" (objects in the heap)
	// LatencyModel is an objstore/latency preset (s3express, s3standard, none).
	LatencyModel string
	// Readers is how many followers read each partition back (RF-1); the
	// GETs they would issue are priced, not run.
	Readers int
	// MetadataCrossings: how many AZ boundaries each metadata byte crosses
	// (publish, the metadata topic's replication, the followers' reads).
	MetadataCrossings float64
	Sheet             string // object-store price sheet
	// CPUProfile, if set, is a file prefix: the window of each partition
	// count is profiled into <prefix>-<partitions>.pprof.
	CPUProfile string
	Logger     *slog.Logger
}

// Quick is the CI configuration: small counts, a few seconds each.
func Quick() Config {
	return Config{Partitions: []int{50, 200}, RateMBps: 5, Duration: 3 * time.Second, Warmup: time.Second,
		BatchBytes: 4096, RecordBytes: 1024, Producers: 2, Store: "mem", LatencyModel: "s3express",
		Readers: 2, MetadataCrossings: 5, Sheet: "s3express-2025"}
}

// Default is the full run of issue 14 item 6.
func Default() Config {
	c := Quick()
	c.Partitions, c.RateMBps, c.Duration, c.Warmup = []int{1000, 10000}, 50, 30*time.Second, 5*time.Second
	return c
}

func (c *Config) validate() error {
	switch {
	case len(c.Partitions) == 0:
		return errors.New("scalebench: no partition counts")
	case c.RateMBps <= 0 || c.Duration <= 0 || c.Warmup < 0:
		return errors.New("scalebench: rate and duration must be positive")
	case c.RecordBytes < 64 || c.BatchBytes < c.RecordBytes || c.BatchBytes%c.RecordBytes != 0:
		return fmt.Errorf("scalebench: batch bytes %d must be a multiple of record bytes %d (≥ 64)", c.BatchBytes, c.RecordBytes)
	case c.Producers <= 0 || c.Readers < 0 || c.MetadataCrossings < 0:
		return errors.New("scalebench: producers must be positive, readers and crossings not negative")
	case c.Store != "fs" && c.Store != "mem":
		return fmt.Errorf("scalebench: store %q: want fs or mem", c.Store)
	}
	for _, n := range c.Partitions {
		if n <= 0 {
			return fmt.Errorf("scalebench: partition count %d", n)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// maxDebt is how far a producer may fall behind its schedule before it
// gives the difference up.
const maxDebt = 50 * time.Millisecond

// Result is what one partition count measured.
type Result struct {
	Partitions   int     `json:"partitions"`
	TargetMBps   float64 `json:"target_mbps"`
	ProducedMBps float64 `json:"produced_mbps"` // appended to the leader logs in the window
	BatchesPerS  float64 `json:"batches_per_s"`
	WindowS      float64 `json:"window_s"`

	PutsPerS      float64 `json:"puts_per_s"`
	PutMBps       float64 `json:"put_mbps"`
	SlicesPerPut  float64 `json:"slices_per_put"` // slice entries per object, from the follower's index
	UnpublishedMB float64 `json:"unpublished_mb"` // appended but not yet published at the window's end

	MetaEventsPerS float64 `json:"metadata_events_per_s"`
	MetaBytesPerS  float64 `json:"metadata_bytes_per_s"`
	MetaRecords    int64   `json:"metadata_topic_records"`
	MetaBytes      int64   `json:"metadata_topic_bytes"` // key+value bytes in the topic at the end of the run
	// MetaSteadyBytes: the topic's size once objects are deleted as fast as
	// they are written: bytes/s × remote.wal.retention.ms (an estimate).
	MetaSteadyBytes float64 `json:"metadata_topic_steady_bytes"`
	RetentionS      float64 `json:"wal_retention_s"`

	BootstrapMs       float64 `json:"follower_bootstrap_ms"` // start of a metadata consumer to caught up with the index
	BootstrapRecords  int64   `json:"follower_bootstrap_records"`
	IndexedPartitions int     `json:"follower_indexed_partitions"`

	BaseHeapMB float64 `json:"baseline_heap_inuse_mb"` // assembly up, no partitions yet
	BaseRSSMB  float64 `json:"baseline_rss_mb"`
	HeapMB     float64 `json:"heap_inuse_mb"` // at the window's end
	HeapPeakMB float64 `json:"heap_inuse_peak_mb"`
	RSSMB      float64 `json:"rss_mb"`
	RSSPeakMB  float64 `json:"rss_peak_mb"`
	// StoreHeldMB: with the mem store, the object bytes it held at the
	// window's end, taken out of the heap figures (not out of RSS).
	StoreHeldMB float64 `json:"mem_store_held_mb,omitempty"`
	CPUPerS     float64 `json:"cpu_s_per_s"` // user+system CPU-seconds of the process per second of window
	// CPUmsPerMB is CPUPerS per produced MB/s: the cost of a MB, whatever
	// share of the machine the run got.
	CPUmsPerMB float64 `json:"cpu_ms_per_mb"`
	GCs        uint32  `json:"gcs"`

	GetsPerS  float64            `json:"gets_per_s"` // Readers × the GETs a follower's plan issues per object
	CostUSD   float64            `json:"usd_per_broker_month"`
	CostLines map[string]float64 `json:"usd_lines"`
}

// Report is a whole run.
type Report struct {
	Config struct {
		Partitions        []int   `json:"partitions"`
		RateMBps          float64 `json:"rate_mbps"`
		DurationS         float64 `json:"duration_s"`
		WarmupS           float64 `json:"warmup_s"`
		BatchBytes        int     `json:"batch_bytes"`
		RecordBytes       int     `json:"record_bytes"`
		Producers         int     `json:"producers"`
		Store             string  `json:"store"`
		LatencyModel      string  `json:"latency_model"`
		Readers           int     `json:"readers"`
		MetadataCrossings float64 `json:"metadata_az_crossings"`
		Sheet             string  `json:"sheet"`
		CPUs              int     `json:"cpus"`
		GoMaxProcs        int     `json:"gomaxprocs"`
		CombinerInterval  float64 `json:"combiner_interval_ms"`
		UploadBytes       int64   `json:"combiner_upload_bytes"`
	} `json:"config"`
	Results []Result `json:"results"`
}

// Run measures every partition count of cfg in turn, printing progress
// lines to progress (may be nil).
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	model, err := latency.Preset(cfg.LatencyModel)
	if err != nil {
		return nil, err
	}
	book, err := cost.DefaultBook()
	if err != nil {
		return nil, err
	}
	sheet, err := book.Sheet(cfg.Sheet)
	if err != nil {
		return nil, err
	}
	cm, err := cost.NewModel(book)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	c := &rep.Config
	c.Partitions, c.RateMBps, c.DurationS, c.WarmupS = cfg.Partitions, cfg.RateMBps, cfg.Duration.Seconds(), cfg.Warmup.Seconds()
	c.BatchBytes, c.RecordBytes, c.Producers, c.Store = cfg.BatchBytes, cfg.RecordBytes, cfg.Producers, cfg.Store
	c.LatencyModel, c.Readers, c.MetadataCrossings, c.Sheet = model.Name, cfg.Readers, cfg.MetadataCrossings, sheet.Name
	c.CPUs, c.GoMaxProcs = runtime.NumCPU(), runtime.GOMAXPROCS(0)
	c.CombinerInterval = float64(broker.DefaultCombinerTaskInterval) / float64(time.Millisecond)
	c.UploadBytes = broker.DefaultCombinerTaskUploadBytes
	for _, n := range cfg.Partitions {
		r := &run{cfg: cfg, n: n, model: model, progress: progress}
		res, err := r.do(ctx)
		if err != nil {
			return nil, fmt.Errorf("%d partitions: %w", n, err)
		}
		u := cost.UsageFromLedger(r.puts, r.window, 1, 0)
		u.Gets, u.BytesGot = r.gets, r.getBytes
		u.CrossAZBytes = int64(float64(r.metaWindowBytes) * cfg.MetadataCrossings)
		b, err := cm.MonthlyCost(u, sheet)
		if err != nil {
			return nil, fmt.Errorf("%d partitions: pricing: %w", n, err)
		}
		res.CostUSD, res.CostLines = b.TotalUSD, map[string]float64{}
		for _, l := range b.Lines {
			if l.USD != 0 {
				res.CostLines[l.Item] = l.USD
			}
		}
		rep.Results = append(rep.Results, *res)
		fmt.Fprintf(progress, "  %d partitions done: %.1f MB/s produced, %.0f PUTs/s, %.0f metadata events/s, bootstrap %.0f ms, $%.2f/broker-month\n",
			n, res.ProducedMBps, res.PutsPerS, res.MetaEventsPerS, res.BootstrapMs, res.CostUSD)
	}
	return rep, nil
}

// run is one partition count.
type run struct {
	cfg      Config
	n        int
	model    latency.Model
	progress io.Writer

	window          time.Duration
	puts            ledger.Snapshot // the window's ledger delta
	gets, getBytes  int64
	metaWindowBytes int64
}

type memSample struct{ heap, rss uint64 }

func sampleMem() memSample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{heap: ms.HeapInuse, rss: rss()}
}

// rss reads the resident set size from /proc/self/statm (0 elsewhere).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

func (r *run) do(ctx context.Context) (*Result, error) {
	cfg, log := r.cfg, r.cfg.Logger
	runtime.GC()
	debug.FreeOSMemory()
	dir, err := os.MkdirTemp("", "kwal-scalebench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	emb, err := metadata.StartEmbedded(filepath.Join(dir, "kfake"), log)
	if err != nil {
		return nil, err
	}
	defer emb.Close()
	var inner objstore.Store = mem.New()
	if cfg.Store == "fs" {
		if inner, err = fsstore.New(filepath.Join(dir, "store")); err != nil {
			return nil, err
		}
	}
	slow, err := latency.New(inner, r.model, clock.Real{}, uint64(r.n))
	if err != nil {
		return nil, err
	}
	bc := broker.Config{BrokerID: 1, Rack: "az1", LogDir: filepath.Join(dir, "logs"), Logger: log}
	bc.RemoteWAL.SystemEnable = true
	if err := bc.CheckSettings(); err != nil {
		return nil, err
	}
	rw, err := rwnode.NewRemoteWALReplicatorFor(&bc, &rwnode.RemoteWALParts{Store: slow, Bootstrap: emb.Bootstrap()}, log)
	if err != nil {
		return nil, err
	}
	closed := false
	closeRW := func() {
		if !closed {
			closed = true
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = rw.Close(cctx)
			cancel()
		}
	}
	defer closeRW()
	pol := metadata.RetentionPolicy{Retention: bc.RemoteWAL.Retention}
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	res := &Result{Partitions: r.n, TargetMBps: cfg.RateMBps, RetentionS: pol.Retention.Seconds()}
	base := sampleMem()
	res.BaseHeapMB, res.BaseRSSMB = mb(base.heap), mb(base.rss)

	// One leader log per partition, each with its slice task.
	tps := make([]broker.TopicPartition, r.n)
	logs := make([]*kafkalog.Log, r.n)
	for i := range logs {
		tps[i] = broker.TopicPartition{Topic: "scale", Partition: int32(i)}
		if logs[i], err = kafkalog.Open(filepath.Join(dir, "logs", strconv.Itoa(i)), kafkalog.Config{Logger: log}); err != nil {
			return nil, fmt.Errorf("open log %d: %w", i, err)
		}
		defer logs[i].Close()
		if err := rw.StartLeader(tps[i], logs[i], 1, 0); err != nil {
			return nil, err
		}
		if (i+1)%1000 == 0 {
			fmt.Fprintf(r.progress, "  %d partitions: %d leader logs open\n", r.n, i+1)
		}
	}

	// Producers: each owns the partitions i ≡ g (mod Producers) and appends
	// at its share of the rate, round robin.
	tmpl := kafkalogtest.MakeBatchN(0, 0, cfg.BatchBytes/cfg.RecordBytes, cfg.RecordBytes-8, time.Now().UnixMilli())
	// A log's first append at a leader epoch writes its leader-epoch
	// checkpoint (a file created, written and fsynced): a one-off per
	// partition, not the steady state, which at 10,000 partitions and a
	// CPU-starved rate would fall inside the window. Prime every log first.
	for i, l := range logs {
		if _, err := l.AppendAsLeader(bytes.Clone(tmpl), 1); err != nil {
			return nil, fmt.Errorf("prime log %d: %w", i, err)
		}
	}
	var produced, batches atomic.Int64
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	var wg sync.WaitGroup
	errc := make(chan error, cfg.Producers)
	perBatch := time.Duration(float64(time.Second) * float64(len(tmpl)) * float64(cfg.Producers) / (cfg.RateMBps * 1e6))
	start := time.Now()
	for g := 0; g < min(cfg.Producers, r.n); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var own []int
			for i := g; i < r.n; i += cfg.Producers {
				own = append(own, i)
			}
			next := start
			for k := 0; pctx.Err() == nil; k++ {
				// Paced, and never bursting to repay a debt: a producer
				// more than maxDebt behind drops it, so the produced rate
				// shows what the broker sustained, not a catch-up.
				now := time.Now()
				if d := next.Sub(now); d > 0 {
					time.Sleep(d)
				} else if -d > maxDebt {
					next = now
				}
				next = next.Add(perBatch)
				if _, err := logs[own[k%len(own)]].AppendAsLeader(bytes.Clone(tmpl), 1); err != nil {
					errc <- err
					return
				}
				produced.Add(int64(len(tmpl)))
				batches.Add(1)
			}
		}()
	}

	// Warm up, then open the window.
	if err := r.wait(ctx, cfg.Warmup, errc); err != nil {
		return nil, err
	}
	var prof *os.File
	if cfg.CPUProfile != "" {
		if prof, err = os.Create(fmt.Sprintf("%s-%d.pprof", cfg.CPUProfile, r.n)); err != nil {
			return nil, err
		}
		defer prof.Close()
		if err := pprof.StartCPUProfile(prof); err != nil {
			return nil, err
		}
	}
	gc0 := gcCount()
	led0, cpu0, prod0, bat0, t0 := bc.Ledger.Snapshot(), cpuTime(), produced.Load(), batches.Load(), time.Now()
	var peak memSample
	for elapsed := time.Duration(0); elapsed < cfg.Duration; {
		step := min(time.Second, cfg.Duration-elapsed)
		if err := r.wait(ctx, step, errc); err != nil {
			return nil, err
		}
		elapsed = time.Since(t0)
		m := sampleMem()
		if cfg.Store == "mem" {
			m.heap -= min(m.heap, uint64(max(0, bc.Ledger.Snapshot().ByKind[ledger.Put].BytesWritten)))
		}
		peak.heap, peak.rss = max(peak.heap, m.heap), max(peak.rss, m.rss)
		d := bc.Ledger.Snapshot().Sub(led0)
		fmt.Fprintf(r.progress, "  %d partitions %5.1fs/%v: produced %.1f MB/s, %.0f PUTs/s, heap %.0f MB, rss %.0f MB, cpu %.2f s/s\n",
			r.n, elapsed.Seconds(), cfg.Duration, float64(produced.Load()-prod0)/1e6/elapsed.Seconds(),
			float64(d.ByKind[ledger.Put].Requests)/elapsed.Seconds(), mb(m.heap), mb(m.rss),
			(cpuTime()-cpu0).Seconds()/elapsed.Seconds())
	}
	t1 := time.Now()
	r.window = t1.Sub(t0)
	cpu1, prod1, bat1 := cpuTime(), produced.Load(), batches.Load()
	r.puts = bc.Ledger.Snapshot().Sub(led0)
	if prof != nil {
		pprof.StopCPUProfile()
		if err := writeHeapProfile(fmt.Sprintf("%s-%d.heap.pprof", cfg.CPUProfile, r.n)); err != nil {
			return nil, err
		}
	}
	end := sampleMem()
	// A mem store holds every object in the heap; that is the store's
	// memory, not the broker's, so it is taken out of the heap figures.
	if cfg.Store == "mem" {
		stored := uint64(max(0, bc.Ledger.Snapshot().ByKind[ledger.Put].BytesWritten))
		end.heap -= min(end.heap, stored)
		res.StoreHeldMB = mb(stored)
	}
	res.GCs = gcCount() - gc0
	res.HeapMB, res.RSSMB = mb(end.heap), mb(end.rss)
	res.HeapPeakMB, res.RSSPeakMB = mb(max(peak.heap, end.heap)), mb(max(peak.rss, end.rss))
	secs := r.window.Seconds()
	res.WindowS = secs
	res.CPUPerS = (cpu1 - cpu0).Seconds() / secs
	res.ProducedMBps = float64(prod1-prod0) / 1e6 / secs
	res.BatchesPerS = float64(bat1-bat0) / secs
	if res.ProducedMBps > 0 {
		res.CPUmsPerMB = 1e3 * res.CPUPerS / res.ProducedMBps
	}
	put := r.puts.ByKind[ledger.Put]
	res.PutsPerS = float64(put.Requests) / secs
	res.PutMBps = float64(put.BytesWritten) / 1e6 / secs

	// A follower node starts while the leader keeps producing: it reads
	// the metadata topic into a fresh index; it must see at least what was
	// published before it started.
	published := make([]int64, r.n)
	var unpublished int64
	for i, tp := range tps {
		published[i], _ = rw.UploadedOffset(tp)
		unpublished += logs[i].LogEndOffset() - published[i]
	}
	res.UnpublishedMB = float64(unpublished) * float64(cfg.RecordBytes) / (1 << 20)
	fstate := metadata.NewState()
	follow := make([]metadata.TopicPartition, r.n)
	for i, tp := range tps {
		follow[i] = metadata.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	}
	fmt.Fprintf(r.progress, "  %d partitions: a follower bootstraps from the metadata topic\n", r.n)
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	b0 := time.Now()
	cons, err := metadata.StartConsumer(bctx, metadata.ConsumerConfig{
		TopicConfig: metadata.TopicConfig{Bootstrap: emb.Bootstrap(), ClientID: "kwal-scalebench-follower"}, Follow: follow,
	}, fstate, clock.Real{}, log)
	if err != nil {
		return nil, fmt.Errorf("follower metadata consumer: %w", err)
	}
	defer cons.Close()
	select {
	case <-cons.Ready():
	case <-bctx.Done():
		return nil, fmt.Errorf("follower metadata consumer not caught up after 5 minutes")
	}
	res.BootstrapMs = float64(time.Since(b0)) / float64(time.Millisecond)
	res.BootstrapRecords = cons.Stats().Records
	stopProducers()
	wg.Wait()
	if err := r.indexFigures(fstate, follow, published, res); err != nil {
		return nil, err
	}
	closeRW()

	// The metadata topic: its size, and what the window added.
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Minute)
	defer ccancel()
	cen, err := takeCensus(cctx, emb.Bootstrap(), metadata.DefaultTopic, t0, t1)
	if err != nil {
		return nil, err
	}
	r.metaWindowBytes = cen.InWindowBytes
	res.MetaRecords, res.MetaBytes = cen.Records, cen.Bytes
	res.MetaEventsPerS, res.MetaBytesPerS = float64(cen.InWindow)/secs, float64(cen.InWindowBytes)/secs
	res.MetaSteadyBytes = res.MetaBytesPerS * res.RetentionS
	return res, nil
}

// indexFigures checks the follower's index and derives the GETs its plan
// would issue: one ranged GET per partition per object (adjacent slices of
// one partition in one object are read together).
func (r *run) indexFigures(st *metadata.State, follow []metadata.TopicPartition, published []int64, res *Result) error {
	objects := map[string]bool{}
	var pairs, slices, bytes int64
	for i, tp := range follow {
		got := st.Slices(tp, 0)
		next := int64(0)
		inObj := map[string]bool{}
		for _, s := range got {
			if s.BaseOffset != next {
				return fmt.Errorf("follower index of %s: slice at %d, want %d (a gap)", tp, s.BaseOffset, next)
			}
			next = s.LastOffset + 1
			objects[s.ObjectKey] = true
			inObj[s.ObjectKey] = true
			slices++
			bytes += s.Length
		}
		if next < published[i] {
			return fmt.Errorf("follower index of %s ends at %d, but %d was published before it started", tp, next, published[i])
		}
		if len(got) > 0 {
			res.IndexedPartitions++
		}
		pairs += int64(len(inObj))
	}
	if len(objects) == 0 {
		return nil
	}
	res.SlicesPerPut = float64(slices) / float64(len(objects))
	getsPerObject := float64(pairs) / float64(len(objects))
	put := r.puts.ByKind[ledger.Put]
	r.gets = int64(float64(put.Requests) * getsPerObject * float64(r.cfg.Readers))
	r.getBytes = int64(float64(r.cfg.Readers) * float64(put.BytesWritten))
	if pairs > 0 {
		// GETs read the slices, not the object's header and footer.
		r.getBytes = int64(float64(r.cfg.Readers) * float64(put.Requests) * getsPerObject * float64(bytes) / float64(pairs))
	}
	res.GetsPerS = float64(r.gets) / r.window.Seconds()
	return nil
}

// wait waits d, or returns a producer's error or ctx's.
func (r *run) wait(ctx context.Context, d time.Duration, errc <-chan error) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case err := <-errc:
		return fmt.Errorf("producing: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func writeHeapProfile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	runtime.GC()
	err = pprof.WriteHeapProfile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func gcCount() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.NumGC
}

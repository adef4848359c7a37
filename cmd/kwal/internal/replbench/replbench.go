package replbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/follower"
	"github.com/kwal/kwal/internal/stats"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/latency"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/remotewal"

	"github.com/kwal/kwal/cmd/kwal/internal/benchreport"
)

// Config is one run.
type Config struct {
	Partitions   int
	BatchBytes   int           // bytes per produced batch (1 KiB records)
	RateMBps     float64       // produced MB/s over all partitions
	Duration     time.Duration // how long to produce
	Interval     time.Duration // combiner interval
	TaskInterval time.Duration // remotewal task interval: with the combiner calling for bytes, only the retry delay after a failed cut
	UploadBytes  int64
	LatencyModel string // objstore/latency preset
	Logger       *slog.Logger
}

// Stages in order.
var Stages = []string{"cut", "queue", "put", "publish", "delivery", "issue", "get", "append", "total"}

// Result is what one run measured.
type Result struct {
	Config struct {
		Partitions   int     `json:"partitions"`
		RateMBps     float64 `json:"rate_mbps"`
		IntervalMs   float64 `json:"combiner_interval_ms"`
		TaskMs       float64 `json:"task_interval_ms"`
		LatencyModel string  `json:"latency_model"`
		DurationS    float64 `json:"duration_s"`
		CPUs         int     `json:"cpus"`
	} `json:"config"`
	Slices int `json:"slices"`
	// P50 and P99 per stage, in milliseconds.
	P50 map[string]float64 `json:"p50_ms"`
	P99 map[string]float64 `json:"p99_ms"`
	// Objects uploaded and GETs issued.
	Objects int64 `json:"objects"`
	GETs    int64 `json:"gets"`
}

type sliceKey struct {
	tp   metadata.TopicPartition
	base int64
}

// recorder collects stage timestamps.
type recorder struct {
	mu        sync.Mutex
	appended  map[sliceKey]time.Time // leader append of the batch at base
	submitted map[sliceKey]time.Time
	keyOf     map[sliceKey]string
	published map[string]time.Time
	putStart  map[string]time.Time
	putEnd    map[string]time.Time
	delivered map[string]time.Time
	getStart  map[string]time.Time
	getEnd    map[string]time.Time
	followed  map[sliceKey]time.Time // follower append of the batch at base
}

func newRecorder() *recorder {
	return &recorder{
		appended: map[sliceKey]time.Time{}, submitted: map[sliceKey]time.Time{}, keyOf: map[sliceKey]string{},
		published: map[string]time.Time{}, putStart: map[string]time.Time{}, putEnd: map[string]time.Time{},
		delivered: map[string]time.Time{}, getStart: map[string]time.Time{}, getEnd: map[string]time.Time{}, followed: map[sliceKey]time.Time{},
	}
}

func setOnce[K comparable](m map[K]time.Time, k K, t time.Time) {
	if _, ok := m[k]; !ok {
		m[k] = t
	}
}

// sink times submits and learns each slice's object. It passes Announce
// and Withdraw through, so the tasks hold their bytes until the combiner
// calls for them, as in the broker's write path (remotewal.NewWritePath).
type sink struct {
	next remotewal.PackCaller
	r    *recorder
}

var _ remotewal.PackCaller = sink{}

func (s sink) Announce(since time.Time) combiner.Ticket { return s.next.Announce(since) }
func (s sink) Withdraw(tk combiner.Ticket)              { s.next.Withdraw(tk) }

func (s sink) Submit(ctx context.Context, sl combiner.Slice) error {
	k := sliceKey{sl.TopicPartition, sl.BaseOffset}
	inner := sl.Done
	sl.Done = func(obj combiner.UploadedObject, err error) {
		now := time.Now()
		if err == nil {
			s.r.mu.Lock()
			s.r.keyOf[k] = obj.Key
			setOnce(s.r.published, obj.Key, now)
			s.r.mu.Unlock()
		}
		if inner != nil {
			inner(obj, err)
		}
	}
	s.r.mu.Lock()
	setOnce(s.r.submitted, k, time.Now())
	s.r.mu.Unlock()
	return s.next.Submit(ctx, sl)
}

// store times PUTs and GETs by key.
type store struct {
	objstore.Store
	r *recorder
}

func (s store) Put(ctx context.Context, key string, body []byte, o objstore.PutOptions) error {
	t0 := time.Now()
	err := s.Store.Put(ctx, key, body, o)
	s.r.mu.Lock()
	setOnce(s.r.putStart, key, t0)
	if err == nil {
		setOnce(s.r.putEnd, key, time.Now())
	}
	s.r.mu.Unlock()
	return err
}

func (s store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	t0 := time.Now()
	b, err := s.Store.GetRange(ctx, key, off, n)
	if err == nil {
		s.r.mu.Lock()
		setOnce(s.r.getStart, key, t0)
		setOnce(s.r.getEnd, key, time.Now())
		s.r.mu.Unlock()
	}
	return b, err
}

// followerLog times the follower's appends.
type followerLog struct {
	*kafkalog.Log
	tp metadata.TopicPartition
	r  *recorder
}

func (l followerLog) AppendAsFollower(b []byte) (kafkalog.AppendInfo, error) {
	return l.timed(b, l.Log.AppendAsFollower)
}

func (l followerLog) AppendVerifiedAsFollower(b []byte) (kafkalog.AppendInfo, error) {
	return l.timed(b, l.Log.AppendVerifiedAsFollower)
}

func (l followerLog) timed(b []byte, appendFn func([]byte) (kafkalog.AppendInfo, error)) (kafkalog.AppendInfo, error) {
	info, err := appendFn(b)
	if err == nil {
		now := time.Now()
		l.r.mu.Lock()
		_ = kafkalog.SplitBatches(b, func(h kafkalog.BatchHeader, _ []byte) error {
			setOnce(l.r.followed, sliceKey{l.tp, h.BaseOffset}, now)
			return nil
		})
		l.r.mu.Unlock()
	}
	return info, err
}

// leaders answers the follower's leader questions straight from the leader
// logs (in a broker these come from FollowerFetch).
type leaders struct {
	logs map[metadata.TopicPartition]*kafkalog.Log
}

func (l leaders) Leader(tp metadata.TopicPartition) (follower.LeaderInfo, bool) {
	lg, ok := l.logs[tp]
	if !ok {
		return follower.LeaderInfo{}, false
	}
	return follower.LeaderInfo{Epoch: 1, LogEnd: lg.LogEndOffset(), Rack: "az1"}, true
}

func (l leaders) EndOffsetForEpoch(_ context.Context, tp metadata.TopicPartition, epoch int32) (int32, int64, error) {
	e, off := l.logs[tp].EndOffsetForEpoch(epoch)
	return e, off, nil
}

func (l leaders) Fetch(_ context.Context, tp metadata.TopicPartition, _ int32, offset int64, maxBytes int) ([]byte, error) {
	return l.logs[tp].Read(offset, maxBytes)
}

// Run runs one measurement.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Result, error) {
	if cfg.Partitions <= 0 || cfg.BatchBytes <= 0 || cfg.RateMBps <= 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("replbench: partitions, batch bytes, rate and duration must be positive")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	model, err := latency.Preset(cfg.LatencyModel)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kwal-replbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rec := newRecorder()
	slow, err := latency.New(mem.New(), model, clock.Real{}, 5)
	if err != nil {
		return nil, err
	}
	st := store{Store: slow, r: rec}

	emb, err := metadata.StartEmbedded(dir+"/kfake", cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer emb.Close()
	tcfg := metadata.TopicConfig{Bootstrap: emb.Bootstrap()}
	pub, err := metadata.NewPublisher(tcfg, clock.Real{}, cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	comb, err := combiner.New(combiner.Config{
		BrokerID: 1, Interval: cfg.Interval, UploadBytes: cfg.UploadBytes,
		Writer: combiner.StoreWriter{Store: st}, Publisher: &remotewal.MetadataPublisher{P: pub}, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	mgr, err := remotewal.NewManager(remotewal.Config{Interval: cfg.TaskInterval, Logger: cfg.Logger}, sink{next: comb, r: rec})
	if err != nil {
		return nil, err
	}

	fstate := metadata.NewState()
	cons, err := metadata.StartConsumer(ctx, metadata.ConsumerConfig{TopicConfig: tcfg}, fstate, clock.Real{}, cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	select {
	case <-cons.Ready():
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("replbench: metadata consumer not ready")
	}

	leaderLogs := map[metadata.TopicPartition]*kafkalog.Log{}
	followerLogs := map[metadata.TopicPartition]*kafkalog.Log{}
	for i := 0; i < cfg.Partitions; i++ {
		tp := metadata.TopicPartition{Topic: "bench", Partition: int32(i)}
		ll, err := kafkalog.Open(fmt.Sprintf("%s/leader/%d", dir, i), kafkalog.Config{Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		defer ll.Close()
		fl, err := kafkalog.Open(fmt.Sprintf("%s/follower/%d", dir, i), kafkalog.Config{Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		defer fl.Close()
		leaderLogs[tp], followerLogs[tp] = ll, fl
		if err := mgr.StartPartition(tp, ll, 1, 0); err != nil {
			return nil, err
		}
	}
	ld := leaders{logs: leaderLogs}
	fol, err := follower.New(follower.Config{
		Store: st, Index: follower.StateIndex{State: fstate}, Leader: ld, LeaderClient: ld,
		Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	for tp, fl := range followerLogs {
		if err := fol.AddPartition(tp, followerLog{Log: fl, tp: tp, r: rec}); err != nil {
			return nil, err
		}
	}

	// Delivery: note when each object first appears in the follower's index.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		from := map[metadata.TopicPartition]int64{}
		for {
			ch := fstate.Changed()
			now := time.Now()
			rec.mu.Lock()
			for tp := range followerLogs {
				for _, s := range fstate.Slices(tp, from[tp]) {
					setOnce(rec.delivered, s.ObjectKey, now)
					from[tp] = max(from[tp], s.LastOffset+1)
				}
			}
			rec.mu.Unlock()
			select {
			case <-ch:
			case <-watchCtx.Done():
				return
			}
		}
	}()

	// Produce at the target rate, round robin over partitions.
	tps := make([]metadata.TopicPartition, 0, len(leaderLogs))
	for tp := range leaderLogs {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b metadata.TopicPartition) int { return int(a.Partition - b.Partition) })
	perBatch := time.Duration(float64(time.Second) * float64(cfg.BatchBytes) / (cfg.RateMBps * 1e6))
	recs := max(1, cfg.BatchBytes/1024)
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	n := 0
	lastReport := start
	for time.Since(start) < cfg.Duration {
		due := start.Add(time.Duration(n) * perBatch)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		tp := tps[rng.IntN(len(tps))]
		info, err := leaderLogs[tp].AppendAsLeader(kafkalogtest.MakeBatchN(0, 0, recs, 1024-8, time.Now().UnixMilli()), 1)
		if err != nil {
			return nil, err
		}
		rec.mu.Lock()
		rec.appended[sliceKey{tp, info.FirstOffset}] = time.Now()
		rec.mu.Unlock()
		n++
		if progress != nil && time.Since(lastReport) > time.Second {
			lastReport = time.Now()
			fmt.Fprintf(progress, "\r  producing %4.1fs / %v, %d batches", time.Since(start).Seconds(), cfg.Duration, n)
		}
	}
	// Let the follower catch up.
	deadline := time.Now().Add(30 * time.Second)
	for tp, ll := range leaderLogs {
		for followerLogs[tp].LogEndOffset() < ll.LogEndOffset() {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("replbench: follower of %s stuck at %d of %d", tp, followerLogs[tp].LogEndOffset(), ll.LogEndOffset())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if progress != nil {
		fmt.Fprintln(progress)
	}
	stopWatch()
	<-watchDone
	gets := fol.Metrics().GETs
	fol.Close()
	mgr.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	comb.Close(cctx)
	cancel()
	objects := comb.Metrics().ObjectsPub

	res := &Result{P50: map[string]float64{}, P99: map[string]float64{}, Objects: objects, GETs: gets}
	res.Config.Partitions, res.Config.RateMBps, res.Config.LatencyModel = cfg.Partitions, cfg.RateMBps, model.Name
	res.Config.IntervalMs, res.Config.TaskMs = ms(cfg.Interval), ms(cfg.TaskInterval)
	res.Config.DurationS, res.Config.CPUs = cfg.Duration.Seconds(), runtime.NumCPU()
	stages := map[string][]float64{}
	rec.mu.Lock()
	for k, sub := range rec.submitted {
		key, ok := rec.keyOf[k]
		a, okA := rec.appended[k]
		f, okF := rec.followed[k]
		if !ok || !okA || !okF {
			continue
		}
		p0, p1, pub, del, get0, get := rec.putStart[key], rec.putEnd[key], rec.published[key], rec.delivered[key], rec.getStart[key], rec.getEnd[key]
		if p0.IsZero() || p1.IsZero() || pub.IsZero() || del.IsZero() || get0.IsZero() || get.IsZero() {
			continue
		}
		res.Slices++
		add := func(name string, from, to time.Time) { stages[name] = append(stages[name], ms(max(0, to.Sub(from)))) }
		add("cut", a, sub)
		add("queue", sub, p0)
		add("put", p0, p1)
		add("publish", p1, pub)
		add("delivery", pub, del)
		add("issue", laterOf(del, pub), laterOf(get0, laterOf(del, pub)))
		add("get", laterOf(get0, laterOf(del, pub)), get)
		add("append", get, f)
		add("total", a, f)
	}
	rec.mu.Unlock()
	for _, s := range Stages {
		res.P50[s], res.P99[s] = stats.Percentile(stages[s], 50), stats.Percentile(stages[s], 99)
	}
	return res, nil
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Median returns, per stage, the median over runs of each run's p50 and p99.
func Median(runs []*Result) (p50, p99 map[string]float64) {
	p50, p99 = map[string]float64{}, map[string]float64{}
	for _, s := range Stages {
		var a, b []float64
		for _, r := range runs {
			a, b = append(a, r.P50[s]), append(b, r.P99[s])
		}
		p50[s], p99[s] = stats.Median(a), stats.Median(b)
	}
	return
}

// WriteTable prints the medians of runs as a stage table.
func WriteTable(w io.Writer, runs []*Result) {
	if len(runs) == 0 {
		return
	}
	p50, p99 := Median(runs)
	c := runs[0].Config
	fmt.Fprintf(w, "replication lag by stage: %d partitions, %.1f MB/s, combiner interval %.0f ms, task interval %.0f ms,\n",
		c.Partitions, c.RateMBps, c.IntervalMs, c.TaskMs)
	fmt.Fprintf(w, "latency model %q, medians of %d runs on %d CPUs\n", c.LatencyModel, len(runs), c.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tp50 ms\tp99 ms\t")
	for _, s := range Stages {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t\n", s, p50[s], p99[s])
	}
	tw.Flush()
	var slicesN int
	var objs, gets int64
	for _, r := range runs {
		slicesN += r.Slices
		objs += r.Objects
		gets += r.GETs
	}
	fmt.Fprintf(w, "%d slices timed, %d objects, %d GETs over all runs\n", slicesN, objs, gets)
}

// WriteJSON writes every run and the medians.
func WriteJSON(w io.Writer, runs []*Result) error {
	p50, p99 := Median(runs)
	return benchreport.WriteJSON(w, struct {
		Runs      []*Result          `json:"runs"`
		MedianP50 map[string]float64 `json:"median_p50_ms"`
		MedianP99 map[string]float64 `json:"median_p99_ms"`
	}{runs, p50, p99})
}

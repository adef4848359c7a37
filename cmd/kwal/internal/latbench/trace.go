package latbench

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/objstore"
)

// Stages of an end-to-end record, from its creation to its consumption
// by the consumer in the follower's rack. Each boundary is the first time
// the offset showed in a broker's partition status, seen by a watcher
// woken by the broker's change feed (broker.Broker.Changed), so a stage
// carries the watcher's scheduling delay (tens of µs on a quiet machine).
const (
	// StageProduce: created → in the leader's log (client, network,
	// leader append).
	StageProduce = "produce"
	// StageReplicate: in the leader's log → in the follower's log
	// (classic: the replica fetch; remotewal: cut, pack, PUT, publish,
	// metadata delivery, GET, append).
	StageReplicate = "replicate"
	// StageHW: in the follower's log → below the follower's high
	// watermark (the follower reports its log end, the leader advances
	// the HW, the follower learns it).
	StageHW = "hw"
	// StageDeliver: below the follower's HW → consumed (the consumer's
	// fetch on the follower completes and the client hands the record
	// over).
	StageDeliver = "deliver"
)

// E2EStages lists the stages in path order.
var E2EStages = []string{StageProduce, StageReplicate, StageHW, StageDeliver}

// offsetMarks are the boundaries the tracer records for one offset.
type offsetMarks struct {
	leaderLog, followerLog, followerHW time.Time
}

// offsetTracer records when each offset of one partition first reached
// the leader's log, the follower's log and the follower's high watermark.
type offsetTracer struct {
	wg   sync.WaitGroup
	stop context.CancelFunc
	mu   struct {
		sync.Mutex
		marks map[int64]*offsetMarks
		// progress is closed (and replaced) when marks change.
		progress chan struct{}
	}
}

// traceOffsets starts watching tp on leader and follower; Close stops it.
// Where each watcher starts (the log end and high watermark it will not
// mark) is read here, before it returns, so an offset appended after the
// call is marked however late the watchers' goroutines first run.
func traceOffsets(leader, follower *broker.Broker, tp broker.TopicPartition) *offsetTracer {
	ctx, cancel := context.WithCancel(context.Background())
	t := &offsetTracer{stop: cancel}
	t.mu.marks = map[int64]*offsetMarks{}
	t.wg.Add(2)
	lw := t.newWatcher(leader, tp, func(m *offsetMarks) *time.Time { return &m.leaderLog }, nil)
	fw := t.newWatcher(follower, tp, func(m *offsetMarks) *time.Time { return &m.followerLog },
		func(m *offsetMarks) *time.Time { return &m.followerHW })
	go lw.run(ctx)
	go fw.run(ctx)
	return t
}

// watcher marks, at every change of b, the offsets that newly reached b's
// log end (logEnd) and high watermark (hw, when not nil).
type watcher struct {
	t               *offsetTracer
	b               *broker.Broker
	tp              broker.TopicPartition
	logEnd, hw      func(*offsetMarks) *time.Time
	changed         <-chan struct{}
	seenLEO, seenHW int64 // -1: the partition was not there yet
}

// newWatcher takes b's change feed and the partition's state now: offsets
// already there are not marked.
func (t *offsetTracer) newWatcher(b *broker.Broker, tp broker.TopicPartition, logEnd, hw func(*offsetMarks) *time.Time) *watcher {
	w := &watcher{t: t, b: b, tp: tp, logEnd: logEnd, hw: hw, seenLEO: -1, seenHW: -1}
	w.changed = b.Changed()
	if st, ok := b.PartitionStatus(tp); ok {
		w.seenLEO, w.seenHW = st.LogEnd, st.HighWatermark
	}
	return w
}

func (w *watcher) run(ctx context.Context) {
	defer w.t.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.changed:
		}
		// Take the next notification before reading the state, so a
		// change between the two is not missed.
		w.changed = w.b.Changed()
		st, ok := w.b.PartitionStatus(w.tp)
		if !ok {
			continue
		}
		now := time.Now()
		if w.seenLEO < 0 {
			w.seenLEO, w.seenHW = st.LogEnd, st.HighWatermark
		}
		w.t.mark(&w.seenLEO, st.LogEnd, now, w.logEnd)
		if w.hw != nil {
			w.t.mark(&w.seenHW, st.HighWatermark, now, w.hw)
		}
	}
}

func (t *offsetTracer) mark(seen *int64, upTo int64, now time.Time, field func(*offsetMarks) *time.Time) {
	if upTo <= *seen {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.progress != nil {
		close(t.mu.progress)
		t.mu.progress = nil
	}
	for off := *seen; off < upTo; off++ {
		m := t.mu.marks[off]
		if m == nil {
			m = &offsetMarks{}
			t.mu.marks[off] = m
		}
		if f := field(m); f.IsZero() {
			*f = now
		}
	}
	*seen = upTo
}

// markedAll waits until every record of recs has all three marks (each
// was in both logs and below the follower's HW before it was consumed, so
// the watchers, which re-read the state after every change, get there)
// or until ctx ends, and returns how many have them.
func (t *offsetTracer) markedAll(ctx context.Context, recs []consumedRecord) int {
	for {
		t.mu.Lock()
		n := 0
		for _, r := range recs {
			if m := t.mu.marks[r.offset]; m != nil && !m.leaderLog.IsZero() && !m.followerLog.IsZero() && !m.followerHW.IsZero() {
				n++
			}
		}
		if n == len(recs) {
			t.mu.Unlock()
			return n
		}
		if t.mu.progress == nil {
			t.mu.progress = make(chan struct{})
		}
		progress := t.mu.progress
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return n
		case <-progress:
		}
	}
}

// Close stops the watchers.
func (t *offsetTracer) Close() {
	t.stop()
	t.wg.Wait()
}

// consumedRecord is one record as the consumer saw it.
type consumedRecord struct {
	offset            int64
	created, consumed time.Time
}

// stages splits each consumed record's latency at the marks of its
// offset; a record whose marks are missing or out of order (it was in a
// log before the watchers started) is left out.
func (t *offsetTracer) stages(recs []consumedRecord) map[string]Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	per := map[string][]time.Duration{}
	for _, r := range recs {
		m := t.mu.marks[r.offset]
		if m == nil || m.leaderLog.IsZero() || m.followerLog.IsZero() || m.followerHW.IsZero() {
			continue
		}
		ts := []time.Time{r.created, m.leaderLog, m.followerLog, m.followerHW, r.consumed}
		if !slices.IsSortedFunc(ts, func(a, b time.Time) int { return a.Compare(b) }) {
			continue
		}
		for i, s := range E2EStages {
			per[s] = append(per[s], ts[i+1].Sub(ts[i]))
		}
	}
	out := map[string]Summary{}
	for s, ds := range per {
		out[s] = Summarize(ds)
	}
	return out
}

// timedStore times every PUT and ranged GET of the store under it (the
// latency model and the backend), so a run's report can state the
// store's own p50 and p99 as the run saw them.
type timedStore struct {
	objstore.Store
	mu struct {
		sync.Mutex
		puts, gets []time.Duration
	}
}

var (
	_ objstore.Store      = (*timedStore)(nil)
	_ objstore.BodyGetter = (*timedStore)(nil)
)

func (s *timedStore) Put(ctx context.Context, key string, body []byte, o objstore.PutOptions) error {
	t0 := time.Now()
	err := s.Store.Put(ctx, key, body, o)
	if err == nil {
		d := time.Since(t0)
		s.mu.Lock()
		s.mu.puts = append(s.mu.puts, d)
		s.mu.Unlock()
	}
	return err
}

func (s *timedStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	t0 := time.Now()
	b, err := s.Store.GetRange(ctx, key, off, n)
	if err == nil {
		s.got(time.Since(t0))
	}
	return b, err
}

// GetRangeBody times a GET whose body the store lends (objstore.GetBody):
// the followers read through it, so a store that lends bodies (or copies
// them into pooled buffers) is not made to copy into fresh memory here.
func (s *timedStore) GetRangeBody(ctx context.Context, key string, off, n int64) (*objstore.Body, error) {
	t0 := time.Now()
	b, err := objstore.GetBody(ctx, s.Store, key, off, n)
	if err == nil {
		s.got(time.Since(t0))
	}
	return b, err
}

func (s *timedStore) got(d time.Duration) {
	s.mu.Lock()
	s.mu.gets = append(s.mu.gets, d)
	s.mu.Unlock()
}

// mark returns how many PUTs and GETs were timed so far.
func (s *timedStore) mark() [2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return [2]int{len(s.mu.puts), len(s.mu.gets)}
}

// since summarizes the PUTs and GETs timed after m.
func (s *timedStore) since(m [2]int) (puts, gets Summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Summarize(s.mu.puts[m[0]:]), Summarize(s.mu.gets[m[1]:])
}

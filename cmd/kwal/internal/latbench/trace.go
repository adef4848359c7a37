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
	}
}

// traceOffsets starts watching tp on leader and follower; Close stops it.
func traceOffsets(leader, follower *broker.Broker, tp broker.TopicPartition) *offsetTracer {
	ctx, cancel := context.WithCancel(context.Background())
	t := &offsetTracer{stop: cancel}
	t.mu.marks = map[int64]*offsetMarks{}
	t.wg.Add(2)
	go t.watch(ctx, leader, tp, func(m *offsetMarks) *time.Time { return &m.leaderLog }, nil)
	go t.watch(ctx, follower, tp, func(m *offsetMarks) *time.Time { return &m.followerLog },
		func(m *offsetMarks) *time.Time { return &m.followerHW })
	return t
}

// watch marks, at every change of b, the offsets that newly reached b's
// log end (logEnd) and high watermark (hw, when not nil). Offsets already
// there when it starts are not marked.
func (t *offsetTracer) watch(ctx context.Context, b *broker.Broker, tp broker.TopicPartition, logEnd, hw func(*offsetMarks) *time.Time) {
	defer t.wg.Done()
	seenLEO, seenHW := int64(-1), int64(-1)
	for {
		changed := b.Changed()
		if st, ok := b.PartitionStatus(tp); ok {
			now := time.Now()
			if seenLEO < 0 {
				seenLEO, seenHW = st.LogEnd, st.HighWatermark
			}
			t.mark(&seenLEO, st.LogEnd, now, logEnd)
			if hw != nil {
				t.mark(&seenHW, st.HighWatermark, now, hw)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

func (t *offsetTracer) mark(seen *int64, upTo int64, now time.Time, field func(*offsetMarks) *time.Time) {
	if upTo <= *seen {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
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

var _ objstore.Store = (*timedStore)(nil)

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
		d := time.Since(t0)
		s.mu.Lock()
		s.mu.gets = append(s.mu.gets, d)
		s.mu.Unlock()
	}
	return b, err
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

package follower

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fault"
)

// stallFirst makes the first GET hang until its context is cancelled.
type stallFirst struct {
	objstore.Store
	calls     atomic.Int64
	cancelled atomic.Bool
}

func (s *stallFirst) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	if s.calls.Add(1) == 1 {
		<-ctx.Done()
		s.cancelled.Store(true)
		return nil, ctx.Err()
	}
	return s.Store.GetRange(ctx, key, off, length)
}

// TestHedgedRead: the first GET hangs; after HedgeDelay on the clock a
// second one answers, wins, and the first is cancelled.
func TestHedgedRead(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(81, 82))
	leader := r.addLeader(tp0, 0)
	fillLeader(t, leader, rng, 10, 0)
	slow := &stallFirst{Store: r.put}
	r.read = slow
	for _, o := range packObjects(t, r.put, "", cutSlices(t, tp0, leader, 0, leader.LogEndOffset(), rng, 1<<20), rng, 100, metadata.CodecNone) {
		r.ix.publish(o.key, o.entries...)
	}
	r.start()
	// The driver waiting for the read's hedge time (its one timer stands
	// for every read's hedge and budget), and the first GET stalled in the
	// store (else the hedge could reach the store first and be the GET
	// that stalls).
	waitFor(t, "the driver's timer at the hedge time", nil, 0, func() bool {
		next, ok := r.clk.Next()
		return ok && next.Equal(t0.Add(DefaultHedgeDelay)) && slow.calls.Load() == 1
	}, func() string { next, _ := r.clk.Next(); return fmt.Sprint(next.Sub(t0), slow.calls.Load()) })
	if m := r.f.Metrics(); m.GETs != 1 {
		t.Fatalf("hedged before the delay: %+v", m)
	}
	r.clk.Advance(DefaultHedgeDelay)
	r.waitCaughtUp(false)
	r.f.Close()
	m := r.f.Metrics()
	if m.Hedges != 1 || m.HedgeWins != 1 || m.GETs != 2 || !slow.cancelled.Load() {
		t.Fatalf("want one hedge that wins and a cancelled first GET: %+v cancelled=%v", m, slow.cancelled.Load())
	}
	r.checkAll()
}

// TestCatchUpRateLimit: a follower far behind reads at the capped rate on
// the clock; without the cap it catches up without the clock moving.
func TestCatchUpRateLimit(t *testing.T) {
	const rate = 64 << 10
	for _, limited := range []bool{false, true} {
		t.Run(fmt.Sprintf("limited=%v", limited), func(t *testing.T) {
			r := newRig(t)
			defer r.stop()
			rng := rand.New(rand.NewPCG(91, 92))
			leader := r.addLeader(tp0, 0)
			fillLeader(t, leader, rng, 200, 0)
			for _, o := range packObjects(t, r.put, "", cutSlices(t, tp0, leader, 0, leader.LogEndOffset(), rng, 8<<10), rng, 1, metadata.CodecNone) {
				r.ix.publish(o.key, o.entries...)
			}
			if limited {
				r.cfg = func(c *Config) {
					c.CatchUpBytesPerSec, c.CatchUpBurstBytes, c.MaxRangeBytes = rate, 16<<10, 16<<10
					c.HedgeDelay = -1
				}
			}
			r.start()
			r.waitCaughtUp(limited)
			r.checkAll()
			m := r.f.Metrics()
			elapsed := r.clk.Now().Sub(t0)
			if !limited {
				if elapsed != 0 || m.RateLimited != 0 {
					t.Fatalf("unlimited run waited: %v, %+v", elapsed, m)
				}
				return
			}
			// The last read may run into debt, so the floor is one read short.
			floor := time.Duration(float64(m.BytesRead-(16<<10)-(16<<10)) / rate * float64(time.Second))
			if m.RateLimited == 0 || elapsed < floor {
				t.Fatalf("read %d bytes in %v of clock time (floor %v) at %d B/s: %+v", m.BytesRead, elapsed, floor, rate, m)
			}
			t.Logf("read %d bytes in %v of clock time at a cap of %d B/s", m.BytesRead, elapsed, rate)
		})
	}
}

// switchStore lets a test turn faults off.
type switchStore struct {
	objstore.Store
	mu     sync.Mutex
	faulty objstore.Store
}

func (s *switchStore) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	s.mu.Lock()
	st := s.faulty
	s.mu.Unlock()
	if st != nil {
		return st.GetRange(ctx, key, off, length)
	}
	return s.Store.GetRange(ctx, key, off, length)
}

func (s *switchStore) heal() {
	s.mu.Lock()
	s.faulty = nil
	s.mu.Unlock()
}

// TestPropertyPrefixAndCatchUp runs random schedules: the leader appends
// under rising epochs while slices are uploaded in random objects; their
// metadata is published late, twice, or never; objects go missing; reads
// fail, hang, or come back truncated or corrupted; the follower is killed
// and restarted. After every step the follower's log is a prefix of the
// leader's; once faults stop it catches up to the end.
func TestPropertyPrefixAndCatchUp(t *testing.T) {
	schedules := 12
	if testing.Short() {
		schedules = 4
	}
	for seed := uint64(1); seed <= uint64(schedules); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			propertySchedule(t, seed)
		})
	}
}

func propertySchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xf011))
	r := newRig(t)
	defer r.stop()
	tps := []metadata.TopicPartition{tp0, tp1}[:1+rng.IntN(2)]
	epochs := make(map[metadata.TopicPartition]int32)
	for _, tp := range tps {
		epochs[tp] = int32(rng.IntN(3))
		r.addLeader(tp, epochs[tp])
	}
	p := func() float64 { return rng.Float64() * 0.15 }
	fs, err := fault.New(r.put, fault.Config{Seed: seed, Clock: r.clk, Rules: []fault.Rule{
		{Kind: fault.Latency, Prob: rng.Float64() * 0.5, Delay: time.Duration(1+rng.IntN(80)) * time.Millisecond},
		{Kind: fault.InternalError, Prob: p()}, {Kind: fault.SlowDown, Prob: p()},
		{Kind: fault.Timeout, Prob: p() / 3, Delay: 50 * time.Millisecond},
		{Kind: fault.Truncate, Prob: p()}, {Kind: fault.Corrupt, Prob: p()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sw := &switchStore{Store: r.put, faulty: fs}
	r.read = sw
	r.cfg = func(c *Config) {
		c.MaxInFlight = 1 + rng.IntN(6)
		c.MergeGapBytes = int64(rng.IntN(4 << 10))
		c.ReadAheadBytes = int64(4<<10 + rng.IntN(64<<10))
	}
	r.start()
	cutFrom := make(map[metadata.TopicPartition]int64)
	var delayed []object
	steps := 6 + rng.IntN(6)
	for step := 0; step < steps; step++ {
		var lsts [][]combiner.Slice
		for _, tp := range tps {
			l := r.leaders[tp]
			if rng.IntN(4) == 0 {
				epochs[tp]++
				r.leader.set(tp, l, epochs[tp])
			}
			fillLeader(t, l, rng, 5+rng.IntN(25), epochs[tp])
			lsts = append(lsts, cutSlices(t, tp, l, cutFrom[tp], l.LogEndOffset(), rng, 6<<10))
			cutFrom[tp] = l.LogEndOffset()
		}
		objs := packObjects(t, r.put, fmt.Sprintf("s%d/", step), interleave(rng, lsts...), rng, 4, metadata.Codec(rng.IntN(2)))
		for _, o := range objs {
			switch k := rng.IntN(20); {
			case k == 0: // never published
			case k == 1: // published, object lost
				_ = r.put.Delete(context.Background(), o.key)
				r.ix.publish(o.key, o.entries...)
			case k < 5:
				delayed = append(delayed, o)
			case k < 7:
				r.ix.publish(o.key, o.entries...)
				r.ix.publish(o.key, o.entries...)
			default:
				r.ix.publish(o.key, o.entries...)
			}
		}
		if len(delayed) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(delayed))
			r.ix.publish(delayed[i].key, delayed[i].entries...)
			delayed = append(delayed[:i], delayed[i+1:]...)
		}
		for range rng.IntN(300) {
			if r.clk.Pending() > 0 {
				r.clk.Advance(time.Duration(rng.IntN(20)) * time.Millisecond)
			}
		}
		if rng.IntN(3) == 0 {
			r.restart(rng, rng.IntN(2) == 0)
		}
		for _, tp := range tps {
			checkPrefix(t, r.leaders[tp], r.logs[tp])
		}
	}
	sw.heal()
	for _, o := range delayed {
		r.ix.publish(o.key, o.entries...)
	}
	r.waitCaughtUp(true)
	r.checkAll()
}

// scriptStore answers its n-th GET (from 1) as script[n-1] says, and
// the GETs past the script with the stored bytes. An action is the
// answer, "ok" (the stored bytes) or "corrupt" (them with one byte
// flipped), after a wait: none, "held-" (until release is closed) or
// "late-" (until late is closed); "stall" answers nothing until the GET's
// context is cancelled, and a held or late GET answers nothing if its
// context is cancelled first.
type scriptStore struct {
	objstore.Store
	script        []string
	release, late chan struct{}
	calls         atomic.Int64
	cancelled     atomic.Int64 // GETs that ended with their context cancelled
}

func (s *scriptStore) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	n := int(s.calls.Add(1))
	act := "ok"
	if n <= len(s.script) {
		act = s.script[n-1]
	}
	var wait <-chan struct{}
	switch {
	case act == "stall":
		wait = make(chan struct{}) // never
	case strings.HasPrefix(act, "held-"):
		wait = s.release
	case strings.HasPrefix(act, "late-"):
		wait = s.late
	}
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			s.cancelled.Add(1)
			return nil, ctx.Err()
		}
	}
	b, err := s.Store.GetRange(ctx, key, off, length)
	if err == nil && strings.HasSuffix(act, "corrupt") {
		b = bytes.Clone(b)
		b[len(b)/2] ^= 0xff
	}
	return b, err
}

// TestHedgeAnswers: one read of one slice, whose GETs answer as each
// case's script says. With hedge, the clock moves to the hedge time once
// the first GET is out, then the held GETs are let go, and once the first
// answer is taken the late ones. Every case ends with the log caught up
// and equal to the leader's, the GETs, hedges, wins and corrupt slices it
// counts, and the GETs left out cancelled. The hedge winning over a
// stalled first GET is TestHedgedRead.
func TestHedgeAnswers(t *testing.T) {
	for _, tc := range []struct {
		name                                string
		script                              []string
		hedge                               bool
		retry                               bool // the read fails: the slice is read again after a backoff on the clock
		gets, hedges, wins, corrupt, cancel int64
	}{
		// A bad first answer is read again at once, without waiting for
		// the hedge time; the re-read counts as the hedge that won.
		{name: "bad first answer read again at once", script: []string{"corrupt"}, gets: 2, wins: 1, corrupt: 1},
		// Once a hedge is out, a bad first answer waits for it.
		{name: "bad first answer waits for the hedge out", script: []string{"held-corrupt", "late-ok"}, hedge: true, gets: 2, hedges: 1, wins: 1, corrupt: 1},
		// A bad hedge leaves the read to the first GET, not cancelled.
		{name: "bad hedge waits for the first", script: []string{"late-ok", "held-corrupt"}, hedge: true, gets: 2, hedges: 1, corrupt: 1},
		// The first GET answering while the hedge is out cancels the hedge.
		{name: "first answer cancels the hedge", script: []string{"held-ok", "stall"}, hedge: true, gets: 2, hedges: 1, cancel: 1},
		// Both bad: the slice fails this read (and is read again later).
		{name: "both bad", script: []string{"held-corrupt", "late-corrupt"}, hedge: true, retry: true, gets: 3, hedges: 1, wins: 0, corrupt: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			defer r.stop()
			rng := rand.New(rand.NewPCG(91, 92))
			leader := r.addLeader(tp0, 0)
			fillLeader(t, leader, rng, 10, 0)
			st := &scriptStore{Store: r.put, script: tc.script, release: make(chan struct{}), late: make(chan struct{})}
			r.read = st
			r.cfg = func(c *Config) { c.Jitter = func() float64 { return 0 } }
			for _, o := range packObjects(t, r.put, "", cutSlices(t, tp0, leader, 0, leader.LogEndOffset(), rng, 1<<20), rng, 100, metadata.CodecNone) {
				r.ix.publish(o.key, o.entries...)
			}
			r.start()
			if tc.hedge {
				waitFor(t, "the first GET out and the driver's timer at the hedge time", nil, 0, func() bool {
					next, ok := r.clk.Next()
					return ok && next.Equal(t0.Add(DefaultHedgeDelay)) && st.calls.Load() == 1
				}, func() string { return fmt.Sprint(st.calls.Load()) })
				r.clk.Advance(DefaultHedgeDelay)
				waitFor(t, "the hedge out", nil, 0, func() bool { return st.calls.Load() == 2 }, func() string { return fmt.Sprint(r.f.Metrics()) })
				if m := r.f.Metrics(); m.Hedges != 1 || m.CorruptSlices != 0 {
					t.Fatalf("want a hedge out and no answer yet: %+v", m)
				}
				close(st.release)
				waitFor(t, "the first answer taken", nil, 0, func() bool {
					m := r.f.Metrics()
					return m.CorruptSlices > 0 || m.SlicesApplied > 0
				}, func() string { return fmt.Sprint(r.f.Metrics()) })
				close(st.late)
			}
			r.waitCaughtUp(tc.retry)
			waitFor(t, "the GETs left out cancelled", nil, 0, func() bool { return st.cancelled.Load() == tc.cancel }, func() string { return fmt.Sprint(st.cancelled.Load()) })
			r.f.Close()
			m := r.f.Metrics()
			if m.GETs != tc.gets || m.Hedges != tc.hedges || m.HedgeWins != tc.wins || m.CorruptSlices != tc.corrupt || st.calls.Load() != tc.gets {
				t.Fatalf("want %d GETs, %d hedges, %d wins, %d corrupt slices: %+v (store saw %d GETs)",
					tc.gets, tc.hedges, tc.wins, tc.corrupt, m, st.calls.Load())
			}
			r.checkAll()
		})
	}
}

package follower

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fault"
)

// poisonStore lends GET bodies from one shared free list, as a real
// store's buffer pool does, but deterministically and as hard as it can:
// the buffer released last is lent next, to whichever read comes first,
// and every released buffer is overwritten with poison before it is
// lent again. A follower that touched a body after releasing it (verified
// from it, appended from it, or handed it to two slices) would append
// poison or see its CRC32C fail.
type poisonStore struct {
	objstore.Store
	bufBytes int
	mu       struct {
		sync.Mutex
		free                   [][]byte
		lent, reused, released int
	}
}

var _ objstore.BodyGetter = (*poisonStore)(nil)

const poison = 0xEE

func (s *poisonStore) GetRangeBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	b, err := s.Store.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	var buf []byte
	for i := len(s.mu.free) - 1; i >= 0; i-- {
		if cap(s.mu.free[i]) >= len(b) {
			buf = s.mu.free[i][:len(b)]
			s.mu.free = slices.Delete(s.mu.free, i, i+1)
			s.mu.reused++
			break
		}
	}
	s.mu.lent++
	s.mu.Unlock()
	if buf == nil {
		buf = make([]byte, len(b), max(len(b), s.bufBytes))
	}
	copy(buf, b)
	return objstore.NewBody(buf, func(bs []byte) {
		bs = bs[:cap(bs)]
		for i := range bs {
			bs[i] = poison
		}
		s.mu.Lock()
		s.mu.free = append(s.mu.free, bs)
		s.mu.released++
		s.mu.Unlock()
	}), nil
}

func (s *poisonStore) counts() (lent, reused, released, free int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.lent, s.mu.reused, s.mu.released, len(s.mu.free)
}

// TestLentBodiesReusedAcrossReads rebuilds three partitions whose slices
// share objects, with up to eight reads in flight, each read's body lent
// from poisonStore's one free list: buffers go from one partition's read
// to another's while earlier slices of theirs still wait to be appended.
// Every append is checked against the leader's bytes (recLog), and every
// byte of every rebuilt log at the end. Every lent body must come back
// (lent == released), with faults and hedged reads too (an answer that
// comes after its read has every slice is released untaken), and none be
// released twice (Body panics) nor corrupt a byte.
func TestLentBodiesReusedAcrossReads(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults bool
		codec  metadata.Codec
	}{
		{"faults=off/codec=none", false, metadata.CodecNone},
		{"faults=on/codec=none", true, metadata.CodecNone},
		{"faults=off/codec=zstd", false, metadata.CodecZstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			defer r.stop()
			rng := rand.New(rand.NewPCG(41, 42))
			for _, tp := range []metadata.TopicPartition{tp0, tp1, tp2} {
				fillLeader(t, r.addLeader(tp, 0), rng, 400, 0)
			}
			const maxRange = 24 << 10
			ps := &poisonStore{Store: r.put, bufBytes: maxRange}
			r.read = ps
			var fs *fault.Store
			if tc.faults {
				var err error
				fs, err = fault.New(ps, fault.Config{Seed: 5, Clock: r.clk, Rules: []fault.Rule{
					{Kind: fault.Latency, Prob: 0.3, Delay: 3 * time.Millisecond},
					{Kind: fault.InternalError, Prob: 0.05},
					{Kind: fault.Truncate, Prob: 0.05},
					{Kind: fault.Corrupt, Prob: 0.05},
				}})
				if err != nil {
					t.Fatal(err)
				}
				r.read = fs
			}
			r.cfg = func(c *Config) {
				c.MaxInFlight, c.MaxRangeBytes, c.MergeGapBytes = 8, maxRange, 4<<10
				// The pumped clock must not send anything to the leader:
				// every byte should come through a lent body.
				c.GapTimeout, c.FallbackAfter = time.Hour, time.Hour
				c.HedgeDelay = -1
				if tc.faults {
					c.HedgeDelay = time.Millisecond
				}
			}
			for _, o := range r.uploadAll(rng, tc.codec) {
				r.ix.publish(o.key, o.entries...)
			}
			r.start()
			r.waitCaughtUp(true)
			r.stop()
			r.checkAll() // every append (recLog) and every byte of every log
			lent, reused, released, free := ps.counts()
			m := r.f.Metrics()
			t.Logf("bodies lent %d, reused %d, released %d, free %d; metrics %+v", lent, reused, released, free, m)
			defer func() {
				for tp, rl := range r.recs {
					t.Logf("%v: %d runs appended in one write", tp, rl.runs.Load())
				}
			}()
			// How many reads find a released buffer depends on how the
			// reads and appends interleave; one reuse is enough for the
			// poison to show a body released too early.
			if lent < 50 || reused == 0 {
				t.Fatalf("only %d of %d bodies were lent in a reused buffer: the test does not test reuse", reused, lent)
			}
			var runs int64
			for _, rl := range r.recs {
				runs += rl.runs.Load()
			}
			if tc.codec == metadata.CodecNone && runs == 0 {
				t.Fatalf("no run of slices was appended in one write: the run path is untested")
			}
			if released != lent {
				t.Fatalf("%d releases of %d lent bodies", released, lent)
			}
			if !tc.faults {
				if m.Fallbacks != 0 || m.LeaderBytes != 0 {
					t.Fatalf("%d fallbacks, %d bytes from the leader: not every byte came through a lent body", m.Fallbacks, m.LeaderBytes)
				}
				if m.CorruptSlices != 0 {
					t.Fatalf("%d corrupt slices without faults: a body was reused before its slices were done", m.CorruptSlices)
				}
			} else if st := fs.Stats(); st.Corrupted+st.Truncated > 0 && m.CorruptSlices == 0 {
				t.Fatalf("faults %+v served but no corrupt slice detected", st)
			}
		})
	}
}

// TestBodyReleasedAfterAppendNotBefore pins the order the follower
// relies on: a slot's bytes are released once the log has taken them.
// It runs one read whose body is poisoned on release and checks the log
// holds the leader's bytes, not poison.
func TestBodyReleasedAfterAppendNotBefore(t *testing.T) {
	r := rebuildFromPoison(t, 43, 20)
	_, data := logBytes(t, r.logs[tp0])
	for i, seg := range data {
		if n := countPoison(seg); n > len(seg)/4 {
			t.Fatalf("segment %d is %d of %d bytes poison", i, n, len(seg))
		}
	}
}

func countPoison(b []byte) int {
	n := 0
	for _, c := range b {
		if c == poison {
			n++
		}
	}
	return n
}

// TestAdjacentSlicesAppendedAsOneBuffer: slices of one partition that lie
// back to back in an object, read with one GET, reach the log as one
// buffer of their run (one iovec of the pwritev, not one per slice), and
// the log holds the leader's bytes. The bodies come from poisonStore, so
// a merged buffer read after its body went back would append poison;
// every buffer is checked against the leader's bytes across leader
// segments (recLog).
func TestAdjacentSlicesAppendedAsOneBuffer(t *testing.T) {
	r := rebuildFromPoison(t, 45, 400) // tp0 alone: every object's slices are adjacent
	rl, m := r.recs[tp0], r.f.Metrics()
	t.Logf("%d slices applied in %d buffers, %d runs, %d GETs", m.SlicesApplied, rl.buffers.Load(), rl.runs.Load(), m.GETs)
	if rl.runs.Load() == 0 || rl.buffers.Load() >= m.SlicesApplied {
		t.Fatalf("%d slices went to the log in %d buffers (%d runs): adjacent slices were not merged", m.SlicesApplied, rl.buffers.Load(), rl.runs.Load())
	}
}

// rebuildFromPoison rebuilds tp0, n random batches of its leader's log
// (seeded), from poisonStore without hedges, checks every append and
// every byte against the leader's and that every lent body went back,
// and returns the stopped rig.
func rebuildFromPoison(t *testing.T, seed uint64, n int) *rig {
	r := newRig(t)
	t.Cleanup(r.stop)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	fillLeader(t, r.addLeader(tp0, 0), rng, n, 0)
	ps := &poisonStore{Store: r.put}
	r.read = ps
	r.cfg = func(c *Config) { c.HedgeDelay = -1 }
	for _, o := range r.uploadAll(rng, metadata.CodecNone) {
		r.ix.publish(o.key, o.entries...)
	}
	r.start()
	r.waitCaughtUp(true)
	r.stop()
	r.checkAll()
	if lent, _, released, _ := ps.counts(); lent == 0 || released != lent {
		t.Fatalf("lent %d, released %d", lent, released)
	}
	if m, n := r.f.Metrics().Appends, r.recs[tp0].appended.Load(); m != n || n == 0 {
		t.Fatalf("Metrics().Appends is %d, the log took %d appends", m, n)
	}
	return r
}

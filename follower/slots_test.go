package follower

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/metadata"
)

// referenceDecide is decide as it was before the driver kept sorted slots:
// it reads every slice the index lists, filters, copies and sorts them into
// a chain on every call. TestDecideMatchesReference holds decide to it.
func referenceDecide(now time.Time, v testView, cfg *Config) testDecision {
	d := testDecision{FallbackUntil: v.FallbackUntil, Target: v.Leader.LogEnd}
	var use []Located
	var fencedAtLEO, waitAtLEO bool
	for _, l := range v.Slices {
		e := &l.Entry
		if e.LastOffset < v.LEO {
			continue
		}
		covers := e.BaseOffset <= v.LEO
		switch judge(e.LeaderEpoch, e.LastOffset, v.Leader.Epoch, v.LocalEpoch, v.Fence) {
		case usable:
			use = append(use, l)
			d.Target = max(d.Target, e.LastOffset+1)
		case wait:
			waitAtLEO = waitAtLEO || covers
			d.Target = max(d.Target, e.LastOffset+1)
		case fenced:
			fencedAtLEO = fencedAtLEO || covers
			d.Fenced++
		case ask:
			if !slices.Contains(d.Ask, e.LeaderEpoch) {
				d.Ask = append(d.Ask, e.LeaderEpoch)
			}
		}
	}
	slices.Sort(d.Ask)
	chain := Chain(v.LEO, use)
	wake := func(t time.Time) {
		if d.WakeAt.IsZero() || t.Before(d.WakeAt) {
			d.WakeAt = t
		}
	}
	timedOut := false
	if v.FallbackUntil <= v.LEO && !(v.Degraded && d.Target > v.LEO) && len(chain) > 0 && cfg.FallbackAfter > 0 {
		d.WantedSince = v.WantedSince
		if d.WantedSince.IsZero() {
			d.WantedSince = now
		}
		if timedOut = !now.Before(d.WantedSince.Add(cfg.FallbackAfter)); !timedOut {
			wake(d.WantedSince.Add(cfg.FallbackAfter))
		}
	}
	switch {
	case v.FallbackUntil > v.LEO || v.Degraded && d.Target > v.LEO:
		d.Fallback = true
		if v.Degraded {
			d.FallbackUntil = max(d.FallbackUntil, d.Target)
		}
	case (v.Failures >= cfg.MaxReadAttempts || timedOut) && len(chain) > 0:
		d.Fallback = true
		d.FallbackUntil = chain[0].Entry.LastOffset + 1
		d.WantedSince = time.Time{}
		if v.Failures < cfg.MaxReadAttempts {
			d.GapCause = CauseReadTimeout
		}
	case len(chain) == 0 && d.Target > v.LEO && len(d.Ask) == 0:
		d.StuckSince = v.StuckSince
		if d.StuckSince.IsZero() {
			d.StuckSince = now
		}
		if now.Sub(d.StuckSince) < cfg.GapTimeout {
			wake(d.StuckSince.Add(cfg.GapTimeout))
			break
		}
		d.Fallback = true
		d.FallbackUntil = d.Target
		for _, l := range use {
			if l.Entry.BaseOffset > v.LEO {
				d.FallbackUntil = min(d.FallbackUntil, l.Entry.BaseOffset)
			}
		}
		switch {
		case fencedAtLEO:
			d.GapCause = CauseFenced
		case waitAtLEO:
			d.GapCause = CauseFutureEpoch
		case d.FallbackUntil < d.Target:
			d.GapCause = CauseMetadataGap
		default:
			d.GapCause = CauseMetadataLag
		}
	}
	if now.Before(v.RetryAt) {
		wake(v.RetryAt)
		return d
	}
	var ahead int64
	for i, l := range chain {
		if d.Fallback && l.Entry.LastOffset < d.FallbackUntil {
			continue
		}
		if i > 0 && ahead >= cfg.ReadAheadBytes {
			break
		}
		ahead += l.Entry.Length
		if _, ok := v.Busy[sliceID{l.Key, l.Entry.Position}]; ok {
			continue
		}
		d.Read = append(d.Read, l)
	}
	return d
}

// randomView is a partition with a random index: runs of slices with
// gaps, duplicates under other keys, overlapping slices, slices below the
// log end, several leader epochs, and random busy slices, fence answers,
// failures, backoff, stuck time and fallback.
func randomView(rng *rand.Rand, now time.Time) testView {
	v := testView{
		LEO:        int64(rng.IntN(50)),
		Leader:     LeaderInfo{Epoch: int32(1 + rng.IntN(3))},
		LocalEpoch: int32(rng.IntN(4)) - 1,
		Fence:      map[int32]epochEnd{},
		Busy:       map[sliceID]int64{},
		Failures:   rng.IntN(5),
	}
	for e := int32(0); e < 4; e++ {
		if rng.IntN(2) == 0 {
			v.Fence[e] = epochEnd{Epoch: e - int32(rng.IntN(2)), EndOffset: int64(rng.IntN(300))}
		}
	}
	off, pos := int64(rng.IntN(40)), int64(0)
	for i := range rng.IntN(40) {
		n := int64(1 + rng.IntN(12))
		key := fmt.Sprintf("o%d", rng.IntN(6))
		e := int32(rng.IntN(4))
		l := loc(key, tpA, off, off+n-1, pos, n*10)
		l.Entry.LeaderEpoch = e
		v.Slices = append(v.Slices, l)
		pos += n * 10
		switch rng.IntN(8) {
		case 0: // the same offsets stored again, in another object
			d := loc(fmt.Sprintf("d%d", i), tpA, off, off+n-1, 7, n*10)
			d.Entry.LeaderEpoch = e
			v.Slices = append(v.Slices, d)
		case 1: // a shorter slice inside this one
			s := loc(fmt.Sprintf("s%d", i), tpA, off+n/2, off+n-1, 3, 10)
			s.Entry.LeaderEpoch = e
			v.Slices = append(v.Slices, s)
		case 2: // a gap
			off += int64(1 + rng.IntN(5))
		}
		off += n
		if rng.IntN(4) == 0 {
			v.Busy[sliceID{l.Key, l.Entry.Position}] = l.Entry.Length
		}
	}
	v.Leader.LogEnd = off + int64(rng.IntN(20)) - 5
	if v.Leader.LogEnd < 0 {
		v.Leader.LogEnd = 0
	}
	if rng.IntN(4) == 0 {
		v.RetryAt = now.Add(time.Duration(rng.IntN(3)-1) * time.Millisecond)
	}
	if rng.IntN(3) == 0 {
		v.StuckSince = now.Add(-time.Duration(rng.IntN(3)) * time.Second)
	}
	if rng.IntN(5) == 0 {
		v.FallbackUntil = v.LEO + int64(rng.IntN(20)) - 5
	}
	if rng.IntN(3) == 0 {
		v.WantedSince = now.Add(-time.Duration(rng.IntN(3)) * time.Second)
	}
	v.Degraded = rng.IntN(4) == 0
	rng.Shuffle(len(v.Slices), func(i, j int) { v.Slices[i], v.Slices[j] = v.Slices[j], v.Slices[i] })
	return v
}

// TestDecideMatchesReference: decide, which walks sorted slots only as far
// as the read-ahead and takes the index-wide facts from a summary, decides
// exactly what the reference decides on the whole index, on random views;
// bounded to the first k objects it reads from (maxReadObjects), it
// decides the same but reads the reference's reads only up to the first
// slice of a (k+1)-th object.
func TestDecideMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	now := t0
	for i := range 20000 {
		v := randomView(rng, now)
		cfg := &Config{GapTimeout: time.Second, MaxReadAttempts: 1 + rng.IntN(3), ReadAheadBytes: int64(rng.IntN(400)),
			FallbackAfter: time.Duration(rng.IntN(3)) * time.Second}
		k := []int{0, 1, 2, 3, 10}[rng.IntN(5)] // 0: no bound; 10: past objectSet's array
		got := runDecideBounded(now, v, cfg, k)
		// The reference takes ties in the order it is given: give it the
		// order the driver keeps.
		ref := v
		ref.Slices = slices.Clone(v.Slices)
		slices.SortStableFunc(ref.Slices, func(a, b Located) int { return chainCmp(&a, &b) })
		want := referenceDecide(now, ref, cfg)
		if k > 0 {
			want.Read = firstKObjects(want.Read, k)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("view %d, %d objects: %+v\n got  %+v\n want %+v", i, k, v, got, want)
		}
	}
}

// firstKObjects is read up to its first slice of a (k+1)-th object.
func firstKObjects(read []Located, k int) []Located {
	var keys []string
	for i, l := range read {
		if !slices.Contains(keys, l.Key) {
			if len(keys) == k {
				return read[:i]
			}
			keys = append(keys, l.Key)
		}
	}
	return read
}

// TestFirstObjectsKeepsThePlan: planning only the slices of the first
// MaxReads objects (in PlanChains' order, across partitions) gives the
// same reads as planning every slice, and PlanChains with MaxReads gives
// the first reads of the plan without it; the driver's planChains, whose
// scratch outlives each plan, plans the same.
func TestFirstObjectsKeepsThePlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tps := []metadata.TopicPartition{tpA, tpB, {Topic: "b", Partition: 1}}
	var sc planScratch
	for i := range 3000 {
		nkeys := []int{3, 8, 40}[rng.IntN(3)]
		chains := map[metadata.TopicPartition][]Located{}
		slots := map[metadata.TopicPartition][]*slot{}
		pos := map[string]int64{}
		for _, tp := range tps {
			if rng.IntN(4) == 0 {
				continue
			}
			off := int64(0)
			for range rng.IntN(30) {
				key := fmt.Sprintf("o%d", rng.IntN(nkeys))
				n := int64(1 + rng.IntN(4))
				p := pos[key] + int64(rng.IntN(3))*50
				l := loc(key, tp, off, off+n-1, p, n*40)
				pos[key] = p + n*40
				off += n
				chains[tp] = append(chains[tp], l)
				slots[tp] = append(slots[tp], newSlot(l))
			}
		}
		cfg := PlanConfig{MaxRangeBytes: int64(rng.IntN(400)), MergeGapBytes: int64(rng.IntN(120)), MaxReads: 1 + rng.IntN(4)}
		all := PlanChains(chains, PlanConfig{MaxRangeBytes: cfg.MaxRangeBytes, MergeGapBytes: cfg.MergeGapBytes})
		if ref := referencePlanChains(chains, PlanConfig{MaxRangeBytes: cfg.MaxRangeBytes, MergeGapBytes: cfg.MergeGapBytes}); !reflect.DeepEqual(all, ref) {
			t.Fatalf("case %d: plan differs from the reference:\n got  %v\n want %v", i, spans(all), spans(ref))
		}
		want := all[:min(len(all), cfg.MaxReads)]
		if got := PlanChains(chains, cfg); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("case %d: MaxReads %d:\n got  %v\n want %v", i, cfg.MaxReads, spans(got), spans(want))
		}
		if got := planChains(chains, cfg, &sc); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("case %d: with the scratch of the cases before:\n got  %v\n want %v", i, spans(got), spans(want))
		}
		var keys []string
		picked := map[metadata.TopicPartition][]Located{}
		for _, tp := range tps { // PlanChains' order
			var chain []Located
			keys, chain = firstObjects(keys, cfg.MaxReads, slots[tp], nil)
			if len(chain) > 0 {
				picked[tp] = chain
			}
		}
		if len(keys) > cfg.MaxReads {
			t.Fatalf("case %d: %d objects picked for %d reads", i, len(keys), cfg.MaxReads)
		}
		if got := PlanChains(picked, cfg); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("case %d: picked objects %v:\n got  %v\n want %v", i, keys, spans(got), spans(want))
		}
	}
}

// driverFor builds a Follower without its goroutine, following tp into log
// with the leader known and the epoch check done, so a test can call the
// driver's methods one at a time.
func driverFor(t *testing.T, ix Index, tp metadata.TopicPartition, log Log) (*Follower, *part) {
	t.Helper()
	f := &Follower{
		cfg: Config{Index: ix, Clock: clock.NewManual(t0), Logger: testLogger(t), RetryBackoff: time.Millisecond, RetryBackoffMax: time.Second,
			MaxReadAttempts: 3, Jitter: func() float64 { return 0 }},
		parts: make(map[metadata.TopicPartition]*part),
	}
	f.mu.status = make(map[metadata.TopicPartition]PartitionStatus)
	p := &part{
		tp: tp, log: log, leo: log.LogEndOffset(), localEpoch: 1, byID: make(map[sliceID]*slot), stale: true,
		fence: make(map[int32]epochEnd), lastMaxTs: -1,
		leader: LeaderInfo{Epoch: 1}, hasLeader: true, checked: true, checkedEpoch: 1, fenceEpoch: 1,
	}
	f.parts[tp] = p
	f.order = []*part{p}
	return f, p
}

// batches returns valid epoch-1 batches of 5 records for [from, to).
func batches(from, to int64) []byte {
	var b []byte
	for off := from; off < to; off += 5 {
		b = append(b, kafkalogtest.MakeBatchN(off, 1, 5, 20, t0.UnixMilli()+off)...)
	}
	return b
}

func entry(tp metadata.TopicPartition, base, last, pos int64) metadata.SliceEntry {
	return metadata.SliceEntry{TopicPartition: tp, LeaderEpoch: 1, BaseOffset: base, LastOffset: last, Position: pos, Length: 100, RawLength: 100}
}

// deliver hands the driver a finished read of ls with their log bytes, as
// if a read of them had been started.
func deliver(f *Follower, p *part, ls ...Located) {
	res := readResult{read: Read{Slices: ls}}
	for _, l := range ls {
		p.byID[sliceID{l.Key, l.Entry.Position}].state = reading
		res.raws = append(res.raws, batches(l.Entry.BaseOffset, l.Entry.LastOffset+1))
		res.errs = append(res.errs, nil)
	}
	f.readsInFlight++
	f.readDone(res)
}

func ids(ss []*slot) []string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprintf("%s@%d[%d,%d]%d", s.Key, s.Entry.Position, s.Entry.BaseOffset, s.Entry.LastOffset, s.state))
	}
	return out
}

// TestSlotsFollowTheIndex: the driver's sorted slots come from the index
// once per change, duplicates taken once; a refresh keeps what the driver
// is doing with each slot, keeps busy slots the index stopped listing and
// forgets idle ones; appends drop the slots below the log end, verified
// ones counted as duplicates, and a verified slice that a longer one
// already covered is dropped, not appended.
func TestSlotsFollowTheIndex(t *testing.T) {
	ix := newMemIndex()
	fl := openLog(t, kafkalog.NewMemFS(), "/f", clock.NewManual(t0))
	if _, err := fl.AppendAsFollower(batches(0, 10)); err != nil {
		t.Fatal(err)
	}
	f, p := driverFor(t, ix, tpA, fl)
	a := Located{Key: "o1", Entry: entry(tpA, 10, 29, 0)} // covers c and b
	c := Located{Key: "o2", Entry: entry(tpA, 10, 19, 0)}
	b := Located{Key: "o3", Entry: entry(tpA, 15, 19, 0)}
	d := Located{Key: "o4", Entry: entry(tpA, 30, 39, 0)}
	x := Located{Key: "o6", Entry: entry(tpA, 40, 49, 0)}
	old := Located{Key: "o0", Entry: entry(tpA, 0, 9, 0)} // below the log end: not listed
	ix.publish("", x.Entry)
	ix.mu.slices[tpA] = []Located{d, b, x, old, a, c, b} // disorder and a duplicate
	f.watchIndex()
	f.refresh(p)
	want := []string{"o1@0[10,29]0", "o2@0[10,19]0", "o3@0[15,19]0", "o4@0[30,39]0", "o6@0[40,49]0"}
	if got := ids(p.slots); !reflect.DeepEqual(got, want) {
		t.Fatalf("slots %v, want %v", got, want)
	}
	if len(p.byID) != 5 {
		t.Fatalf("%d slots by id", len(p.byID))
	}

	// The index drops d (being read) and x (idle): d stays, x goes.
	p.byID[sliceID{"o4", 0}].state = reading
	ix.mu.Lock()
	ix.mu.slices[tpA] = []Located{b, c, a}
	ix.mu.Unlock()
	f.refresh(p)
	want = []string{"o1@0[10,29]0", "o2@0[10,19]0", "o3@0[15,19]0", "o4@0[30,39]1"}
	if got := ids(p.slots); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the index dropped two: slots %v, want %v", got, want)
	}
	if _, ok := p.byID[sliceID{"o6", 0}]; ok {
		t.Fatal("an idle slot the index dropped is still known")
	}

	// b is verified first: it waits. Then c: c is appended, and b, inside
	// it, is a duplicate, not an append, though a (longer, not read) is
	// still in front of it.
	deliver(f, p, b)
	if p.leo != 10 || p.byID[sliceID{"o3", 0}].state != ready {
		t.Fatalf("b applied out of order: leo %d, slots %v", p.leo, ids(p.slots))
	}
	deliver(f, p, c)
	if p.leo != 20 || fl.LogEndOffset() != 20 {
		t.Fatalf("leo %d, log end %d, want 20", p.leo, fl.LogEndOffset())
	}
	if m := f.Metrics(); m.Duplicates != 1 || m.SlicesApplied != 1 || p.failures != 0 || !p.retryAt.IsZero() {
		t.Fatalf("metrics %+v, failures %d, retry at %v", m, p.failures, p.retryAt)
	}
	// Slots below the log end behind a live one stay until it goes.
	want = []string{"o1@0[10,29]0", "o2@0[10,19]0", "o3@0[15,19]0", "o4@0[30,39]1"}
	if got := ids(p.slots); !reflect.DeepEqual(got, want) {
		t.Fatalf("slots %v, want %v", got, want)
	}

	// A read of a slot the index stopped listing, finishing after the log
	// passed it, is a duplicate and is forgotten.
	ix.mu.Lock()
	ix.mu.slices[tpA] = nil
	ix.mu.Unlock()
	e := Located{Key: "o5", Entry: entry(tpA, 20, 29, 0)}
	p.byID[sliceID{"o5", 0}] = newSlot(e) // started before the index dropped it
	p.byID[sliceID{"o5", 0}].state = reading
	if _, err := fl.AppendAsFollower(batches(20, 30)); err != nil { // the leader served it meanwhile
		t.Fatal(err)
	}
	p.leo = 30
	f.dropBelow(p)
	f.readsInFlight++
	f.readDone(readResult{read: Read{Slices: []Located{e}}, raws: [][]byte{batches(20, 30)}, errs: []error{nil}})
	if _, ok := p.byID[sliceID{"o5", 0}]; ok || f.Metrics().Duplicates != 2 {
		t.Fatalf("a finished read of an unlisted slot below the log end is kept: %+v", f.Metrics())
	}
	// d, kept while the index no longer lists it, is appended when verified.
	deliver(f, p, d)
	if p.leo != 40 || len(p.slots) != 0 || len(p.byID) != 0 {
		t.Fatalf("leo %d, slots %v, %d by id", p.leo, ids(p.slots), len(p.byID))
	}
}

// countingIndex counts the driver's reads of the index.
type countingIndex struct {
	*memIndex
	calls atomic.Int64
}

func (c *countingIndex) Slices(tp metadata.TopicPartition, from int64) []Located {
	c.calls.Add(1)
	return c.memIndex.Slices(tp, from)
}

// TestIndexReadOncePerChange: the driver reads a partition's slices from
// the index when the index changed, not at every read completion, and
// still sees every change.
func TestIndexReadOncePerChange(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	ci := &countingIndex{memIndex: r.ix}
	rng := rand.New(rand.NewPCG(51, 52))
	leader := r.addLeader(tp0, 0)
	fillLeader(t, leader, rng, 300, 0)
	objs := packObjects(t, r.put, "", cutSlices(t, tp0, leader, 0, leader.LogEndOffset(), rng, 2<<10), rng, 1, metadata.CodecNone)
	for _, o := range objs {
		r.ix.publish(o.key, o.entries...)
	}
	r.cfg = func(c *Config) { c.Index, c.MaxInFlight = ci, 2 }
	r.start()
	r.waitCaughtUp(false)
	m := r.f.Metrics()
	if n := ci.calls.Load(); n > 2 || m.Reads < int64(len(objs)) {
		t.Fatalf("%d index reads for %d reads of %d objects", n, m.Reads, len(objs))
	}
	// Later objects are seen, one index read per publish.
	before := ci.calls.Load()
	more := r.publishMore(tp0, leader, rng, 40, 0, "more/", 2<<10, 3)
	r.waitCaughtUp(false)
	r.checkAll()
	if n := ci.calls.Load() - before; n > int64(len(more))+1 {
		t.Fatalf("%d index reads for %d publishes", n, len(more))
	}
}

// TestLagMsFromTheLastBatch: a follower behind its leader reports, as
// LagMs, the time since the max timestamp of the last batch it appended,
// which AppendAsFollower returns.
func TestLagMsFromTheLastBatch(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(61, 62))
	leader := r.addLeader(tp0, 0)
	fillLeader(t, leader, rng, 40, 0)
	half := leader.LogEndOffset()
	for _, o := range packObjects(t, r.put, "", cutSlices(t, tp0, leader, 0, half, rng, 4<<10), rng, 2, metadata.CodecNone) {
		r.ix.publish(o.key, o.entries...)
	}
	fillLeader(t, leader, rng, 40, 0)                    // never uploaded
	r.cfg = func(c *Config) { c.GapTimeout = time.Hour } // no fallback: stay behind
	r.start()
	waitFor(t, "half", nil, 0, func() bool { s, _ := r.f.Status(tp0); return s.LogEndOffset == half }, func() string { return "" })
	r.clk.Advance(1500 * time.Millisecond) // fillLeader stamps t0
	waitFor(t, "lag", nil, 0, func() bool {
		// The status is published at each wake-up, at the clock's time
		// then. The driver may have stopped its poll timer and not yet
		// armed it again when the clock moved (it then fires only at the
		// next move): Notify wakes it without moving the clock.
		r.f.Notify()
		s, _ := r.f.Status(tp0)
		return s.LagMs == 1500 && s.LagOffsets == leader.LogEndOffset()-half
	}, func() string { s, _ := r.f.Status(tp0); return fmt.Sprintf("%+v", s) })
}

// referencePlanChains is PlanChains as it was before it learnt to stop at
// MaxReads objects: maps of every object, sorted at the end.
func referencePlanChains(chains map[metadata.TopicPartition][]Located, cfg PlanConfig) []Read {
	byKey := make(map[string][]Located)
	firstNeed := make(map[string]int)
	order := 0
	tps := make([]metadata.TopicPartition, 0, len(chains))
	for tp := range chains {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	for _, tp := range tps {
		for _, l := range chains[tp] {
			if _, seen := firstNeed[l.Key]; !seen {
				firstNeed[l.Key] = order
				order++
			}
			byKey[l.Key] = append(byKey[l.Key], l)
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return firstNeed[keys[i]] < firstNeed[keys[j]] })
	var reads []Read
	for _, k := range keys {
		ls := byKey[k]
		sort.Slice(ls, func(i, j int) bool { return ls[i].Entry.Position < ls[j].Entry.Position })
		var cur *Read
		for _, l := range ls {
			start, end := l.Entry.Position, l.Entry.Position+l.Entry.Length
			if cur != nil {
				curEnd := cur.Off + cur.Len
				gap := start - curEnd
				if gap >= 0 && gap <= cfg.MergeGapBytes && (cfg.MaxRangeBytes <= 0 || end-cur.Off <= cfg.MaxRangeBytes) {
					cur.Len = end - cur.Off
					cur.Slices = append(cur.Slices, l)
					continue
				}
			}
			reads = append(reads, Read{Key: k, Off: start, Len: end - start, Slices: []Located{l}})
			cur = &reads[len(reads)-1]
		}
	}
	if cfg.MaxReads > 0 && len(reads) > cfg.MaxReads {
		reads = reads[:cfg.MaxReads]
	}
	return reads
}

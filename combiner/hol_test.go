package combiner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// outcome is one slice's Done, stamped on the rig's clock.
type outcome struct {
	obj UploadedObject
	err error
	at  time.Time
}

// submitWait submits s and returns a channel that gets its outcome.
func (r *rig) submitWait(t *testing.T, s Slice) <-chan outcome {
	t.Helper()
	ch := make(chan outcome, 1)
	s.Done = func(o UploadedObject, err error) { ch <- outcome{o, err, r.clk.Now()} }
	if err := r.c.Submit(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return ch
}

// oneSlice is a slice of tp of holSliceBytes bytes.
func oneSlice(tp metadata.TopicPartition, base, last int64) Slice {
	return Slice{TopicPartition: tp, LeaderEpoch: 1, BaseOffset: base, LastOffset: last, Data: []byte(fmt.Sprintf("%-16.16s", fmt.Sprintf("%v@%d", tp, base)))}
}

const holSliceBytes = 16

// TestStuckPartitionDoesNotStopOthers: partition "stuck" has a slice given
// up that it never re-submits, so every later slice of it is given up,
// while "a" and "b", packed into the same objects, re-submit what they are
// given up as a remote-WAL task does. Every object from the first failure
// on holds a slice of stuck; still, a and b publish every slice from then
// on at the first attempt, within a bounded time on the clock, and only
// their entries are published. (When a given-up slice failed its whole
// object, a and b lost every slice they shared an object with stuck.)
func TestStuckPartitionDoesNotStopOthers(t *testing.T) {
	faults := func(n int) fault {
		if n == 0 {
			return fault{before: httpErr{403}} // not retriable: the first object is given up
		}
		return fault{}
	}
	// Each round's three slices make one object (cut on size), and the
	// clock stands still: the others' slices must be published without
	// waiting for any backoff or interval.
	const bound = 0
	perSlice := int64(holSliceBytes + objformat.EntrySize("s"))
	r := newRig(t, Config{UploadBytes: int64(objformat.FixedOverhead) + 3*perSlice, Interval: time.Hour, ThreadPoolSize: 2}, faults, nil)
	r.stopPump()
	stuck := metadata.TopicPartition{Topic: "s"}
	others := []metadata.TopicPartition{{Topic: "a"}, {Topic: "b", Partition: 3}}
	next := map[metadata.TopicPartition]int64{}
	var lastObj UploadedObject
	const rounds = 40
	for round := range rounds {
		start := r.clk.Now()
		chs := map[metadata.TopicPartition]<-chan outcome{}
		for _, tp := range append([]metadata.TopicPartition{stuck}, others...) {
			base := next[tp]
			if tp == stuck {
				base = int64(round) * 10 // never re-submits its given-up slice at 0
			}
			chs[tp] = r.submitWait(t, oneSlice(tp, base, base+9))
		}
		o := <-chs[stuck]
		if round == 0 {
			if !errors.As(o.err, new(httpErr)) {
				t.Fatalf("round 0: stuck slice got %v, want the 403", o.err)
			}
		} else if !errors.Is(o.err, ErrEarlierSliceFailed) {
			t.Fatalf("round %d: stuck slice got %v, want ErrEarlierSliceFailed", round, o.err)
		}
		for _, tp := range others {
			o := <-chs[tp]
			switch {
			case round == 0:
				if o.err == nil {
					t.Fatalf("round 0: %v published from an object whose PUT failed", tp)
				}
				continue // re-submitted from the same base next round
			case o.err != nil:
				t.Fatalf("round %d: %v given up (%v) while only stuck keeps failing", round, tp, o.err)
			}
			if d := o.at.Sub(start); d > bound {
				t.Errorf("round %d: %v took %v on the clock to publish, want ≤ %v", round, tp, d, bound)
			}
			for _, e := range o.obj.Entries {
				if e.TopicPartition == stuck {
					t.Fatalf("round %d: a given-up slice of %v was published: %+v", round, stuck, e)
				}
			}
			lastObj = o.obj
			next[tp] += 10
		}
	}
	for _, tp := range others {
		if next[tp] != (rounds-1)*10 {
			t.Errorf("%v published up to %d, want %d", tp, next[tp], (rounds-1)*10)
		}
	}
	checkOrder(t, r.pub.published(), map[metadata.TopicPartition]int64{others[0]: (rounds - 1) * 10, others[1]: (rounds - 1) * 10})
	// The footer still indexes the stuck slice: its bytes are in the
	// object, referenced by no metadata (dead bytes, for kwal audit).
	footer, _, err := ReadObjectFooter(context.Background(), r.store, lastObj.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(footer) != len(lastObj.Entries)+1 {
		t.Fatalf("last object's footer has %d entries, its metadata %d; want one more in the footer", len(footer), len(lastObj.Entries))
	}
	m := r.c.Metrics()
	if m.ObjectsPartial != rounds-1 || m.SlicesGivenUp != rounds+int64(len(others)) || m.HeldSlices != 0 {
		t.Errorf("metrics %+v: want %d partial objects, %d slices given up, none held", m, rounds-1, rounds+len(others))
	}
}

// TestRefusedSliceLeavesOthersPublished: a slice the encoder refuses (its
// partition's base offset does not rise within the object: here a new
// leader epoch re-cut from 5 while the old epoch's slice is still queued)
// is left out and given up for its partition and epoch alone; the rest of
// the object, its partition's other slice included, is published, and the
// epoch publishes from the re-submitted slice on.
func TestRefusedSliceLeavesOthersPublished(t *testing.T) {
	// The four slices fill one object exactly, so it is cut for its size
	// and the interval never: on the pumped clock a test descheduled
	// between two Submits could see them split. The re-submitted two go
	// at Close.
	perSlice := int64(holSliceBytes + objformat.EntrySize("p"))
	r := newRig(t, Config{UploadBytes: emptyObject + 4*perSlice, Interval: time.Hour}, nil, nil)
	p, q := metadata.TopicPartition{Topic: "p"}, metadata.TopicPartition{Topic: "q"}
	epoch2 := func(base, last int64) Slice { s := oneSlice(p, base, last); s.LeaderEpoch = 2; return s }
	first := r.submitWait(t, oneSlice(p, 0, 9))
	other := r.submitWait(t, oneSlice(q, 0, 0))
	again := r.submitWait(t, epoch2(5, 9)) // not after 9 within the object: refused
	after := r.submitWait(t, epoch2(10, 19))
	if o := <-again; !errors.Is(o.err, ErrRefused) {
		t.Fatalf("overlapping slice: %v, want ErrRefused", o.err)
	}
	if o := <-after; !errors.Is(o.err, ErrEarlierSliceFailed) {
		t.Fatalf("slice after the refused one: %v, want ErrEarlierSliceFailed", o.err)
	}
	o1, o2 := <-first, <-other
	if o1.err != nil || o2.err != nil {
		t.Fatalf("the object's other slices: %v, %v; want published", o1.err, o2.err)
	}
	if o1.obj.Key != o2.obj.Key || len(o1.obj.Entries) != 2 {
		t.Fatalf("published %+v; want one object of two entries", o1.obj)
	}
	re1, re2 := r.submitWait(t, epoch2(5, 9)), r.submitWait(t, epoch2(10, 19))
	r.close(t)
	if o, o2 := <-re1, <-re2; o.err != nil || o2.err != nil {
		t.Fatalf("re-submitted slices: %v, %v", o.err, o2.err)
	}
	var got []string
	for _, o := range r.pub.published() {
		for _, e := range o.Entries {
			got = append(got, fmt.Sprintf("%s@%d[%d,%d]", e.Topic, e.LeaderEpoch, e.BaseOffset, e.LastOffset))
		}
	}
	if w := "[p@1[0,9] q@1[0,0] p@2[5,9] p@2[10,19]]"; fmt.Sprint(got) != w {
		t.Fatalf("published %v, want %s", got, w)
	}
	if m := r.c.Metrics(); m.ObjectsPartial != 1 {
		t.Errorf("metrics %+v: want one partial object", m)
	}
}

// TestEveryPartitionRefusedIsNotPublished: an object all of whose slices
// are refused is neither uploaded nor published.
func TestEveryPartitionRefusedIsNotPublished(t *testing.T) {
	in := []objformat.Input{
		{TopicPartition: metadata.TopicPartition{Topic: "p"}, BaseOffset: 5, LastOffset: 9, Data: []byte("x")},
		{TopicPartition: metadata.TopicPartition{Topic: "p"}, BaseOffset: 0, LastOffset: 4, Data: []byte("y")},
		{TopicPartition: metadata.TopicPartition{Topic: "p"}, BaseOffset: 9, LastOffset: 12, Data: []byte("z")},
		{TopicPartition: metadata.TopicPartition{Topic: "q"}, BaseOffset: 0, LastOffset: 0, Data: []byte("q")},
	}
	got := refuse(in)
	want := []bool{false, true, true, false}
	for i := range in {
		if (got[i] != nil) != want[i] || (got[i] != nil && !errors.Is(got[i], ErrRefused)) {
			t.Errorf("slice %d: refused %v, want refused %v", i, got[i], want[i])
		}
	}
	if refuse(in[:1]) != nil || refuse([]objformat.Input{in[1], in[0], in[3]}) != nil {
		t.Error("refused slices in order")
	}
}

// TestPartitionBoundAdmitsOthers: a partition holding its share of the
// bound waits in Submit, while other partitions are still admitted at
// once; when its slices are released, it goes on.
func TestPartitionBoundAdmitsOthers(t *testing.T) {
	gate := make(chan struct{})
	faults := func(int) fault { return fault{gate: gate} }
	r := newRig(t, Config{UploadBytes: 1, QueueSlices: 8, PartitionQueueSlices: 2, ThreadPoolSize: 1}, faults, nil)
	hot, cold := metadata.TopicPartition{Topic: "hot"}, metadata.TopicPartition{Topic: "cold"}
	for i := range int64(2) {
		if err := r.c.Submit(context.Background(), oneSlice(hot, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- r.c.Submit(context.Background(), oneSlice(hot, 2, 2)) }()
	waitFor(t, "the hot partition's Submit to block", func() bool { return r.c.Metrics().SubmitsBlocked == 1 })
	for i := range int64(2) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := r.c.Submit(ctx, oneSlice(cold, i, i))
		cancel()
		if err != nil {
			t.Fatalf("cold partition's Submit %d: %v while only hot is at its bound", i, err)
		}
	}
	if m := r.c.Metrics(); m.SubmitsBlocked != 1 || m.HeldSlices != 4 {
		t.Fatalf("metrics %+v: want 1 blocked Submit, 4 held", m)
	}
	select {
	case err := <-errc:
		t.Fatalf("hot Submit returned %v past its partition's bound", err)
	default:
	}
	close(gate)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	r.close(t)
	checkOrder(t, r.pub.published(), map[metadata.TopicPartition]int64{hot: 3, cold: 2})
}

// TestPartitionBoundValidate: the per-partition bound defaults to a share
// of the queue's and may not exceed it.
func TestPartitionBoundValidate(t *testing.T) {
	base := func() Config { return Config{Writer: StoreWriter{}, Publisher: &recPublisher{}} }
	c := base()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.PartitionQueueSlices != DefaultQueueSlices/DefaultPartitionShare || c.PartitionQueueBytes != DefaultQueueBytes/DefaultPartitionShare {
		t.Errorf("defaults %d / %d", c.PartitionQueueSlices, c.PartitionQueueBytes)
	}
	c = base()
	c.QueueSlices = 2
	if err := c.Validate(); err != nil || c.PartitionQueueSlices != 1 {
		t.Errorf("tiny queue: %v, per partition %d", err, c.PartitionQueueSlices)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.PartitionQueueSlices = DefaultQueueSlices + 1 },
		func(c *Config) { c.PartitionQueueBytes = DefaultQueueBytes + 1 },
		func(c *Config) { c.PartitionQueueSlices = -1 },
	} {
		c := base()
		bad(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}

// TestFailureReportsPerPartitionUnderReordering: uploads finish out of
// order and some objects fail; each partition's given-up slices only fail
// that partition's later slices; re-submitting, as a task does, every
// partition ends with all its entries published once, contiguous and in
// offset order.
func TestFailureReportsPerPartitionUnderReordering(t *testing.T) {
	var gmu sync.Mutex
	var held []chan struct{}
	faults := func(n int) fault {
		gmu.Lock()
		defer gmu.Unlock()
		switch {
		case n%5 == 1:
			return fault{before: httpErr{403}}
		case n%3 == 0 && len(held) < 1:
			g := make(chan struct{})
			held = append(held, g)
			return fault{gate: g}
		}
		for _, g := range held {
			close(g)
		}
		held = nil
		return fault{}
	}
	perSlice := int64(holSliceBytes + objformat.EntrySize("t"))
	r := newRig(t, Config{UploadBytes: int64(objformat.FixedOverhead) + 3*perSlice, Interval: 5 * time.Millisecond, ThreadPoolSize: 3}, faults, nil)
	const parts, want = 6, 60
	type ev struct {
		tp   metadata.TopicPartition
		base int64
		err  error
	}
	evs := make(chan ev, 1024)
	next := map[metadata.TopicPartition]int64{}
	inflight := map[metadata.TopicPartition]int{}
	failed := map[metadata.TopicPartition]int64{}
	submit := func(tp metadata.TopicPartition) {
		base := next[tp]
		if base >= want {
			return
		}
		s := oneSlice(tp, base, base+1)
		s.Done = func(_ UploadedObject, err error) { evs <- ev{tp, base, err} }
		inflight[tp]++
		next[tp] = base + 2
		if err := r.c.Submit(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	tps := make([]metadata.TopicPartition, parts)
	for i := range tps {
		tps[i] = metadata.TopicPartition{Topic: "t", Partition: int32(i)}
		submit(tps[i])
	}
	published := 0
	for published < parts {
		// Release a held PUT when nothing else can finish.
		var e ev
		select {
		case e = <-evs:
		case <-time.After(time.Millisecond):
			gmu.Lock()
			for _, g := range held {
				close(g)
			}
			held = nil
			gmu.Unlock()
			continue
		}
		inflight[e.tp]--
		if e.err != nil {
			if f, ok := failed[e.tp]; !ok || e.base < f {
				failed[e.tp] = e.base
			}
		}
		if inflight[e.tp] > 0 {
			continue
		}
		// The task's rule: once none of its slices is held, re-cut from
		// the lowest given-up base, else go on.
		if f, ok := failed[e.tp]; ok {
			next[e.tp] = f
			delete(failed, e.tp)
		}
		if next[e.tp] >= want {
			published++
			continue
		}
		submit(e.tp)
		submit(e.tp) // two in flight: a failure of the first fails the second
	}
	r.close(t)
	w := map[metadata.TopicPartition]int64{}
	for _, tp := range tps {
		w[tp] = want
	}
	checkOrder(t, r.pub.published(), w)
	if m := r.c.Metrics(); m.ObjectsPartial == 0 || m.ObjectsFailed == 0 {
		t.Errorf("metrics %+v: the faults did not exercise partial objects", m)
	}
}

// TestObjectOfOnlyGivenUpSlicesIsAnOrphan: an object uploaded whose every
// slice was given up is not published and leaves the in-flight set, so
// the orphan collector deletes it after its grace, and only it.
func TestObjectOfOnlyGivenUpSlicesIsAnOrphan(t *testing.T) {
	faults := func(n int) fault {
		if n == 0 {
			return fault{before: httpErr{403}}
		}
		return fault{}
	}
	r := newRig(t, Config{UploadBytes: 1}, faults, nil)
	p, q := metadata.TopicPartition{Topic: "p"}, metadata.TopicPartition{Topic: "q"}
	if o := <-r.submitWait(t, oneSlice(p, 0, 0)); o.err == nil {
		t.Fatal("first object published despite its failed PUT")
	}
	if o := <-r.submitWait(t, oneSlice(p, 1, 1)); !errors.Is(o.err, ErrEarlierSliceFailed) {
		t.Fatalf("later slice: %v, want ErrEarlierSliceFailed", o.err)
	}
	kept := <-r.submitWait(t, oneSlice(q, 0, 0))
	if kept.err != nil {
		t.Fatal(kept.err)
	}
	r.close(t)
	listing, err := r.store.List(context.Background(), objstore.ListOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(listing.Objects) != 2 {
		t.Fatalf("stored %d objects, want 2 (the given-up one and q's)", len(listing.Objects))
	}
	referenced := func(k string) bool { return k == kept.obj.Key }
	got := ChooseOrphans(listing.Objects, "", r.clk.Now().Add(DefaultOrphanGrace), DefaultOrphanGrace, referenced, r.c.InFlight)
	if len(got) != 1 || got[0] == kept.obj.Key {
		t.Fatalf("orphans %v; want the one object of given-up slices, not %s", got, kept.obj.Key)
	}
}

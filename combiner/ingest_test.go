package combiner

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/metadata"
)

// bodyCheckWriter checks encode-buffer reuse from the writer's side: a body
// must not change while its PUT is in flight, nor between the attempts of
// one object's upload (retries after a 503 or an ambiguous PUT).
type bodyCheckWriter struct {
	t  *testing.T
	w  ObjectWriter
	mu struct {
		sync.Mutex
		first map[string][]byte // key → body of its first attempt
	}
}

func (b *bodyCheckWriter) PutObject(ctx context.Context, key string, body []byte) error {
	snap := bytes.Clone(body)
	b.mu.Lock()
	if prev, ok := b.mu.first[key]; !ok {
		b.mu.first[key] = snap
	} else if !bytes.Equal(prev, body) {
		b.t.Errorf("a retry of %s PUTs a different body than its first attempt", key)
	}
	b.mu.Unlock()
	err := b.w.PutObject(ctx, key, body)
	// Give other workers time to encode: one reusing this buffer too early
	// would overwrite it now.
	for range 50 {
		runtime.Gosched()
	}
	if !bytes.Equal(snap, body) {
		b.t.Errorf("the body of %s changed while its PUT was in flight", key)
	}
	return err
}

func (b *bodyCheckWriter) ReadObjectTail(ctx context.Context, key string, n int64) ([]byte, error) {
	return b.w.ReadObjectTail(ctx, key, n)
}

// sliceData is the distinct bytes of partition p's slice at base, so an
// object built from a wrongly reused buffer cannot pass for the right one.
func sliceData(p int32, base int64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(int64(p)*31 + base*7 + int64(i))
	}
	return b
}

func TestBufferReuseKeepsInFlightBodies(t *testing.T) {
	// Seeded faults: 503s before storing (retry after backoff), ambiguous
	// PUTs that store and then fail (retry finds its own object), and PUTs
	// held in flight while other workers encode the next objects.
	g := newGatedFaults(7, 5)
	var bw *bodyCheckWriter
	wrap := func(w ObjectWriter) ObjectWriter {
		bw = &bodyCheckWriter{t: t, w: w}
		bw.mu.first = map[string][]byte{}
		return bw
	}
	const queueSlices = 48
	r := newRigWrapped(t, Config{UploadBytes: 1500, ThreadPoolSize: 3, QueueSlices: queueSlices}, g.fault, nil, wrap)

	// A held PUT also goes when the pipeline is full behind it, or once
	// submission ends.
	stopRelease := g.releaseWhenFull(r.c, queueSlices)
	var mu sync.Mutex
	doneErrs := 0
	done := func(_ UploadedObject, err error) {
		if err != nil {
			mu.Lock()
			doneErrs++
			mu.Unlock()
		}
	}
	const parts, perPart = 8, 60
	want := map[metadata.TopicPartition]int64{}
	for i := range perPart {
		for p := range int32(parts) {
			tp := metadata.TopicPartition{Topic: "t", Partition: p}
			base := want[tp]
			n := int64(1 + (i+int(p))%3)
			s := Slice{TopicPartition: tp, LeaderEpoch: 1, BaseOffset: base, LastOffset: base + n - 1,
				Data: sliceData(p, base, 50+(i*37+int(p)*11)%250), Done: done}
			if err := r.c.Submit(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			want[tp] = base + n
		}
	}
	stopRelease()
	g.releaseUntilEmpty(r.c)
	r.close(t)

	if doneErrs != 0 {
		t.Fatalf("%d slices failed", doneErrs)
	}
	m := r.c.Metrics()
	if m.UploadRetries == 0 {
		t.Fatalf("no upload retries: %+v", m)
	}
	objs := r.pub.published()
	checkOrder(t, objs, want)
	// Every stored object holds exactly the bytes submitted for its entries.
	var sr objformat.SliceReader
	defer sr.Close()
	for _, o := range objs {
		obj, err := r.store.GetRange(context.Background(), o.Key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := objformat.DecodeFooter(obj)
		if err != nil {
			t.Fatalf("%s: %v", o.Key, err)
		}
		for _, e := range entries {
			stored, err := objformat.StoredBytes(obj, e)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := sr.Read(stored, e)
			if err != nil {
				t.Fatalf("%s: %v", o.Key, err)
			}
			if !bytes.Equal(raw, sliceData(e.Partition, e.BaseOffset, len(raw))) {
				t.Fatalf("%s: %v at %d holds another slice's bytes", o.Key, e.TopicPartition, e.BaseOffset)
			}
		}
	}
	t.Logf("objects %d, metrics %+v", len(objs), m)
}

func TestReleasedBatchesHoldNoReferences(t *testing.T) {
	// Recycled batches and the queue's arrays must not keep published
	// slices' data or callbacks alive.
	r := newRig(t, Config{UploadBytes: 600, ThreadPoolSize: 2}, nil, nil)
	submitAll(t, r.c, 5, 40, 100, func(UploadedObject, error) {})
	r.close(t)
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if len(r.c.mu.spare) == 0 {
		t.Fatal("no batch was recycled")
	}
	check := func(what string, b *batch) {
		if len(b.in) != 0 || len(b.done) != 0 {
			t.Errorf("%s holds %d slices", what, len(b.in))
		}
		for i, in := range b.in[:cap(b.in)] {
			if in.Data != nil || in.Topic != "" {
				t.Errorf("%s keeps slice %d's data past its length", what, i)
				return
			}
		}
		for i, d := range b.done[:cap(b.done)] {
			if d != nil {
				t.Errorf("%s keeps slice %d's Done past its length", what, i)
				return
			}
		}
	}
	for i, b := range r.c.mu.spare {
		check("spare batch "+string(rune('0'+i%10)), b)
	}
	check("queue", &r.c.mu.queue)
}

// bareCombiner is a combiner on a manual clock that only the test moves,
// writing through a faultWriter with faults (nil: none).
func bareCombiner(t *testing.T, cfg Config, faults func(int) fault) (*Combiner, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(t0)
	store := newMemStore(clk)
	if faults == nil {
		faults = func(int) fault { return fault{} }
	}
	cfg.BrokerID, cfg.Publisher, cfg.Clock = 7, &recPublisher{t: t, store: store}, clk
	cfg.Writer = &faultWriter{w: StoreWriter{Store: store}, fn: faults}
	cfg.Rand = rand.New(rand.NewPCG(1, 2))
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return c, clk
}

// armed returns the AppendedAt the cutter's interval timer is armed for,
// once the timer is armed; zero before.
func armed(c *Combiner, clk *clock.Manual) time.Time {
	c.mu.Lock()
	at := c.mu.armedFor
	c.mu.Unlock()
	// armedFor is set after the timer of the previous pass was stopped and
	// before this pass arms it: read it first, then see the timer armed.
	if at.IsZero() || clk.Pending() != 1 {
		return time.Time{}
	}
	return at
}

func waitArmed(t *testing.T, c *Combiner, clk *clock.Manual, want time.Time) {
	t.Helper()
	waitFor(t, "the interval timer armed for "+want.String(), func() bool { return armed(c, clk).Equal(want) })
}

// doneLog collects the base offsets of slices as their Done reports
// success.
type doneLog struct {
	t  *testing.T
	mu struct {
		sync.Mutex
		offs []int64
	}
}

func (d *doneLog) slice(off int64, size int) Slice {
	return Slice{TopicPartition: metadata.TopicPartition{Topic: "t"}, BaseOffset: off, LastOffset: off,
		Data: bytes.Repeat([]byte{'x'}, size), Done: func(_ UploadedObject, err error) {
			if err != nil {
				d.t.Error(err)
			}
			d.mu.Lock()
			d.mu.offs = append(d.mu.offs, off)
			d.mu.Unlock()
		}}
}

func (d *doneLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.mu.offs)
}

func TestIntervalCountsFromTheOpenObjectsFirstSlice(t *testing.T) {
	// Submit stamps slices without AppendedAt once per object Pack leaves
	// open. A slice after a full object starts a new object and must get
	// its own stamp, not that of the object before it, even while that
	// object is still queued. One worker whose first PUT is held keeps the
	// cutter from cutting meanwhile.
	gate := make(chan struct{})
	faults := func(n int) fault {
		if n == 0 {
			return fault{gate: gate}
		}
		return fault{}
	}
	one := int64(100 + objformat.EntrySize("t"))
	c, clk := bareCombiner(t, Config{UploadBytes: emptyObject + 3*one, Interval: 10 * time.Millisecond, ThreadPoolSize: 1}, faults)
	d := &doneLog{t: t}
	submit := func(off int64) {
		if err := c.Submit(context.Background(), d.slice(off, 100)); err != nil {
			t.Fatal(err)
		}
	}
	// Object 0 goes to the worker and its PUT is held; the cutter cuts
	// object 1 and waits to hand it over.
	for off := range int64(6) {
		submit(off)
	}
	waitFor(t, "object 1 cut", func() bool { return c.Metrics().QueuedSlices == 0 })
	// Object 2 stays queued, complete, stamped t0.
	for off := int64(6); off < 9; off++ {
		submit(off)
	}
	clk.Advance(8 * time.Millisecond)
	submit(9)
	c.mu.Lock()
	at := c.mu.view[len(c.mu.view)-1].AppendedAt
	c.mu.Unlock()
	if want := t0.Add(8 * time.Millisecond); !at.Equal(want) {
		t.Fatalf("the slice submitted at %v is stamped %v", want, at)
	}
	close(gate)
	waitFor(t, "objects 0-2 published", func() bool { return d.count() >= 9 })
	// Due Interval after the start: t0+10ms.
	clk.Advance(time.Millisecond)
	if d.count() != 9 {
		t.Fatal("the last slice went before the interval")
	}
	clk.Advance(time.Millisecond)
	waitFor(t, "the last slice published", func() bool { return d.count() == 10 })
}

func TestOlderSliceWakesTheCutter(t *testing.T) {
	// The timer is armed for the tick after the oldest slice queued; a
	// slice appended before that tick's window was due at an earlier tick
	// and must bring the cut forward, not wait for that timer.
	c, clk := bareCombiner(t, Config{UploadBytes: 1 << 20, Interval: 10 * time.Millisecond}, nil)
	done := make(chan struct{}, 2)
	cb := func(_ UploadedObject, err error) {
		if err != nil {
			t.Error(err)
		}
		done <- struct{}{}
	}
	if err := c.Submit(context.Background(), Slice{TopicPartition: metadata.TopicPartition{Topic: "t"}, Data: []byte("a"), Done: cb}); err != nil {
		t.Fatal(err)
	}
	waitArmed(t, c, clk, t0)
	clk.Advance(2 * time.Millisecond)
	older := t0.Add(-5 * time.Millisecond)
	if err := c.Submit(context.Background(), Slice{TopicPartition: metadata.TopicPartition{Topic: "t", Partition: 1}, Data: []byte("b"),
		AppendedAt: older, Done: cb}); err != nil {
		t.Fatal(err)
	}
	// older was due at the tick t0: both go now, the clock unmoved.
	<-done
	<-done
	if d := clk.Since(t0); d != 2*time.Millisecond {
		t.Fatalf("cut after %v", d)
	}
}

func TestSliceThatDoesNotFitWakesTheCutter(t *testing.T) {
	// When a slice would push the open object past MaxObjectBytes, that
	// object is complete and goes at once, before its interval.
	one := int64(60 + objformat.EntrySize("t"))
	c, clk := bareCombiner(t, Config{UploadBytes: emptyObject + one + one/2, MaxObjectBytes: emptyObject + one + one/2,
		Interval: 10 * time.Millisecond}, nil)
	d := &doneLog{t: t}
	if err := c.Submit(context.Background(), d.slice(0, 60)); err != nil {
		t.Fatal(err)
	}
	waitArmed(t, c, clk, t0)
	clk.Advance(4 * time.Millisecond)
	if err := c.Submit(context.Background(), d.slice(1, 60)); err != nil {
		t.Fatal(err)
	}
	// The first object goes 4ms after its slice, not at the tick; the
	// second slice starts the next object, which waits for the tick
	// (t0+10ms, whose window starts at t0).
	waitFor(t, "the first object published", func() bool { return d.count() == 1 })
	waitArmed(t, c, clk, t0)
	if d.count() != 1 {
		t.Fatal("the second slice went before its tick")
	}
}

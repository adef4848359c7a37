package combiner

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type rig struct {
	clk   *clock.Manual
	store *memStore
	fw    *faultWriter
	pub   *recPublisher
	c     *Combiner
	stop  chan struct{}
	once  sync.Once
	wg    *sync.WaitGroup
}

// stopPump stops advancing the clock: from then on no time passes unless
// the test advances it.
func (r *rig) stopPump() {
	r.once.Do(func() { close(r.stop) })
	r.wg.Wait()
}

func newRig(t *testing.T, cfg Config, faults func(int) fault, pubFail func(int) error) *rig {
	t.Helper()
	return newRigWrapped(t, cfg, faults, pubFail, nil)
}

// newRigWrapped is newRig with the combiner writing through wrap(r.fw).
func newRigWrapped(t *testing.T, cfg Config, faults func(int) fault, pubFail func(int) error, wrap func(ObjectWriter) ObjectWriter) *rig {
	t.Helper()
	r := &rig{clk: clock.NewManual(t0), stop: make(chan struct{})}
	r.store = newMemStore(r.clk)
	if faults == nil {
		faults = func(int) fault { return fault{} }
	}
	r.fw = &faultWriter{w: StoreWriter{Store: r.store}, fn: faults}
	r.pub = &recPublisher{t: t, store: r.store, failFor: pubFail}
	cfg.Writer, cfg.Publisher, cfg.Clock = r.fw, r.pub, r.clk
	if wrap != nil {
		cfg.Writer = wrap(r.fw)
	}
	cfg.Rand = rand.New(rand.NewPCG(1, 2))
	if cfg.BrokerID == 0 {
		cfg.BrokerID = 7
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	r.wg = pump(r.clk, time.Millisecond, r.stop)
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = c.Close(ctx)
		r.stopPump()
	})
	return r
}

func (r *rig) close(t *testing.T) {
	t.Helper()
	if err := r.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// slices makes n slices per partition of recs 1-byte "records" each.
func submitAll(t *testing.T, c *Combiner, parts, perPart, size int, done func(UploadedObject, error)) map[metadata.TopicPartition]int64 {
	t.Helper()
	want := map[metadata.TopicPartition]int64{}
	for i := 0; i < perPart; i++ {
		for p := 0; p < parts; p++ {
			tp := metadata.TopicPartition{Topic: "t", Partition: int32(p)}
			base := want[tp]
			n := int64(1 + (i+p)%3)
			data := bytes.Repeat([]byte{byte(p)}, size)
			s := Slice{TopicPartition: tp, LeaderEpoch: 1, BaseOffset: base, LastOffset: base + n - 1, Data: data, Done: done}
			if err := c.Submit(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			want[tp] = base + n
		}
	}
	return want
}

func TestPublishOrderUnderFaults(t *testing.T) {
	// Seeded faults: 503s before storing, ambiguous PUTs that store and
	// then fail, and PUTs held at a gate so later objects finish first.
	// At most two PUTs are held at once (4 workers), and each is released
	// when a later PUT starts, so later objects finish first.
	g := newGatedFaults(42, 6)
	pubFail := func(call int) error {
		if call%7 == 3 {
			return httpErr{503} // Kafka unreachable for a moment
		}
		return nil
	}
	r := newRig(t, Config{UploadBytes: 2000, Interval: 10 * time.Millisecond, ThreadPoolSize: 4, QueueSlices: 64}, g.fault, pubFail)
	var mu sync.Mutex
	doneCount, doneErrs := 0, 0
	done := func(_ UploadedObject, err error) {
		mu.Lock()
		doneCount++
		if err != nil {
			doneErrs++
		}
		mu.Unlock()
	}
	// A held PUT also goes when the pipeline is full behind it, or once
	// submission ends.
	stopRelease := g.releaseWhenFull(r.c, 64)
	want := submitAll(t, r.c, 20, 30, 100, done)
	stopRelease()
	g.releaseUntilEmpty(r.c)
	r.close(t)
	m := r.c.Metrics()
	if doneCount != 600 || doneErrs != 0 {
		t.Fatalf("Done called %d times, %d errors; want 600, 0", doneCount, doneErrs)
	}
	if m.UploadRetries == 0 || m.PublishRetries == 0 {
		t.Errorf("expected retries, got %+v", m)
	}
	if m.HeldSlices != 0 || m.QueuedSlices != 0 {
		t.Errorf("held after close: %+v", m)
	}
	objs := r.pub.published()
	checkOrder(t, objs, want)
	for _, o := range objs {
		if !IsWALKey("", o.Key) || o.BrokerID != 7 {
			t.Errorf("bad key %q / broker %d", o.Key, o.BrokerID)
		}
		entries, size, err := ReadObjectFooter(context.Background(), r.store, o.Key, nil)
		if err != nil || size != o.Size || len(entries) != len(o.Entries) {
			t.Fatalf("stored object %s: %v (size %d vs %d)", o.Key, err, size, o.Size)
		}
	}
	if int64(len(objs)) != m.ObjectsPub || r.store.len() != len(objs) {
		t.Errorf("published %d, metric %d, stored %d", len(objs), m.ObjectsPub, r.store.len())
	}
	r.fw.mu.Lock()
	stored := r.fw.mu.stored
	r.fw.mu.Unlock()
	outOfOrder := false
	for i, o := range objs {
		if i < len(stored) && stored[i] != o.Key {
			outOfOrder = true
		}
	}
	if !outOfOrder {
		t.Error("uploads never finished out of order; the test did not exercise reordering")
	}
	t.Logf("objects %d, metrics %+v", len(objs), m)
}

func TestNoPublishWhenPutFails(t *testing.T) {
	faults := func(int) fault { return fault{before: httpErr{403}} } // not retriable
	r := newRig(t, Config{UploadBytes: 1}, faults, nil)
	errc := make(chan error, 1)
	err := r.c.Submit(context.Background(), Slice{TopicPartition: metadata.TopicPartition{Topic: "t"}, LastOffset: 0, Data: []byte("x"),
		Done: func(_ UploadedObject, err error) { errc <- err }})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.As(err, new(httpErr)) {
		t.Fatalf("Done got %v, want the 403", err)
	}
	r.close(t)
	if n := len(r.pub.published()); n != 0 {
		t.Fatalf("published %d objects for a failed PUT", n)
	}
	if m := r.c.Metrics(); m.ObjectsFailed != 1 || m.HeldSlices != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestUploadTimeoutGivesUp(t *testing.T) {
	faults := func(int) fault { return fault{before: httpErr{503}} }
	r := newRig(t, Config{UploadBytes: 1, UploadTimeout: 50 * time.Millisecond}, faults, nil)
	errc := make(chan error, 1)
	_ = r.c.Submit(context.Background(), Slice{TopicPartition: metadata.TopicPartition{Topic: "t"}, Data: []byte("x"),
		Done: func(_ UploadedObject, err error) { errc <- err }})
	if err := <-errc; !errors.As(err, new(httpErr)) {
		t.Fatalf("Done got %v", err)
	}
	if m := r.c.Metrics(); m.UploadRetries == 0 {
		t.Fatalf("no retries before giving up: %+v", m)
	}
}

func TestKeyTakenByAnotherObject(t *testing.T) {
	// The first PUT finds its key holding someone else's object: the
	// combiner must not claim it, and must upload under a new key.
	var r *rig
	var foreign string
	faults := func(n int) fault { return fault{} }
	r = newRig(t, Config{UploadBytes: 1}, faults, nil)
	r.fw.fn = func(n int) fault {
		if n == 0 {
			return fault{before: nil}
		}
		return fault{}
	}
	// Pre-create the key the combiner will pick: replay its id source.
	ids := rand.New(rand.NewPCG(1, 2))
	foreign = Key("", 7, t0, newID(ids))
	if err := r.store.Put(context.Background(), foreign, []byte("not ours, 16+ bytes long"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	got := make(chan UploadedObject, 1)
	_ = r.c.Submit(context.Background(), Slice{TopicPartition: metadata.TopicPartition{Topic: "t"}, Data: []byte("x"),
		Done: func(o UploadedObject, err error) {
			if err != nil {
				t.Error(err)
			}
			got <- o
		}})
	o := <-got
	if o.Key == foreign {
		t.Fatalf("claimed the foreign object %s", foreign)
	}
	if m := r.c.Metrics(); m.UploadRetries != 1 {
		t.Fatalf("the first PUT did not hit the foreign key: %+v", m)
	}
	b, _ := r.store.GetRange(context.Background(), foreign, 0, -1)
	if string(b) != "not ours, 16+ bytes long" {
		t.Fatalf("foreign object overwritten")
	}
}

func TestBackPressure(t *testing.T) {
	gate := make(chan struct{})
	faults := func(int) fault { return fault{gate: gate} }
	r := newRig(t, Config{UploadBytes: 1, QueueSlices: 3, PartitionQueueSlices: 3, ThreadPoolSize: 1}, faults, nil)
	s := func(off int64) Slice {
		return Slice{TopicPartition: metadata.TopicPartition{Topic: "t"}, BaseOffset: off, LastOffset: off, Data: []byte("x")}
	}
	for i := range int64(3) {
		if err := r.c.Submit(context.Background(), s(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Full: a Submit blocks until its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.c.Submit(ctx, s(3)) }()
	waitFor(t, "Submit to block", func() bool { return r.c.Metrics().SubmitsBlocked == 1 })
	select {
	case err := <-errc:
		t.Fatalf("Submit returned %v while the queue was full", err)
	default:
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit: %v, want context.Canceled", err)
	}
	// A blocked Submit goes through once uploads drain.
	go func() { errc <- r.c.Submit(context.Background(), s(3)) }()
	waitFor(t, "second Submit to block", func() bool { return r.c.Metrics().SubmitsBlocked == 2 })
	if m := r.c.Metrics(); m.HeldSlices != 3 {
		t.Fatalf("held %d, want 3", m.HeldSlices)
	}
	close(gate)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	r.close(t)
	checkOrder(t, r.pub.published(), map[metadata.TopicPartition]int64{{Topic: "t"}: 4})
}

func TestPublisherOutageBackPressuresThenResumes(t *testing.T) {
	var mu sync.Mutex
	down := true
	refused := 0
	pubFail := func(int) error {
		mu.Lock()
		defer mu.Unlock()
		if down {
			refused++
			return httpErr{503}
		}
		return nil
	}
	r := newRig(t, Config{UploadBytes: 1, QueueSlices: 5, PartitionQueueSlices: 5}, nil, pubFail)
	tp := metadata.TopicPartition{Topic: "t", Partition: 3}
	for i := range int64(5) {
		if err := r.c.Submit(context.Background(), Slice{TopicPartition: tp, BaseOffset: i, LastOffset: i, Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	// Uploads continue while publishing is down...
	waitFor(t, "uploads", func() bool { return r.c.Metrics().ObjectsUp == 5 })
	errc := make(chan error, 1)
	go func() {
		errc <- r.c.Submit(context.Background(), Slice{TopicPartition: tp, BaseOffset: 5, LastOffset: 5, Data: []byte("x")})
	}()
	// ...until the bound, then Submit blocks.
	waitFor(t, "Submit to block", func() bool { return r.c.Metrics().SubmitsBlocked == 1 })
	if n := len(r.pub.published()); n != 0 {
		t.Fatalf("published %d while down", n)
	}
	// The publisher must have met the outage before Kafka comes back.
	waitFor(t, "a refused publish", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused > 0
	})
	mu.Lock()
	down = false
	mu.Unlock()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	r.close(t)
	checkOrder(t, r.pub.published(), map[metadata.TopicPartition]int64{tp: 6})
	if m := r.c.Metrics(); m.PublishRetries == 0 {
		t.Fatalf("no publish retries: %+v", m)
	}
}

func TestCloseAbortsAndFailsHeldSlices(t *testing.T) {
	gate := make(chan struct{}) // never opened: the PUT hangs
	r := newRig(t, Config{UploadBytes: 1}, func(int) fault { return fault{gate: gate} }, nil)
	errc := make(chan error, 2)
	for i := range int64(2) {
		_ = r.c.Submit(context.Background(), Slice{TopicPartition: metadata.TopicPartition{Topic: "t"}, BaseOffset: i, LastOffset: i, Data: []byte("x"),
			Done: func(_ UploadedObject, err error) { errc <- err }})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.c.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close: %v", err)
	}
	for range 2 {
		if err := <-errc; err == nil {
			t.Fatal("a slice of an aborted upload reported success")
		}
	}
	if err := r.c.Submit(context.Background(), Slice{TopicPartition: metadata.TopicPartition{Topic: "t"}, Data: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}
}

func TestIntervalCutsSmallQueue(t *testing.T) {
	r := newRig(t, Config{UploadBytes: 1 << 20, Interval: 10 * time.Millisecond}, nil, nil)
	got := make(chan UploadedObject, 1)
	_ = r.c.Submit(context.Background(), Slice{TopicPartition: metadata.TopicPartition{Topic: "t"}, Data: []byte("x"),
		Done: func(o UploadedObject, _ error) { got <- o }})
	o := <-got // only the interval (pumped clock) can cut it
	if r.clk.Since(t0) < 10*time.Millisecond {
		t.Fatalf("cut after %v, before the interval", r.clk.Since(t0))
	}
	if len(o.Entries) != 1 {
		t.Fatalf("entries %+v", o.Entries)
	}
}

func TestSubmitRefusesBadSlices(t *testing.T) {
	r := newRig(t, Config{}, nil, nil)
	for name, s := range map[string]Slice{
		"empty":    {TopicPartition: metadata.TopicPartition{Topic: "t"}},
		"no topic": {Data: []byte("x")},
		"offsets":  {TopicPartition: metadata.TopicPartition{Topic: "t"}, BaseOffset: 2, LastOffset: 1, Data: []byte("x")},
	} {
		if err := r.c.Submit(context.Background(), s); !errors.Is(err, ErrInvalidSlice) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config { return Config{Writer: StoreWriter{}, Publisher: &recPublisher{}} }
	bad := map[string]func(*Config){
		"no writer":      func(c *Config) { c.Writer = nil },
		"prefix":         func(c *Config) { c.KeyPrefix = "x" },
		"max < upload":   func(c *Config) { c.UploadBytes = 10; c.MaxObjectBytes = 5 },
		"pool":           func(c *Config) { c.ThreadPoolSize = -1 },
		"codec":          func(c *Config) { c.Codec = 5 },
		"backoff":        func(c *Config) { c.BackoffMin = time.Second; c.BackoffMax = time.Millisecond },
		"negative queue": func(c *Config) { c.QueueSlices = -1 },
	}
	for name, f := range bad {
		c := base()
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := base()
	if err := c.Validate(); err != nil || c.UploadBytes != DefaultUploadBytes || c.Interval != DefaultInterval || c.ThreadPoolSize != DefaultThreadPoolSize {
		t.Fatalf("defaults: %v %+v", err, c)
	}
	oc := OrphanConfig{Store: newMemStore(clock.Real{}), Refs: refs{}, Grace: time.Minute, UploadTimeout: time.Minute}
	if err := oc.Validate(); err == nil {
		t.Error("orphan grace equal to upload timeout accepted")
	}
}

func TestKeys(t *testing.T) {
	k := Key("p/", 12, t0, metadata.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	if k != "p/wal/12/2025060112/01020304-0506-0708-090a-0b0c0d0e0f10.kwal" || !IsWALKey("p/", k) {
		t.Fatalf("key %q", k)
	}
	for _, bad := range []string{"p/wal/12/2025060112/abc", "p/wal/12/abc.kwal", "p/wal/x/2025060112/a.kwal", "p/wal/12/2025060112/a.kwal/b.kwal", "q/wal/12/2025060112/a.kwal"} {
		if IsWALKey("p/", bad) {
			t.Errorf("IsWALKey(%q)", bad)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	a, b := newID(rng), newID(rng)
	if a == b || len(a.UUID()) != 36 || a[6]>>4 != 4 || a[8]>>6 != 2 || strings.HasPrefix(Key("", 1, t0, a)+"/", Key("", 1, t0, b)+"/") {
		t.Fatalf("ids %q %q", a, b)
	}
}

type refs map[string]bool

func (r refs) IsReferenced(k string) bool { return r[k] }

func TestChooseOrphans(t *testing.T) {
	now := t0
	grace := 5 * time.Minute
	k := func(name string) string { return Key("", 1, t0, nameID(name)) }
	listing := []objstore.ObjectInfo{
		{Key: k("old"), LastModified: now.Add(-grace)},
		{Key: k("young"), LastModified: now.Add(-grace + time.Second)},
		{Key: k("referenced"), LastModified: now.Add(-time.Hour)},
		{Key: k("inflight"), LastModified: now.Add(-time.Hour)},
		{Key: "wal/1/not-a-wal-key", LastModified: now.Add(-time.Hour)},
	}
	got := ChooseOrphans(listing, "", now, grace, refs{k("referenced"): true}.IsReferenced, func(s string) bool { return s == k("inflight") })
	if len(got) != 1 || got[0] != k("old") {
		t.Fatalf("ChooseOrphans = %v", got)
	}
}

func TestOrphanAfterCrashBetweenPutAndPublish(t *testing.T) {
	// The publisher never answers: the broker "crashes" after the PUT.
	hang := make(chan struct{})
	var r *rig
	r = newRig(t, Config{UploadBytes: 1}, nil, func(int) error { <-hang; return nil })
	defer close(hang)
	_ = r.c.Submit(context.Background(), Slice{TopicPartition: metadata.TopicPartition{Topic: "t"}, Data: []byte("x")})
	waitFor(t, "upload", func() bool { return r.c.Metrics().ObjectsUp == 1 })
	var buf bytes.Buffer
	oc, err := NewOrphanCollector(OrphanConfig{Store: r.store, Refs: refs{}, InFlight: r.c.InFlight,
		Grace: 5 * time.Minute, Clock: r.clk, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// Put a second, unrelated orphan from another broker, and a referenced one.
	other, _, _ := objformat.Encode([]objformat.Input{{TopicPartition: metadata.TopicPartition{Topic: "u"}, Data: []byte("y")}}, 0)
	otherKey, liveKey := Key("", 9, t0, nameID("other")), Key("", 9, t0, nameID("live"))
	_ = r.store.Put(context.Background(), otherKey, other, objstore.PutOptions{})
	_ = r.store.Put(context.Background(), liveKey, other, objstore.PutOptions{})
	oc.cfg.Refs = refs{liveKey: true}

	r.clk.Advance(time.Hour) // far past the grace
	del, err := oc.RunOnce(context.Background())
	if err != nil || len(del) != 1 || del[0] != otherKey {
		t.Fatalf("with our upload in flight: deleted %v, %v", del, err)
	}
	// Crash: the combiner goes away without publishing. Its object is now
	// an orphan; once past the grace it is deleted.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	hang <- struct{}{}
	_ = r.c.Close(ctx)
	del, err = oc.RunOnce(context.Background())
	if err != nil || len(del) != 1 || del[0] == liveKey {
		t.Fatalf("after crash: deleted %v, %v", del, err)
	}
	if r.store.len() != 1 || !r.store.has(liveKey) {
		t.Fatalf("store holds %d objects", r.store.len())
	}
	if !strings.Contains(buf.String(), "deleted orphan") {
		t.Errorf("no log line: %q", buf.String())
	}
}

func TestCorruptObjectTypedErrorAndLog(t *testing.T) {
	s := newMemStore(clock.NewManual(t0))
	obj, _, _ := objformat.Encode([]objformat.Input{{TopicPartition: metadata.TopicPartition{Topic: "t"}, Data: []byte("hello")}}, 0)
	cases := map[string][]byte{
		"truncated": obj[:len(obj)-3],
		"corrupted": func() []byte { c := bytes.Clone(obj); c[len(c)-20] ^= 0xff; return c }(),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			key := Key("", 1, t0, nameID(name))
			_ = s.Put(context.Background(), key, b, objstore.PutOptions{})
			var buf bytes.Buffer
			_, _, err := ReadObjectFooter(context.Background(), s, key, slog.New(slog.NewTextHandler(&buf, nil)))
			if !errors.Is(err, objformat.ErrCorruptObject) {
				t.Fatalf("err %v", err)
			}
			if !strings.Contains(buf.String(), "corrupt combined object") || !strings.Contains(buf.String(), key) {
				t.Fatalf("log %q", buf.String())
			}
		})
	}
}

func TestZstdObjects(t *testing.T) {
	r := newRig(t, Config{UploadBytes: 1 << 10, Codec: metadata.CodecZstd}, nil, nil)
	want := submitAll(t, r.c, 3, 10, 300, nil)
	r.close(t)
	objs := r.pub.published()
	checkOrder(t, objs, want)
	for _, o := range objs {
		b, _ := r.store.GetRange(context.Background(), o.Key, 0, -1)
		for _, e := range o.Entries {
			stored, err := objformat.StoredBytes(b, e)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := objformat.ReadSlice(stored, e)
			if err != nil || !bytes.Equal(raw, bytes.Repeat([]byte{byte(e.Partition)}, 300)) {
				t.Fatalf("slice %+v: %v", e, err)
			}
		}
	}
}

// TestGivenUpSliceFailsLaterOnesOfItsPartition: once a slice is given up,
// later slices of its partition and epoch are given up too (their
// publication would put the partition's entries out of offset order),
// other partitions and later epochs publish, and the partition publishes
// again from the re-submitted slice on, in order.
func TestGivenUpSliceFailsLaterOnesOfItsPartition(t *testing.T) {
	faults := func(n int) fault {
		if n == 0 {
			return fault{before: httpErr{403}} // not retriable: given up at once
		}
		return fault{}
	}
	r := newRig(t, Config{UploadBytes: 1}, faults, nil)
	p0, p1 := metadata.TopicPartition{Topic: "t"}, metadata.TopicPartition{Topic: "t", Partition: 1}
	submit := func(tp metadata.TopicPartition, epoch int32, base int64) error {
		errc := make(chan error, 1)
		if err := r.c.Submit(context.Background(), Slice{TopicPartition: tp, LeaderEpoch: epoch, BaseOffset: base, LastOffset: base,
			Data: []byte("x"), Done: func(_ UploadedObject, err error) { errc <- err }}); err != nil {
			t.Fatal(err)
		}
		return <-errc
	}
	if err := submit(p0, 1, 0); !errors.As(err, new(httpErr)) {
		t.Fatalf("first slice: %v, want the 403", err)
	}
	if err := submit(p0, 1, 1); !errors.Is(err, ErrEarlierSliceFailed) {
		t.Fatalf("slice after the given-up one: %v, want ErrEarlierSliceFailed", err)
	}
	if err := submit(p1, 1, 0); err != nil {
		t.Fatalf("another partition: %v", err)
	}
	if err := submit(p0, 2, 5); err != nil {
		t.Fatalf("a later leader epoch: %v", err)
	}
	for base := int64(0); base < 3; base++ {
		if err := submit(p0, 1, base); err != nil {
			t.Fatalf("re-submitted slice at %d: %v", base, err)
		}
	}
	var got []int64
	for _, o := range r.pub.published() {
		for _, e := range o.Entries {
			if e.TopicPartition == p0 && e.LeaderEpoch == 1 {
				got = append(got, e.BaseOffset)
			}
		}
	}
	if !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("published %v of %v epoch 1, want [0 1 2]", got, p0)
	}
}

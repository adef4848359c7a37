package remotewal

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// memWriter keeps combined objects in memory.
type memWriter struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func (w *memWriter) PutObject(_ context.Context, key string, body []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.objs[key]; ok {
		return fmt.Errorf("put %s: %w", key, objstore.ErrExists)
	}
	w.objs[key] = bytes.Clone(body)
	return nil
}

func (w *memWriter) ReadObjectTail(_ context.Context, key string, n int64) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, ok := w.objs[key]
	if !ok {
		return nil, objstore.ErrNotFound
	}
	return bytes.Clone(b[max(0, int64(len(b))-n):]), nil
}

type openedLog struct {
	tp metadata.TopicPartition
	l  *kafkalog.Log
}

type objRecorder struct {
	mu   sync.Mutex
	objs []combiner.UploadedObject
}

func (r *objRecorder) PublishObject(_ context.Context, o combiner.UploadedObject) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.objs = append(r.objs, o)
	return nil
}

func (r *objRecorder) published() []combiner.UploadedObject {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]combiner.UploadedObject(nil), r.objs...)
}

// spinUntil yields until cond holds; the test binary's timeout bounds it.
func spinUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// TestTasksHoldBytesUntilCalled runs the tasks against the real combiner
// on the manual clock: small appends are held in the logs, announced and
// not cut, with no timer of the tasks' own, until the combiner's interval
// is up; then every partition gives the object one slice. A size cut
// needs no clock at all. The published slices cover every log exactly,
// byte for byte, in order.
func TestTasksHoldBytesUntilCalled(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	w := &memWriter{objs: map[string][]byte{}}
	pub := &objRecorder{}
	comb, err := combiner.New(combiner.Config{Writer: w, Publisher: pub, Clock: clk,
		Interval: 10 * time.Millisecond, UploadBytes: 4 << 20, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer comb.Close(context.Background())
	m, err := NewManager(Config{UploadBytes: 64 << 10, Interval: time.Millisecond, Clock: clk}, comb)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const parts = 20
	logs := make([]*openedLog, parts)
	for p := range logs {
		logs[p] = &openedLog{tp: metadata.TopicPartition{Topic: "orders", Partition: int32(p)}, l: openLog(t, clk, 1<<30)}
		if err := m.StartPartition(logs[p].tp, logs[p].l, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	appendAll := func(batches int) {
		for _, ol := range logs {
			appendN(t, ol.l, 1, batches, 2, 100)
		}
	}
	objects := 0
	round := func(batches int) {
		t.Helper()
		appendAll(batches)
		// The first announcement wakes the combiner, which then arms its
		// timer: wait for both.
		spinUntil(t, "every task to announce", func() bool { return comb.Metrics().Announced == parts && clk.Pending() > 0 })
		if n := len(pub.published()); n != objects {
			t.Fatalf("%d objects before the interval, want %d", n, objects)
		}
		// Only the combiner's interval timer is armed: holding tasks run none.
		if n := clk.Pending(); n != 1 {
			t.Fatalf("%d timers armed with %d partitions holding bytes, want the combiner's one", n, parts)
		}
		clk.Advance(10 * time.Millisecond)
		objects++
		spinUntil(t, "the object", func() bool { return len(pub.published()) == objects })
		o := pub.published()[objects-1]
		seen := map[metadata.TopicPartition]bool{}
		for _, e := range o.Entries {
			if seen[e.TopicPartition] {
				t.Fatalf("object %d has two slices of %v", objects, e.TopicPartition)
			}
			seen[e.TopicPartition] = true
		}
		if len(seen) != parts {
			t.Fatalf("object %d has slices of %d partitions, want %d", objects, len(seen), parts)
		}
	}
	round(1)
	round(3)
	// A size cut goes without the clock: 80 KiB in one partition.
	appendN(t, logs[0].l, 1, 20, 4, 1024)
	spinUntil(t, "the size cut", func() bool { return m.Metrics().CutsBySize == 1 })
	// The size-cut slice and any tail appended after the task looked wait
	// for the combiner's interval.
	spinUntil(t, "the tail published", func() bool {
		if clk.Pending() > 0 {
			clk.Advance(10 * time.Millisecond)
		}
		p, _ := m.PublishedOffset(logs[0].tp)
		return p == logs[0].l.LogEndOffset()
	})
	m.Close()
	if err := comb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Every log is covered exactly, in order, by the published slices.
	raw := map[metadata.TopicPartition][]byte{}
	next := map[metadata.TopicPartition]int64{}
	for _, o := range pub.published() {
		body := w.objs[o.Key]
		for _, e := range o.Entries {
			if e.BaseOffset != next[e.TopicPartition] {
				t.Fatalf("%v: slice at %d, want %d", e.TopicPartition, e.BaseOffset, next[e.TopicPartition])
			}
			next[e.TopicPartition] = e.LastOffset + 1
			raw[e.TopicPartition] = append(raw[e.TopicPartition], body[e.Position:e.Position+e.Length]...)
		}
	}
	for _, ol := range logs {
		seg := ol.l.Segments()[0]
		want, err := ol.l.ReadSegmentRange(seg.BaseOffset, 0, seg.Size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw[ol.tp], want) || next[ol.tp] != ol.l.LogEndOffset() {
			t.Fatalf("%v: published %d bytes up to %d, log has %d up to %d", ol.tp, len(raw[ol.tp]), next[ol.tp], len(want), ol.l.LogEndOffset())
		}
	}
	if m := comb.Metrics(); m.Announced != 0 || m.Called != 0 {
		t.Fatalf("announcements left after the tasks stopped: %+v", m)
	}
}

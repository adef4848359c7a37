package remotewal

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/internal/changefeed"
	"github.com/kwal/kwal/internal/changefeed/feedtest"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/metadata"
)

var tp0 = metadata.TopicPartition{Topic: "orders", Partition: 0}

// captureSink records submitted slices; when block is non-nil Submit waits
// on it, which models a full combiner queue.
type captureSink struct {
	mu      sync.Mutex
	slices  []combiner.Slice
	entered int // Submit calls begun
	got     chan struct{}
	block   chan struct{}
	changed chan struct{} // closed at the next Submit begun or slice recorded
}

func newCaptureSink() *captureSink { return &captureSink{got: make(chan struct{}, 1024)} }

// Changed returns a channel closed when the next Submit begins or the
// next slice is recorded (waitFor's source).
func (s *captureSink) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *captureSink) signalLocked() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

func (s *captureSink) Submit(ctx context.Context, sl combiner.Slice) error {
	// Keep a copy: Data's memory is the task's again once Done is called.
	sl.Data = bytes.Clone(sl.Data)
	s.mu.Lock()
	s.entered++
	s.signalLocked()
	s.mu.Unlock()
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	s.slices = append(s.slices, sl)
	s.signalLocked()
	s.mu.Unlock()
	s.got <- struct{}{}
	return nil
}

func (s *captureSink) submitsBegun() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entered
}

func (s *captureSink) snapshot() []combiner.Slice {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]combiner.Slice(nil), s.slices...)
}

func openLog(t *testing.T, clk clock.Clock, segBytes int64) *kafkalog.Log {
	t.Helper()
	l, err := kafkalog.Open(t.TempDir(), kafkalog.Config{SegmentBytes: segBytes, Clock: clk, FS: kafkalog.NewMemFS()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendN(t *testing.T, l *kafkalog.Log, epoch int32, batches, recs, size int) {
	t.Helper()
	for i := 0; i < batches; i++ {
		if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(0, 0, recs, size, 1_700_000_000_000), epoch); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor waits until cond holds, re-checking it on each change of srcs
// (feedtest.WaitFor; the wall clock only bounds a hung test). The task
// runs in its own goroutine: after each step it either submits (the sink
// changes) or goes back to waiting (it arms a timer: feedtest.Armed).
func waitFor(t *testing.T, what string, cond func() bool, srcs ...changefeed.Source) {
	t.Helper()
	feedtest.WaitFor(t, what, 10*time.Second, cond, srcs...)
}

// checkCover asserts the slices are contiguous from `from` to the log end and
// that each slice's bytes equal the leader segment's bytes at its position.
func checkCover(t *testing.T, l *kafkalog.Log, slices []combiner.Slice, from int64) {
	t.Helper()
	next := from
	for i, s := range slices {
		if s.BaseOffset != next {
			t.Fatalf("slice %d starts at %d, want %d", i, s.BaseOffset, next)
		}
		want, err := l.ReadSegmentRange(s.SegmentBaseOffset, s.BasePosition, s.EndPosition)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, s.Data) {
			t.Fatalf("slice %d bytes differ from the segment", i)
		}
		var epochs = map[int32]bool{}
		if err := kafkalog.SplitBatches(s.Data, func(h kafkalog.BatchHeader, _ []byte) error {
			epochs[h.PartitionLeaderEpoch] = true
			if h.LastOffset() > s.LastOffset {
				t.Errorf("slice %d batch ends at %d past LastOffset %d", i, h.LastOffset(), s.LastOffset)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// One batch epoch per slice, at most the uploader's epoch, which
		// the slice carries (older for a range an older leader appended).
		if len(epochs) != 1 {
			t.Fatalf("slice %d mixes epochs %v (says %d)", i, epochs, s.LeaderEpoch)
		}
		for e := range epochs {
			if e > s.LeaderEpoch {
				t.Fatalf("slice %d holds batches of epoch %d but says %d", i, e, s.LeaderEpoch)
			}
		}
		next = s.LastOffset + 1
	}
	if next != l.LogEndOffset() {
		t.Fatalf("slices end at %d, log end %d", next, l.LogEndOffset())
	}
}

func TestCutOnSize(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	l := openLog(t, clk, 1<<30)
	sink := newCaptureSink()
	m, err := NewManager(Config{UploadBytes: 8 << 10, Interval: time.Hour, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.StartPartition(tp0, l, 3, 0); err != nil {
		t.Fatal(err)
	}
	// 10 batches of 4 × 1 KiB: every append puts the pending bytes past 8 KiB
	// at least every second batch, so cuts happen without any time passing.
	appendN(t, l, 3, 10, 4, 1024)
	waitFor(t, "size cuts", func() bool {
		ss := sink.snapshot()
		return len(ss) > 0 && ss[len(ss)-1].LastOffset+1 >= 36
	}, sink, feedtest.Armed(clk))
	ss := sink.snapshot()
	for _, s := range ss {
		if len(s.Data) < 8<<10 {
			t.Fatalf("size-cut slice of %d bytes is below the upload size", len(s.Data))
		}
	}
	if m.Metrics().CutsByInterval != 0 {
		t.Fatalf("interval cuts with a stopped clock: %+v", m.Metrics())
	}
	// The tail below the upload size waits for the interval.
	waitFor(t, "interval cut", func() bool {
		ss := sink.snapshot()
		if len(ss) > 0 && ss[len(ss)-1].LastOffset+1 == l.LogEndOffset() {
			return true
		}
		if clk.Pending() > 0 {
			clk.Advance(time.Hour)
		}
		return false
	}, sink, feedtest.Armed(clk))
	checkCover(t, l, sink.snapshot(), 0)
}

func TestCutOnInterval(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	l := openLog(t, clk, 1<<30)
	sink := newCaptureSink()
	m, err := NewManager(Config{UploadBytes: 1 << 20, Interval: 10 * time.Millisecond, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.StartPartition(tp0, l, 1, 0); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 3, 2, 100)
	waitFor(t, "task to arm its timer", func() bool { return clk.Pending() > 0 }, sink, feedtest.Armed(clk))
	clk.Advance(9 * time.Millisecond)
	if n := len(sink.snapshot()); n != 0 {
		t.Fatalf("cut %d slices before the interval", n)
	}
	// The task measures the interval on the clock, so it cannot cut before
	// 10 ms have passed; once they have, it cuts. A timer re-armed just as
	// the clock moves counts from the new time, so keep nudging the clock
	// while the task waits.
	clk.Advance(time.Millisecond)
	waitFor(t, "interval cut", func() bool {
		if len(sink.snapshot()) == 1 {
			return true
		}
		if clk.Pending() > 0 {
			clk.Advance(time.Millisecond)
		}
		return false
	}, sink, feedtest.Armed(clk))
	checkCover(t, l, sink.snapshot(), 0)
	// The task counts the cut and moves its offset after Submit returned:
	// one more append makes it arm its timer again, after both.
	leo := l.LogEndOffset()
	appendN(t, l, 1, 1, 2, 100)
	waitFor(t, "task to arm its timer again", func() bool { return clk.Pending() > 0 }, sink, feedtest.Armed(clk))
	if got := m.Metrics().CutsByInterval; got != 1 {
		t.Fatalf("interval cuts = %d", got)
	}
	off, err := m.SubmittedOffset(tp0)
	if err != nil || off != leo {
		t.Fatalf("submitted offset %d, %v; want %d", off, err, leo)
	}
}

func TestSliceNeverCrossesRollOrEpoch(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	// Small segments so batches roll often.
	l := openLog(t, clk, 6<<10)
	sink := newCaptureSink()
	m, err := NewManager(Config{UploadBytes: 1 << 20, Interval: time.Millisecond, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	appendN(t, l, 1, 5, 2, 1000)
	appendN(t, l, 2, 5, 2, 1000)
	if len(l.Segments()) < 2 {
		t.Fatalf("want several segments, got %d", len(l.Segments()))
	}
	if err := m.StartPartition(tp0, l, 2, 0); err != nil {
		t.Fatal(err)
	}
	// The task cuts one slice per interval: advance a millisecond each
	// time it goes back to waiting, until every byte is cut.
	waitFor(t, "every byte cut", func() bool {
		ss := sink.snapshot()
		if len(ss) > 0 && ss[len(ss)-1].LastOffset+1 == l.LogEndOffset() {
			return true
		}
		if clk.Pending() > 0 {
			clk.Advance(time.Millisecond)
		}
		return false
	}, sink, feedtest.Armed(clk))
	ss := sink.snapshot()
	checkCover(t, l, ss, 0)
	segOf := map[int64]bool{}
	for _, s := range ss {
		if s.LeaderEpoch != 2 {
			t.Fatalf("slice [%d,%d] says epoch %d, want the task's 2", s.BaseOffset, s.LastOffset, s.LeaderEpoch)
		}
		segOf[s.SegmentBaseOffset] = true
		if s.EndPosition-s.BasePosition != int64(len(s.Data)) {
			t.Fatalf("slice positions [%d,%d) but %d bytes", s.BasePosition, s.EndPosition, len(s.Data))
		}
	}
	if len(segOf) != len(l.Segments()) {
		t.Fatalf("slices cover %d segments, log has %d", len(segOf), len(l.Segments()))
	}
}

func TestRefusesLaterEpoch(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	l := openLog(t, clk, 1<<30)
	sink := newCaptureSink()
	m, err := NewManager(Config{UploadBytes: 1, Interval: time.Millisecond, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	appendN(t, l, 5, 1, 1, 10)
	// This task believes it leads at epoch 4: the bytes of epoch 5 are not its own.
	if err := m.StartPartition(tp0, l, 4, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "error", func() bool { return m.Metrics().Errors > 0 }, sink, feedtest.Armed(clk))
	if n := len(sink.snapshot()); n != 0 {
		t.Fatalf("uploaded %d slices of a later epoch", n)
	}
}

func TestBackPressureHoldsTask(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	l := openLog(t, clk, 1<<30)
	sink := newCaptureSink()
	sink.block = make(chan struct{})
	m, err := NewManager(Config{UploadBytes: 1, Interval: time.Millisecond, Clock: clk, ThreadPoolSize: 1}, sink)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 4, 1, 10)
	if err := m.StartPartition(tp0, l, 1, 0); err != nil {
		t.Fatal(err)
	}
	// The task is inside Submit, held by the full sink: nothing may count
	// as submitted until the sink takes it.
	waitFor(t, "the task to submit into the full sink", func() bool { return sink.submitsBegun() > 0 }, sink)
	if off, _ := m.SubmittedOffset(tp0); off != 0 {
		t.Fatalf("submitted offset moved to %d while the sink was full", off)
	}
	close(sink.block)
	// Drained: the sink holds every byte (the submitted offset moves
	// after the sink returns, past the last event to wait on).
	waitFor(t, "drain", func() bool {
		ss := sink.snapshot()
		return len(ss) > 0 && ss[len(ss)-1].LastOffset+1 == l.LogEndOffset()
	}, sink, feedtest.Armed(clk))
	m.StopPartition(tp0)
	if _, err := m.SubmittedOffset(tp0); err == nil {
		t.Fatal("stopped partition still reports")
	}
	checkCover(t, l, sink.snapshot(), 0)
	m.Close()
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{ThreadPoolSize: -1},
		{UploadBytes: -5},
		{UploadBytes: 2 << 20, MaxSliceBytes: 1 << 20},
		{Interval: -time.Second},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("config %d (%+v) accepted", i, c)
		}
	}
	var c Config
	if err := c.Validate(); err != nil || c.ThreadPoolSize == 0 || c.UploadBytes == 0 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}

// failOnceSink gives up the first slice it gets (as the combiner does after
// its upload timeout) and publishes the rest at once.
type failOnceSink struct {
	captureSink
	failed bool
}

func (s *failOnceSink) Submit(ctx context.Context, sl combiner.Slice) error {
	sl.Data = bytes.Clone(sl.Data) // before Done hands the memory back
	s.mu.Lock()
	first := !s.failed
	s.failed = true
	s.mu.Unlock()
	if first {
		sl.Done(combiner.UploadedObject{}, errors.New("upload gave up"))
		return nil
	}
	// Published first, recorded after: a test that sees the slice
	// recorded sees it published.
	sl.Done(combiner.UploadedObject{}, nil)
	return s.captureSink.Submit(ctx, sl)
}

func TestResubmitsGivenUpSlice(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	l := openLog(t, clk, 1<<30)
	sink := &failOnceSink{captureSink: *newCaptureSink()}
	m, err := NewManager(Config{UploadBytes: 1, Interval: time.Millisecond, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.StartPartition(tp0, l, 1, 0); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 1, 3, 10)
	waitFor(t, "resubmit", func() bool { return m.Metrics().Resubmits == 1 && len(sink.snapshot()) == 1 }, sink, feedtest.Armed(clk))
	appendN(t, l, 1, 1, 3, 10)
	waitFor(t, "second slice", func() bool { return len(sink.snapshot()) == 2 }, sink, feedtest.Armed(clk))
	// The re-submitted slice carries exactly the range that was given up.
	checkCover(t, l, sink.snapshot(), 0)
	if p, _ := m.PublishedOffset(tp0); p != l.LogEndOffset() {
		t.Fatalf("published offset %d, want %d", p, l.LogEndOffset())
	}
}

// TestFailedSlicesFoldToLowest: however many slices the combiner gives up
// on, concurrently and in any order, none is dropped from the decision and
// the task re-cuts from the lowest base offset (the old per-task queue of
// 1,024 dropped the rest with an ERROR line).
func TestFailedSlicesFoldToLowest(t *testing.T) {
	tk := &task{failWake: make(chan struct{}, 1), rewind: -1}
	cause := errors.New("put refused")
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 5000; i > 0; i-- {
				tk.foldFailed(failedSlice{base: int64(i*4 + g + 100), err: cause})
			}
		}(g)
	}
	tk.foldFailed(failedSlice{base: 7, err: combiner.ErrClosed}) // a closing combiner is not a failure
	wg.Wait()
	select {
	case <-tk.failWake:
	default:
		t.Fatal("no wake-up after failures")
	}
	tk.takeFailed(context.Background())
	if tk.rewind != 104 || !errors.Is(tk.rewindCause, cause) {
		t.Fatalf("rewind %d (cause %v), want 104 (%v)", tk.rewind, tk.rewindCause, cause)
	}
	tk.takeFailed(context.Background()) // nothing new: unchanged
	if tk.rewind != 104 {
		t.Fatalf("rewind moved to %d with nothing folded", tk.rewind)
	}
}

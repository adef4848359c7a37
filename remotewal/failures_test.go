package remotewal

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/internal/changefeed"
)

// heldSink keeps every submitted slice until the test completes it, so
// the test chooses the order (and the outcome) of the combiner's reports.
type heldSink struct {
	changefeed.Feed // signalled after each Submit and each complete
	mu              sync.Mutex
	held            []combiner.Slice
	all             []combiner.Slice
}

func (s *heldSink) Submit(_ context.Context, sl combiner.Slice) error {
	defer s.Signal()
	sl.Data = bytes.Clone(sl.Data) // the task reuses the memory after Done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = append(s.held, sl)
	s.all = append(s.all, sl)
	return nil
}

func (s *heldSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// complete reports the held slices, in the order given by order (indices
// into what is held), with err(i) as the outcome of the i-th, and forgets
// them.
func (s *heldSink) complete(order []int, err func(sl combiner.Slice) error) {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	for _, i := range order {
		sl := held[i]
		sl.Done(combiner.UploadedObject{}, err(sl))
	}
	s.Signal()
}

// TestReorderedAndRepeatedFailureReports: the combiner reports given-up
// slices in any order, later ones before earlier ones, and the same range
// may be given up again after its re-submission. The task waits until none
// of its slices is held, re-cuts from the lowest given-up base offset only
// (a slice published after it is cut again rather than leaving a gap),
// and ends with contiguous slices up to the log end and its published
// offset there.
func TestReorderedAndRepeatedFailureReports(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	l := openLog(t, clk, 1<<30)
	sink := &heldSink{}
	m, err := NewManager(Config{UploadBytes: 1, MaxSliceBytes: 1, Interval: time.Millisecond, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.StartPartition(tp0, l, 1, 0); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 4, 2, 10) // four batches, one slice each: [0,1] [2,3] [4,5] [6,7]
	waitFor(t, "four slices", func() bool { return sink.count() == 4 }, sink)
	boom := func(base int64) func(combiner.Slice) error {
		return func(sl combiner.Slice) error {
			if sl.BaseOffset >= base {
				return fmt.Errorf("given up at %d", sl.BaseOffset)
			}
			return nil
		}
	}
	// [4,5] and [6,7] given up, reported last first, with [2,3] published
	// between them; [0,1] published last.
	sink.complete([]int{3, 1, 2, 0}, boom(4))
	waitFor(t, "the re-cut from 4", func() bool { return sink.count() == 2 }, sink)
	if p, _ := m.PublishedOffset(tp0); p != 4 {
		t.Fatalf("published offset %d, want 4", p)
	}
	// The same range given up again, reported in order this time.
	sink.complete([]int{0, 1}, boom(0))
	waitFor(t, "the second re-cut from 4", func() bool { return sink.count() == 2 }, sink)
	sink.complete([]int{1, 0}, boom(1<<40))
	waitFor(t, "published to the log end", func() bool { p, _ := m.PublishedOffset(tp0); return p == 8 }, sink)
	if m.Metrics().Resubmits != 2 {
		t.Errorf("resubmits %d, want 2", m.Metrics().Resubmits)
	}
	sink.mu.Lock()
	all := sink.all
	sink.mu.Unlock()
	var got []string
	for _, sl := range all {
		got = append(got, fmt.Sprintf("[%d,%d]", sl.BaseOffset, sl.LastOffset))
	}
	if w := "[[0,1] [2,3] [4,5] [6,7] [4,5] [6,7] [4,5] [6,7]]"; fmt.Sprint(got) != w {
		t.Fatalf("submitted %v, want %s", got, w)
	}
	checkCover(t, l, all[6:], 4)
}

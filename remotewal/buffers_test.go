package remotewal

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/internal/changefeed"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// aliasSink holds every slice with Data as the task handed it (no copy),
// and what Data held at Submit.
type aliasSink struct {
	changefeed.Feed
	mu   sync.Mutex
	held []combiner.Slice
	want [][]byte
}

func (s *aliasSink) Submit(_ context.Context, sl combiner.Slice) error {
	defer s.Signal()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = append(s.held, sl)
	s.want = append(s.want, bytes.Clone(sl.Data))
	return nil
}

func (s *aliasSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// intact fails t for any slice not yet done whose Data no longer holds
// what it held at Submit.
func (s *aliasSink) intact(t *testing.T, done int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := done; i < len(s.held); i++ {
		if !bytes.Equal(s.held[i].Data, s.want[i]) {
			t.Fatalf("slice [%d,%d] changed before its Done: its memory was handed to another slice",
				s.held[i].BaseOffset, s.held[i].LastOffset)
		}
	}
}

// A slice's memory is the sink's until Done: while slices are held, each
// keeps its own bytes however many more are cut (the task reads slices
// into pooled buffers and takes one back only at Done); slices cut after
// some were done, possibly into their memory, leave the held ones alone.
func TestSliceMemoryIsTheSinksUntilDone(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	l := openLog(t, clk, 1<<30)
	sink := &aliasSink{}
	// Slices of one batch each, read into the task's buffers (a batch
	// longer than MaxSliceBytes would go whole, in memory of its own).
	one := len(kafkalogtest.MakeBatchN(0, 0, 2, 100, 1_700_000_000_000))
	m, err := NewManager(Config{UploadBytes: 1, MaxSliceBytes: one, Interval: time.Millisecond, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.StartPartition(tp0, l, 1, 0); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 8, 2, 100) // eight batches, one slice each
	waitFor(t, "eight slices", func() bool { return sink.count() == 8 }, sink)
	sink.intact(t, 0)
	// Done for the first four: their memory goes back to be reused.
	sink.mu.Lock()
	for _, sl := range sink.held[:4] {
		sl.Done(combiner.UploadedObject{}, nil)
	}
	sink.mu.Unlock()
	appendN(t, l, 1, 8, 2, 100)
	waitFor(t, "sixteen slices", func() bool { return sink.count() == 16 }, sink)
	sink.intact(t, 4)
	sink.mu.Lock()
	all := append([]combiner.Slice(nil), sink.held...)
	for i := range all {
		all[i].Data = sink.want[i]
	}
	sink.mu.Unlock()
	checkCover(t, l, all, 0)
}

package kafkalog

import (
	"errors"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// The log start moves inside a segment (DeleteRecords): reads below it are
// out of range, segments wholly below it are deleted, it survives a
// reopen, it never moves back or past the high watermark, and a full
// truncation resets it.
func TestIncrementLogStartOffset(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 1024}
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 60 {
		if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(l.LogEndOffset(), 0, 2, 40, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetHighWatermark(100); err != nil {
		t.Fatal(err)
	}
	segs := len(l.Segments())
	if _, err := l.IncrementLogStartOffset(101); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past the high watermark: %v", err)
	}
	moved, err := l.IncrementLogStartOffset(51)
	if err != nil || !moved || l.LogStartOffset() != 51 {
		t.Fatalf("moved %v err %v start %d", moved, err, l.LogStartOffset())
	}
	if len(l.Segments()) >= segs || l.Segments()[0].BaseOffset > 51 {
		t.Fatalf("segments after the move: %+v (had %d)", l.Segments(), segs)
	}
	if _, err := l.Read(50, 1<<20); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	if _, err := l.Read(51, 1<<20); err != nil {
		t.Fatalf("read at the log start: %v", err)
	}
	if moved, err := l.IncrementLogStartOffset(40); moved || err != nil {
		t.Fatalf("moving back: %v %v", moved, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(dir, cfg); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 51 || l.LogEndOffset() != 120 {
		t.Fatalf("reopened: start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	if err := l.TruncateFullyAndStartAt(200); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 200 {
		t.Fatalf("after a full truncation: start %d", l.LogStartOffset())
	}
	l.Close()
}

package kafkalog

import (
	"errors"
	"math"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// Retune changes an open log: a smaller segment.bytes rolls at the next
// append, max.message.bytes refuses a larger batch, an invalid value is
// refused and changes nothing, and turning compaction on lets a follower
// take a compacted leader's gapped batches.
func TestRetune(t *testing.T) {
	l, err := Open(t.TempDir(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(0, 0, 1, 100, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Retune(Tunables{SegmentBytes: math.MaxInt64}); err == nil {
		t.Fatal("segment.bytes above MaxInt32 accepted")
	}
	if err := l.Retune(Tunables{SegmentBytes: 200, MaxBatchBytes: 500}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(1, 0, 1, 100, 1), 0); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("%d segments after lowering segment.bytes, want a roll", n)
	}
	if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(2, 0, 1, 600, 1), 0); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("batch over max.message.bytes: %v", err)
	}

	f, err := Open(t.TempDir(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gapped := kafkalogtest.MakeBatchN(5, 0, 1, 10, 1) // offsets 0-4 were compacted away
	if _, err := f.AppendAsFollower(gapped); err == nil {
		t.Fatal("a gap accepted by a follower of a topic that is not compacted")
	}
	if err := f.Retune(Tunables{Compacted: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AppendAsFollower(gapped); err != nil {
		t.Fatalf("a compacted leader's gapped batch after compaction was turned on: %v", err)
	}
}

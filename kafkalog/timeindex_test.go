package kafkalog

import (
	"math/rand/v2"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// Property: for any target, TimestampSearchStart never skips a batch whose
// max timestamp reaches the target (every batch before the start is below
// it), is found exactly when some batch reaches it, and answers the same
// after the log is reopened (the index is rebuilt by the scan) and after a
// truncation. Timestamps go up and down, as producers' clocks do.
func TestTimestampSearchStart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 256}
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	type batch struct{ base, last, maxTS int64 }
	var batches []batch
	ts := int64(1_000_000)
	for i := 0; i < 400; i++ {
		ts += rng.Int64N(200) - 50
		n := 1 + rng.IntN(4)
		b := kafkalogtest.MakeBatchN(l.LogEndOffset(), 0, n, 20, ts)
		info, err := l.AppendAsLeader(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, batch{info.FirstOffset, info.LastOffset, ts})
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, got %d", len(l.Segments()))
	}
	check := func(l *Log, batches []batch, what string) {
		t.Helper()
		for _, target := range []int64{0, 1_000_000, ts, ts + 1, batches[len(batches)/2].maxTS, batches[len(batches)-1].maxTS} {
			for k := 0; k < 50; k++ {
				if k > 0 {
					target = 1_000_000 + rng.Int64N(ts-1_000_000+100)
				}
				start, ok := l.TimestampSearchStart(target)
				first := -1
				for i, b := range batches {
					if b.maxTS >= target {
						first = i
						break
					}
				}
				if ok != (first >= 0) {
					t.Fatalf("%s: target %d: found %v, a batch reaches it: %v", what, target, ok, first >= 0)
				}
				if ok && start > batches[first].base {
					t.Fatalf("%s: target %d: search starts at %d, past batch [%d,%d] with max %d", what, target, start, batches[first].base, batches[first].last, batches[first].maxTS)
				}
			}
		}
	}
	check(l, batches, "written")
	// The index prunes: the search for the largest timestamp starts in the
	// segment where it was first reached, at an entry, not at the log start.
	top, firstTop := int64(-1), 0
	for i, b := range batches {
		if b.maxTS > top {
			top, firstTop = b.maxTS, i
		}
	}
	if start, _ := l.TimestampSearchStart(top); firstTop > 100 && start < batches[firstTop/2].base {
		t.Fatalf("search for %d (first at batch %d, offset %d) starts at %d", top, firstTop, batches[firstTop].base, start)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	check(l, batches, "reopened")
	cut := batches[300].base
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	check(l, batches[:300], "truncated")
	// Sparse: far fewer entries than batches.
	l.mu.RLock()
	entries := 0
	for _, s := range l.mu.segs {
		entries += len(s.timeIndex)
	}
	l.mu.RUnlock()
	if entries == 0 || entries >= 300 {
		t.Fatalf("%d time-index entries for 300 batches", entries)
	}
}

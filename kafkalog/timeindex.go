package kafkalog

import "sort"

// The time index (Kafka's .timeindex, kept in memory): per segment, sparse
// entries of (the largest batch max timestamp so far in the segment, the
// last offset of the batch where it was reached), one at most every
// IndexIntervalBytes and only when the maximum grew. It is rebuilt by the
// scan that opens a segment (and by truncation and compaction, which
// rescan), so it is never stale and needs no file. With the segments' own
// max timestamps it says where a search for a timestamp starts: nothing
// before it can reach the target.

type timeEntry struct {
	ts     int64 // largest max timestamp up to and including offset's batch
	offset int64 // last offset of that batch
}

// addTimeEntry appends an entry after a batch of size bytes when interval
// bytes have passed since the last one and the maximum grew.
func addTimeEntry(tix []timeEntry, since, size, interval int, maxTS, lastOffset int64) ([]timeEntry, int) {
	since += size
	if since <= interval {
		return tix, since
	}
	if n := len(tix); n > 0 && tix[n-1].ts >= maxTS {
		return tix, since
	}
	return append(tix, timeEntry{ts: maxTS, offset: lastOffset}), 0
}

// TimestampSearchStart returns the offset from which a search for the
// first record with timestamp >= target must scan: every batch before it
// has a max timestamp below target. ok is false when no segment reaches
// target (nothing to find).
func (l *Log) TimestampSearchStart(target int64) (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.mu.segs {
		if s.maxTimestamp < target {
			continue
		}
		start := s.base
		// The last entry below target: its batch and all before it are
		// below target.
		i := sort.Search(len(s.timeIndex), func(i int) bool { return s.timeIndex[i].ts >= target })
		if i > 0 {
			start = s.timeIndex[i-1].offset + 1
		}
		return max(start, l.logStartOffset()), true
	}
	return 0, false
}

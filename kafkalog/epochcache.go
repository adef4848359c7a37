package kafkalog

// EpochEntry is one line of the leader-epoch cache: the first offset
// written under a leader epoch.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// UndefinedEpoch and UndefinedEpochOffset are Kafka's -1 answers of
// EndOffsetForEpoch.
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// epochCache is the pure logic of Kafka's LeaderEpochFileCache: entries
// strictly increasing in both epoch and start offset. No I/O, no locking;
// the Log guards it and persists it.
type epochCache struct {
	entries []EpochEntry
}

func (c *epochCache) latest() (EpochEntry, bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign records that epoch starts at offset. It reports whether the cache
// changed. Like Kafka, entries at or after offset with other epochs are
// dropped first; callers reject epochs below the latest beforehand.
func (c *epochCache) assign(epoch int32, offset int64) bool {
	if l, ok := c.latest(); ok && l.Epoch == epoch {
		return false
	}
	keep := c.entries[:0]
	for _, e := range c.entries {
		if e.Epoch < epoch && e.StartOffset < offset {
			keep = append(keep, e)
		}
	}
	c.entries = append(keep, EpochEntry{Epoch: epoch, StartOffset: offset})
	return true
}

// truncateFromEnd drops entries starting at or after end (log truncated to end).
func (c *epochCache) truncateFromEnd(end int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart drops entries wholly before start; the last entry
// beginning before start is moved up to start (log start advanced).
func (c *epochCache) truncateFromStart(start int64) bool {
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= start {
		i++
	}
	if i == 0 {
		return false
	}
	last := c.entries[i-1]
	if i == 1 && last.StartOffset == start {
		return false
	}
	last.StartOffset = start
	rest := append([]EpochEntry{last}, c.entries[i:]...)
	c.entries = rest
	return true
}

// endOffsetFor is Kafka's LeaderEpochFileCache.endOffsetFor: the largest
// epoch <= requested and the start offset of the first epoch above it, or
// leo if requested is the latest epoch; (-1, -1) if requested is -1 or
// above the latest epoch.
func (c *epochCache) endOffsetFor(requested int32, leo int64) (int32, int64) {
	if requested == UndefinedEpoch {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if l, ok := c.latest(); ok && l.Epoch == requested {
		return requested, leo
	}
	hi := -1
	for i, e := range c.entries {
		if e.Epoch > requested {
			hi = i
			break
		}
	}
	if hi < 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if hi == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

func (c *epochCache) snapshot() []EpochEntry {
	return append([]EpochEntry(nil), c.entries...)
}

package follower

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	"github.com/kwal/kwal/metadata"
)

// Located is one slice the metadata says is stored: the object key it
// lives in and its footer entry.
type Located struct {
	Key   string
	Entry metadata.SliceEntry
}

// Read is one ranged GET the planner asks for: [Off, Off+Len) of Key, which
// covers every slice in Slices (in position order).
type Read struct {
	Key    string
	Off    int64
	Len    int64
	Slices []Located
}

// PlanConfig bounds the reads a plan asks for.
type PlanConfig struct {
	// MaxRangeBytes caps one GET; a single slice larger than that is still
	// read whole (it cannot be split and verified).
	MaxRangeBytes int64
	// MergeGapBytes: two slices of the same object are read with one GET
	// when the bytes between them are at most this many (slices of other
	// partitions the follower does not need). 0 merges only adjacent ones.
	MergeGapBytes int64
	// MaxReads caps the number of reads returned (the GETs that may be in
	// flight); 0 means no cap.
	MaxReads int
}

// Plan turns pending slices into ranged GETs. It is pure: the caller owns
// the I/O. For each partition it takes the chain of slices that continues
// its log end offset without a gap (a slice that starts below the log end
// but ends above it is taken too; the applier skips the batches it already
// has). Anything past the first gap is held back: it will be planned once
// the gap is filled, so a gap is never skipped.
//
// logEnd gives each partition's next needed offset; pending holds, per
// partition, the FINISHED slices the metadata knows, in any order.
func Plan(logEnd map[metadata.TopicPartition]int64, pending map[metadata.TopicPartition][]Located, cfg PlanConfig) []Read {
	chains := make(map[metadata.TopicPartition][]Located, len(pending))
	for tp, ls := range pending {
		need, ok := logEnd[tp]
		if !ok {
			continue
		}
		chains[tp] = Chain(need, ls)
	}
	return PlanChains(chains, cfg)
}

// PlanChains groups slices that are already chosen (per partition, in the
// order they are needed) into ranged GETs: slices of one object are sorted
// by position and merged while the gap between them is at most
// MergeGapBytes and the range stays within MaxRangeBytes. Objects are read
// in the order their first slice is needed, partitions taken in name order.
func PlanChains(chains map[metadata.TopicPartition][]Located, cfg PlanConfig) []Read {
	return planChains(chains, cfg, &planScratch{})
}

// planScratch is PlanChains' working memory, which the driver keeps from
// one step to the next. The reads returned are valid until the next
// call; each one's Slices is the caller's until it gives it back
// (giveSlices), which the driver does once the read is done.
type planScratch struct {
	tps   []metadata.TopicPartition
	objs  []planObject
	reads []Read
	free  [][]Located // Slices given back, for the next reads
}

// takeSlices returns an empty []Located, reusing one given back.
func (sc *planScratch) takeSlices() []Located {
	if n := len(sc.free); n > 0 {
		ls := sc.free[n-1]
		sc.free[n-1] = nil
		sc.free = sc.free[:n-1]
		return ls
	}
	return make([]Located, 0, 4)
}

// giveSlices takes back a read's Slices: the caller keeps no reference
// to it. At most a few dozen are kept.
func (sc *planScratch) giveSlices(ls []Located) {
	if cap(ls) == 0 || len(sc.free) >= 64 {
		return
	}
	clear(ls)
	sc.free = append(sc.free, ls[:0])
}

type planObject struct {
	key string
	ls  []Located
}

func planChains(chains map[metadata.TopicPartition][]Located, cfg PlanConfig, sc *planScratch) []Read {
	tps := sc.tps[:0]
	for tp := range chains {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b metadata.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	// Objects in the order their first slice is needed, so the reads that
	// unblock the lowest offsets of a partition come first. Each object
	// gives at least one read, so with MaxReads only the first MaxReads
	// objects can make the reads returned.
	objs := sc.objs[:0]
	var index map[string]int // once there are too many objects to search
	find := func(key string) (int, bool) {
		if index != nil {
			i, ok := index[key]
			return i, ok
		}
		for i := range objs {
			if objs[i].key == key {
				return i, true
			}
		}
		return 0, false
	}
	for _, tp := range tps {
		for _, l := range chains[tp] {
			i, seen := find(l.Key)
			if !seen {
				if cfg.MaxReads > 0 && len(objs) == cfg.MaxReads {
					continue
				}
				i = len(objs)
				if i < cap(objs) {
					objs = objs[:i+1]
					objs[i].key, objs[i].ls = l.Key, objs[i].ls[:0]
				} else {
					objs = append(objs, planObject{key: l.Key})
				}
				switch {
				case index != nil:
					index[l.Key] = i
				case len(objs) > 16:
					index = make(map[string]int, 2*len(objs))
					for j, o := range objs {
						index[o.key] = j
					}
				}
			}
			objs[i].ls = append(objs[i].ls, l)
		}
	}

	clear(sc.reads)
	reads := sc.reads[:0]
objects:
	for _, o := range objs {
		ls := o.ls
		// A partition's slices of one object are mostly in position
		// order already (the combiner packs them as they come).
		if !slices.IsSortedFunc(ls, byPosition) {
			slices.SortStableFunc(ls, byPosition)
		}
		var cur *Read
		for _, l := range ls {
			start, end := l.Entry.Position, l.Entry.Position+l.Entry.Length
			if cur != nil {
				curEnd := cur.Off + cur.Len
				gap := start - curEnd
				if gap >= 0 && gap <= cfg.MergeGapBytes && (cfg.MaxRangeBytes <= 0 || end-cur.Off <= cfg.MaxRangeBytes) {
					cur.Len = end - cur.Off
					cur.Slices = append(cur.Slices, l)
					continue
				}
			}
			if cfg.MaxReads > 0 && len(reads) == cfg.MaxReads {
				break objects // the reads returned are complete: no more is returned
			}
			reads = append(reads, Read{Key: o.key, Off: start, Len: end - start, Slices: append(sc.takeSlices(), l)})
			cur = &reads[len(reads)-1]
		}
		if cfg.MaxReads > 0 && len(reads) >= cfg.MaxReads {
			break
		}
	}
	if cfg.MaxReads > 0 && len(reads) > cfg.MaxReads {
		for _, r := range reads[cfg.MaxReads:] {
			sc.giveSlices(r.Slices)
		}
		reads = reads[:cfg.MaxReads]
	}
	sc.reads = reads
	// Keep the capacity, not the slices and keys.
	for i := range objs {
		clear(objs[i].ls)
		objs[i].key = ""
	}
	clear(tps)
	sc.tps, sc.objs = tps[:0], objs[:0]
	return reads
}

func byPosition(a, b Located) int { return cmp.Compare(a.Entry.Position, b.Entry.Position) }

// firstObjects appends to chain the slices of ls (one partition's slices
// to read, in offset order) whose object is among the first limit objects
// in PlanChains' order. keys are the objects chosen so far, in that order,
// from the partitions PlanChains takes before this one; it is returned
// with the objects ls added. Each object gives at least one read, so
// PlanChains with MaxReads limit returns the same reads for the slices so
// chosen as for all of them, without the driver copying and grouping
// slices that cannot be read yet.
func firstObjects(keys []string, limit int, ls []*slot, chain []Located) ([]string, []Located) {
	for _, s := range ls {
		// Consecutive slices of a chain are mostly in one object.
		if n := len(keys); (n == 0 || keys[n-1] != s.Key) && !slices.Contains(keys, s.Key) {
			if len(keys) >= limit {
				continue
			}
			keys = append(keys, s.Key)
		}
		chain = append(chain, s.Located)
	}
	return keys, chain
}

// Chain returns, in offset order, the slices that continue a log whose end
// offset is need, stopping at the first gap. Duplicates (the same offsets
// stored twice, e.g. after a retried publish) are taken once.
func Chain(need int64, slices []Located) []Located {
	s := append([]Located(nil), slices...)
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].Entry.BaseOffset != s[j].Entry.BaseOffset {
			return s[i].Entry.BaseOffset < s[j].Entry.BaseOffset
		}
		return s[i].Entry.LastOffset > s[j].Entry.LastOffset
	})
	var out []Located
	for _, l := range s {
		e := l.Entry
		if e.LastOffset < need {
			continue // already in the log
		}
		if e.BaseOffset > need {
			break // a gap: hold everything above it
		}
		out = append(out, l)
		need = e.LastOffset + 1
	}
	return out
}

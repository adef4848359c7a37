package follower

import (
	"sort"

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
	byKey := make(map[string][]Located)
	// firstNeed orders objects so the reads that unblock the lowest
	// offsets of a partition come first.
	firstNeed := make(map[string]int)
	order := 0
	tps := make([]metadata.TopicPartition, 0, len(chains))
	for tp := range chains {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	for _, tp := range tps {
		for _, l := range chains[tp] {
			if _, seen := firstNeed[l.Key]; !seen {
				firstNeed[l.Key] = order
				order++
			}
			byKey[l.Key] = append(byKey[l.Key], l)
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return firstNeed[keys[i]] < firstNeed[keys[j]] })

	var reads []Read
	for _, k := range keys {
		ls := byKey[k]
		sort.Slice(ls, func(i, j int) bool { return ls[i].Entry.Position < ls[j].Entry.Position })
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
			reads = append(reads, Read{Key: k, Off: start, Len: end - start, Slices: []Located{l}})
			cur = &reads[len(reads)-1]
		}
	}
	if cfg.MaxReads > 0 && len(reads) > cfg.MaxReads {
		reads = reads[:cfg.MaxReads]
	}
	return reads
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

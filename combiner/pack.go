package combiner

import (
	"time"

	"github.com/kwal/kwal/combiner/objformat"
)

// Queued is what the packing policy knows about one queued slice.
type Queued struct {
	// Size is the bytes the slice adds to an object: its data plus its
	// footer entry (objformat.EntrySize).
	Size int64
	// AppendedAt is when the slice's oldest byte was appended on the leader.
	AppendedAt time.Time
}

// Policy is the packing policy's configuration.
type Policy struct {
	UploadBytes    int64         // cut once an object would hold this many bytes
	MaxObjectBytes int64         // never exceed, except for one oversized slice
	Interval       time.Duration // cut once the oldest queued slice is this old
}

// Plan is Pack's decision.
type Plan struct {
	// Cuts are the sizes, in slices, of the objects to cut now: the first
	// Cuts[0] queued slices form one object, the next Cuts[1] the next, and
	// so on. Objects are always runs from the head of the queue, so the
	// queue's order (and with it each partition's offset order) is kept
	// within and across objects.
	Cuts []int
	// Wait is how long until the oldest slice left queued reaches Interval;
	// 0 when nothing is left queued.
	Wait time.Duration
}

// Pack decides which objects to cut from queue (in submission order) at
// now. It is a pure function.
//
// Greedily, from the head: slices join the current object while it stays
// within MaxObjectBytes (a slice bigger than that goes alone); the object is
// cut once it holds UploadBytes. What remains is cut as one last object
// (split at MaxObjectBytes) if its oldest slice is Interval old, or if
// flush is set.
func Pack(queue []Queued, now time.Time, p Policy, flush bool) Plan {
	var plan Plan
	base := int64(objformat.Overhead(0))
	start, size := 0, base
	for i, q := range queue {
		if i > start && size+q.Size > p.MaxObjectBytes {
			plan.Cuts = append(plan.Cuts, i-start)
			start, size = i, base
		}
		size += q.Size
		if size >= p.UploadBytes {
			plan.Cuts = append(plan.Cuts, i+1-start)
			start, size = i+1, base
		}
	}
	rest := queue[start:]
	if len(rest) == 0 {
		return plan
	}
	oldest := rest[0].AppendedAt
	for _, q := range rest[1:] {
		if q.AppendedAt.Before(oldest) {
			oldest = q.AppendedAt
		}
	}
	age := now.Sub(oldest)
	if flush || age >= p.Interval {
		// Everything left fits one object: the loop above cut at
		// MaxObjectBytes already.
		plan.Cuts = append(plan.Cuts, len(rest))
		return plan
	}
	plan.Wait = p.Interval - age
	return plan
}

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
	start, open := 0, emptyObject
	for i, q := range queue {
		var before, after bool
		before, after, open = p.place(open, q.Size)
		if before {
			plan.Cuts = append(plan.Cuts, i-start)
			start = i
		}
		if after {
			plan.Cuts = append(plan.Cuts, i+1-start)
			start = i + 1
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

// emptyObject is the size of an object before any slice joins it.
const emptyObject = int64(objformat.FixedOverhead)

// place is one step of Pack's greedy walk: a slice of size joins the open
// object, which holds open bytes (emptyObject when it has no slice yet).
// closedBefore: the open object was cut before the slice, which starts the
// next one; closedAfter: the object is cut with the slice as its last.
// next is the open object's size afterwards. Pure; Combiner.Submit runs the
// same steps as slices arrive, so it knows where Pack's objects begin.
func (p Policy) place(open, size int64) (closedBefore, closedAfter bool, next int64) {
	if open > emptyObject && open+size > p.MaxObjectBytes {
		closedBefore, open = true, emptyObject
	}
	open += size
	if open >= p.UploadBytes {
		return closedBefore, true, emptyObject
	}
	return closedBefore, false, open
}

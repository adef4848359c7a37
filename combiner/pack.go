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

// Pending is what the packing policy knows of bytes that remote-WAL tasks
// hold back from the queue until the combiner asks for them
// (Combiner.Announce): a partition below UploadBytes keeps its bytes in
// its log, not in a slice, until an object is about to be cut, so each
// partition gives an object one slice and no task needs a timer.
type Pending struct {
	// Announced tasks hold bytes they have not been asked for.
	Announced int
	// Oldest is when the oldest of those bytes was appended (at most as
	// old as the oldest; a withdrawn announcement may leave it older).
	Oldest time.Time
	// Called tasks were asked for their bytes and have not answered yet;
	// CalledFor is how long ago they were asked. They are waited for at
	// most Interval/2: then the queue is cut without the late ones, whose
	// slices go in the next object.
	Called    int
	CalledFor time.Duration
	// Lead is how long called tasks take to answer (the combiner measures
	// it): they are called that much before the interval is up, so that
	// the object goes out about when it is due. At most Interval/2.
	Lead time.Duration
}

// Plan is Pack's decision.
type Plan struct {
	// Cuts are the sizes, in slices, of the objects to cut now: the first
	// Cuts[0] queued slices form one object, the next Cuts[1] the next, and
	// so on. Objects are always runs from the head of the queue, so the
	// queue's order (and with it each partition's offset order) is kept
	// within and across objects.
	Cuts []int
	// Call asks the Announced tasks for their bytes now: the open object's
	// interval is up. What is left queued is cut once every called task
	// has answered (the next Pack with Called == 0), in one object with
	// their slices.
	Call bool
	// Wait is how long until the oldest slice left queued, or the oldest
	// announced byte, reaches Interval; 0 when there is nothing to wait
	// for on a timer (nothing left, or called tasks to wait for).
	Wait time.Duration
}

// Pack decides which objects to cut from queue (in submission order) at
// now, with nothing announced. It is a pure function.
func Pack(queue []Queued, now time.Time, p Policy, flush bool) Plan {
	return PackWith(queue, Pending{}, now, p, flush)
}

// PackWith decides which objects to cut from queue (in submission order)
// at now, and whether to call the announced tasks. It is a pure function.
//
// Greedily, from the head: slices join the current object while it stays
// within MaxObjectBytes (a slice bigger than that goes alone); the object is
// cut once it holds UploadBytes. What remains is cut as one last object
// (split at MaxObjectBytes) if flush is set, or once its oldest byte,
// queued or announced, is Interval old: then, if any task announced bytes,
// those tasks are called first (Lead early) and the rest waits for their
// answers (Called > 0), so each goes out in this object with one slice.
func PackWith(queue []Queued, pend Pending, now time.Time, p Policy, flush bool) Plan {
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
	if flush {
		// Everything left fits one object: the loop above cut at
		// MaxObjectBytes already.
		if len(rest) > 0 {
			plan.Cuts = append(plan.Cuts, len(rest))
		}
		return plan
	}
	if pend.Called > 0 {
		if left := p.Interval/2 - pend.CalledFor; left > 0 {
			plan.Wait = left
			return plan
		}
	}
	if len(rest) == 0 && pend.Announced == 0 {
		return plan
	}
	// The interval of the open object runs from its oldest byte, queued
	// or announced.
	var oldest time.Time
	if pend.Announced > 0 {
		oldest = pend.Oldest
	}
	for _, q := range rest {
		if oldest.IsZero() || q.AppendedAt.Before(oldest) {
			oldest = q.AppendedAt
		}
	}
	age := now.Sub(oldest)
	due := p.Interval
	if pend.Announced > 0 {
		due -= min(max(pend.Lead, 0), p.Interval/2)
	}
	switch {
	case age < due:
		plan.Wait = due - age
	case pend.Announced > 0:
		// About to cut for the interval: every announced task gives its
		// bytes to this object first.
		plan.Call = true
	default:
		plan.Cuts = append(plan.Cuts, len(rest))
	}
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

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
	UploadBytes    int64 // cut once an object would hold this many bytes
	MaxObjectBytes int64 // never exceed, except for one oversized slice
	// Interval spaces the objects not cut for size: they go at most one
	// per Interval over time, with one more allowed early after a quiet
	// spell (a budget of two, Pending.Next), and each as soon as its
	// oldest byte exists and the budget allows. Under steady traffic
	// objects go every Interval and a byte waits Interval/2 on average;
	// a batch after a quiet spell goes at once, and a producer that
	// sends about once per Interval is not made to wait for a fixed
	// phase. 0 cuts at once.
	Interval time.Duration
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
	// Last is when the last object not cut for size was cut, or the
	// tasks were called for it (Plan.Mark); Next is the budget: the next
	// such object may go from Next - Interval on. After a mark at now,
	// Next becomes max(Next, now) + Interval (Policy.Marked). The
	// combiner starts them at its start and start + 2·Interval, so its
	// first such object goes no sooner than Interval after it. Last
	// zero: everything is due at once.
	Last, Next time.Time
}

// Plan is Pack's decision.
type Plan struct {
	// Cuts are the sizes, in slices, of the objects to cut now: the first
	// Cuts[0] queued slices form one object, the next Cuts[1] the next, and
	// so on. Objects are always runs from the head of the queue, so the
	// queue's order (and with it each partition's offset order) is kept
	// within and across objects.
	Cuts []int
	// Call asks the Announced tasks for their bytes now: they are due.
	// What is left queued is cut once every called task has answered (the
	// next Pack with Called == 0), in one object with their slices.
	Call bool
	// Wait is how long until what is left queued or announced is due, or
	// until called tasks are no longer waited for; 0 when there is nothing
	// to wait for on a timer.
	Wait time.Duration
	// Mark: this plan calls the tasks, or cuts an object for the
	// interval; the caller passes Policy.Marked's Last and Next from here
	// on. A cut of bytes older than Last (answers to the last call, or
	// late ones) belongs to the last mark and makes none.
	Mark bool
}

// Pack decides which objects to cut from queue (in submission order) at
// now, with nothing announced and no paced object before (so what is not
// cut for size is due at once). It is a pure function.
func Pack(queue []Queued, now time.Time, p Policy, flush bool) Plan {
	return PackWith(queue, Pending{}, now, p, flush)
}

// PackWith decides which objects to cut from queue (in submission order)
// at now, and whether to call the announced tasks. It is a pure function.
//
// Greedily, from the head: slices join the current object while it stays
// within MaxObjectBytes (a slice bigger than that goes alone); the object is
// cut once it holds UploadBytes. What remains is cut as one last object
// (split at MaxObjectBytes) if flush is set, or once it is due (Policy.
// Interval). Announced bytes are called when due, and what is queued then
// waits for the answers (Called > 0), so each task's bytes go out in this
// object with one slice.
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
	// What is left is due when the budget allows (Next - Interval), or
	// at its oldest byte if that is later; bytes older than Last missed
	// the last object (late answers) and are due at once. Queued slices
	// are cut when due; announced bytes are called when due, and what is
	// queued then waits for the answers. Bytes announced after the call
	// are not called into its object (calling them too would chain answer
	// rounds, each adding to the queue's wait).
	var queueDue, annDue, queueOldest time.Time
	if len(rest) > 0 {
		queueOldest = rest[0].AppendedAt
		for _, q := range rest[1:] {
			if q.AppendedAt.Before(queueOldest) {
				queueOldest = q.AppendedAt
			}
		}
		queueDue = p.due(queueOldest, pend)
	}
	if pend.Announced > 0 {
		annDue = p.due(pend.Oldest, pend)
	}
	switch {
	case !annDue.IsZero() && !now.Before(annDue):
		// Every announced task gives its bytes to this object first.
		plan.Call, plan.Mark = true, true
	case !queueDue.IsZero() && !now.Before(queueDue):
		plan.Cuts = append(plan.Cuts, len(rest))
		plan.Mark = pend.Last.IsZero() || !queueOldest.Before(pend.Last)
		if !annDue.IsZero() {
			plan.Wait = annDue.Sub(now)
			if plan.Mark {
				plan.Wait = max(plan.Wait, p.Interval)
			}
		}
	case annDue.IsZero() && queueDue.IsZero():
	case annDue.IsZero() || (!queueDue.IsZero() && queueDue.Before(annDue)):
		plan.Wait = queueDue.Sub(now)
	default:
		plan.Wait = annDue.Sub(now)
	}
	return plan
}

// due returns when bytes whose oldest was appended at oldest are due:
// at once if they are older than the last mark (they missed it) or if
// there was none, else when the budget allows or at oldest, whichever is
// later.
func (p Policy) due(oldest time.Time, pend Pending) time.Time {
	if p.Interval <= 0 || pend.Last.IsZero() || oldest.Before(pend.Last) {
		return oldest
	}
	return later(oldest, pend.Next.Add(-p.Interval))
}

// Marked returns Pending's Last and Next after a mark at now.
func (p Policy) Marked(pend Pending, now time.Time) (last, next time.Time) {
	return now, later(pend.Next, now).Add(p.Interval)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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

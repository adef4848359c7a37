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
	// Interval is the combiner's cadence: what is not cut for size is cut
	// at the first tick (Origin + k·Interval) after its oldest byte was
	// appended, so a byte waits Interval/2 on average whatever the rate
	// (counting from the oldest byte instead makes a lone batch wait the
	// whole Interval). 0 cuts at once.
	Interval time.Duration
	Origin   time.Time // where the ticks start; zero: the Unix epoch
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
	// tick has come. What is left queued is cut once every called task
	// has answered (the next Pack with Called == 0), in one object with
	// their slices.
	Call bool
	// Wait is how long until the tick after the oldest slice left queued,
	// or the oldest announced byte, or until called tasks are no longer
	// waited for; 0 when there is nothing to wait for on a timer.
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
// (split at MaxObjectBytes) if flush is set, or at the first tick after its
// oldest queued byte. Announced bytes are called at the tick after their
// oldest, and what is queued then waits for the answers (Called > 0), so
// each task's bytes go out in this object with one slice.
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
	// What is left goes at the tick after its oldest byte: the queued
	// slices at theirs; announced bytes are called at theirs, and what is
	// queued then waits for them. Bytes announced for a later tick than
	// the queue's are not called into its object: they are the next
	// tick's (calling them too would chain answer rounds, each adding to
	// the queue's wait).
	var queueTick, annTick time.Time
	if len(rest) > 0 {
		oldest := rest[0].AppendedAt
		for _, q := range rest[1:] {
			if q.AppendedAt.Before(oldest) {
				oldest = q.AppendedAt
			}
		}
		queueTick = p.tickAfter(oldest)
	}
	if pend.Announced > 0 {
		annTick = p.tickAfter(pend.Oldest)
	}
	switch {
	case !annTick.IsZero() && !now.Before(annTick):
		// About to cut at the tick: every announced task gives its bytes
		// to this object first.
		plan.Call = true
	case !queueTick.IsZero() && !now.Before(queueTick):
		plan.Cuts = append(plan.Cuts, len(rest))
		if !annTick.IsZero() {
			plan.Wait = annTick.Sub(now)
		}
	case annTick.IsZero() && queueTick.IsZero():
	case annTick.IsZero() || (!queueTick.IsZero() && queueTick.Before(annTick)):
		plan.Wait = queueTick.Sub(now)
	default:
		plan.Wait = annTick.Sub(now)
	}
	return plan
}

// tickAfter returns the first tick strictly after t: Origin + k·Interval
// for the least such k (negative before Origin). With Interval ≤ 0 it is
// t itself, so everything is cut at once.
func (p Policy) tickAfter(t time.Time) time.Time {
	if p.Interval <= 0 {
		return t
	}
	origin := p.Origin
	if origin.IsZero() {
		// time.Time{} is too far back for a Duration to reach now.
		origin = time.Unix(0, 0)
	}
	d := t.Sub(origin)
	k := d / p.Interval
	if d < 0 && d%p.Interval != 0 {
		k-- // round toward minus infinity
	}
	return origin.Add((k + 1) * p.Interval)
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

package combiner

import (
	"container/heap"
	"time"
)

// Ticket is one announcement of held bytes (Combiner.Announce). Its zero
// value is no announcement.
type Ticket struct {
	gen  uint64
	call <-chan struct{}
	live bool
	e    *announced // its place among the generation's announcements
}

// Live reports whether t is an announcement not yet withdrawn.
func (t Ticket) Live() bool { return t.live }

// Called returns a channel closed when the combiner asks for the bytes:
// an object is about to be cut because their interval is up. The task then
// submits what it holds and calls Withdraw. Nil for the zero Ticket.
func (t Ticket) Called() <-chan struct{} { return t.call }

// announcements is the combiner's side of Announce and Withdraw; it lives
// under Combiner.mu.
type announcements struct {
	gen uint64 // generation of the announcements not yet called
	// live holds the announcements of gen, oldest since first: a
	// Withdraw takes its own out, so the oldest (which Pack paces by) is
	// always one still held. Were it left at a withdrawn task's time, the
	// cutter would count bytes as due that no task holds any more, and
	// cut an early extra object.
	live   byAge
	call   chan struct{} // closed when gen is called
	called int           // announcements of earlier generations, called, not withdrawn
	// calledAt is when the outstanding call went out (zero: none).
	calledAt time.Time
}

// pending is what Pack needs to know. A Submit blocked for room means the
// queue must be cut, so called tasks are not waited for then: a called
// task may be the one blocked.
func (a *announcements) pending(now time.Time, submitWaiting bool) Pending {
	p := Pending{Announced: len(a.live), Oldest: a.oldest(), Called: a.called}
	if !a.calledAt.IsZero() {
		p.CalledFor = now.Sub(a.calledAt)
	}
	if submitWaiting {
		p.Called = 0
	}
	return p
}

// callAll asks every announcement of the current generation for its bytes
// and starts the next generation.
func (a *announcements) callAll(now time.Time) {
	if a.calledAt.IsZero() {
		a.calledAt = now
	}
	close(a.call)
	a.call = make(chan struct{})
	a.called += len(a.live)
	clear(a.live)
	a.live = a.live[:0]
	a.gen++
}

// oldest is the oldest since among the live announcements (zero: none).
func (a *announcements) oldest() time.Time {
	if len(a.live) == 0 {
		return time.Time{}
	}
	return a.live[0].since
}

// announced is one live announcement, in byAge at index.
type announced struct {
	since time.Time
	index int
}

// byAge is a min-heap of announcements by since (container/heap).
type byAge []*announced

func (h byAge) Len() int           { return len(h) }
func (h byAge) Less(i, j int) bool { return h[i].since.Before(h[j].since) }
func (h byAge) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *byAge) Push(x any) {
	e := x.(*announced)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *byAge) Pop() any {
	old := *h
	e := old[len(old)-1]
	e.index = -1
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// answered ends the outstanding call once every called task has answered.
func (a *announcements) answered() {
	if a.called == 0 {
		a.calledAt = time.Time{}
	}
}

// Announce tells the combiner that a partition holds bytes appended since
// since, below the size at which it would submit them, so that its
// pacing counts them as if queued: when they are due (Policy.Interval),
// the combiner closes the ticket's Called channel, waits for the task to
// Submit what it holds and Withdraw, and then cuts. A task with a live
// ticket needs no timer of its own. Every ticket must be withdrawn once,
// also by a task that stops without submitting. After Close, Called is
// closed at once.
func (c *Combiner) Announce(since time.Time) Ticket {
	c.mu.Lock()
	a := &c.mu.ann
	if a.call == nil {
		a.call = make(chan struct{})
	}
	if c.mu.closed {
		c.mu.Unlock()
		done := make(chan struct{})
		close(done)
		return Ticket{gen: ^uint64(0), call: done, live: true}
	}
	was := a.oldest()
	older := was.IsZero() || since.Before(was)
	e := &announced{since: since}
	heap.Push(&a.live, e)
	t := Ticket{gen: a.gen, call: a.call, live: true, e: e}
	// The cutter arms its timer for the oldest it knows of; tell it only
	// when this is older.
	wake := older && (c.mu.armedFor.IsZero() || since.Before(c.mu.armedFor))
	c.mu.Unlock()
	if wake {
		c.poke()
	}
	return t
}

// Withdraw ends an announcement: the task submitted what it held (or
// holds nothing, or stops). The last called task to withdraw lets the
// cutter cut. Withdrawing the zero Ticket does nothing.
func (c *Combiner) Withdraw(t Ticket) {
	if !t.live {
		return
	}
	c.mu.Lock()
	a := &c.mu.ann
	wake := false
	switch {
	case t.gen == ^uint64(0): // announced after Close
	case t.gen == a.gen:
		if t.e.index >= 0 { // withdrawn once only
			heap.Remove(&a.live, t.e.index)
			t.e.index = -1
		}
	default:
		a.called--
		wake = a.called == 0
	}
	c.mu.Unlock()
	if wake {
		c.poke()
	}
}

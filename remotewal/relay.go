package remotewal

import (
	"sync"
	"time"

	"github.com/kwal/kwal/combiner"
)

// relay stands between the tasks and a PackCaller sink: tasks holding bytes
// below UploadBytes announce to it, and it holds one combiner ticket for
// each group of them (a round). When the sink calls a round, the relay
// grants the round's tasks one at a time, each with a worker slot taken
// for it, so the call wakes no more tasks than ThreadPoolSize at once.
//
// Why: a call used to close one channel that every announced task waited
// on. At 10,000 partitions thousands of tasks hold one batch each; the call
// made them all runnable at once, they queued on the worker pool behind
// one another, and a slot holder woken from a lock waited behind thousands
// of runnable goroutines. Answering a round then cost time proportional to
// the tasks in it, late answers made the next round bigger, and the write
// path did not catch up again (issue 14 target 6). It also took the
// combiner's lock twice per task per object (Announce, Withdraw); the relay
// takes it twice per round.
//
// The sink's pacing sees the same thing as with a ticket per task: bytes
// announced (a round's ticket is live while any of its tasks holds bytes),
// their oldest time (a task older than the open round's ticket opens a
// round of its own), and called tasks not yet answered (the called round's
// ticket is withdrawn when its last task withdraws).
type relay struct {
	caller PackCaller
	pool   chan struct{}
	stop   <-chan struct{} // closed when the Manager closes

	mu struct {
		sync.Mutex
		open *round // the round new announcements join; nil: none
		// calling are the called rounds with tasks not yet granted, in
		// the order they were called.
		calling   []*round
		announced int // tasks announced, not called
		called    int // tasks called, not yet withdrawn
	}
}

// round is one combiner ticket and the tasks announced under it.
type round struct {
	ticket combiner.Ticket
	since  time.Time
	tasks  []*task
	live   int  // tasks not yet withdrawn
	called bool // the sink called the round
	next   int  // the next of tasks to grant, once called
	done   chan struct{}
}

// announce enters t, which holds bytes pending since since, into the open
// round, or a new one if there is none or t's bytes are older than it.
// Called by t's goroutine when it holds no announcement.
func (r *relay) announce(t *task, since time.Time) {
	r.mu.Lock()
	rd := r.mu.open
	fresh := rd == nil || since.Before(rd.since)
	if fresh {
		// The sink learns of the round (and its oldest byte) before any
		// task of it can withdraw: withdraw takes r.mu too.
		rd = &round{ticket: r.caller.Announce(since), since: since, done: make(chan struct{})}
		r.mu.open = rd
	}
	rd.tasks = append(rd.tasks, t)
	rd.live++
	r.mu.announced++
	t.rel.round, t.rel.granted = rd, false
	r.mu.Unlock()
	if fresh {
		go r.await(rd)
	}
}

// withdraw ends t's announcement. A task granted a slot it has not taken
// yet takes it and gives it back. The last task of a round withdraws the
// round's ticket. Called by t's goroutine.
func (r *relay) withdraw(t *task) {
	r.mu.Lock()
	rd := t.rel.round
	if rd == nil {
		r.mu.Unlock()
		return
	}
	granted := t.rel.granted
	t.rel.round, t.rel.granted = nil, false
	if rd.called {
		r.mu.called--
	} else {
		r.mu.announced--
	}
	rd.live--
	last := rd.live == 0
	if last {
		if r.mu.open == rd {
			r.mu.open = nil
		}
		close(rd.done)
	}
	r.mu.Unlock()
	if granted && !t.grantTaken {
		// The grant is sent right after it is decided; take it.
		<-t.grant
		t.holdsSlot = true
	}
	t.grantTaken = false
	t.releaseSlot()
	if last {
		r.caller.Withdraw(rd.ticket)
	}
}

// await waits for the sink to call rd, then grants its tasks one worker
// slot each, in announcement order, as slots come free.
func (r *relay) await(rd *round) {
	select {
	case <-rd.ticket.Called():
	case <-rd.done:
		return // every task withdrew first
	case <-r.stop:
		return
	}
	r.mu.Lock()
	rd.called = true
	if r.mu.open == rd {
		r.mu.open = nil
	}
	// rd.live is the tasks still in rd: they are called now.
	r.mu.announced -= rd.live
	r.mu.called += rd.live
	r.mu.calling = append(r.mu.calling, rd)
	r.mu.Unlock()
	// Slots a task gives back go on to the next called task (pass); this
	// takes the slots that are free.
	for {
		select {
		case r.pool <- struct{}{}:
		case <-rd.done:
			return
		case <-r.stop:
			return
		}
		r.mu.Lock()
		t := r.nextGrantLocked()
		r.mu.Unlock()
		if t == nil {
			<-r.pool
			return
		}
		t.grant <- struct{}{} // cap 1, one grant per announcement: never blocks
	}
}

// nextGrantLocked picks the next called task not yet granted, oldest
// round first, and marks it granted; nil if there is none. Called with
// r.mu held.
func (r *relay) nextGrantLocked() *task {
	for len(r.mu.calling) > 0 {
		rd := r.mu.calling[0]
		for rd.next < len(rd.tasks) {
			c := rd.tasks[rd.next]
			rd.tasks[rd.next] = nil
			rd.next++
			if c.rel.round == rd {
				c.rel.granted = true
				return c
			}
		}
		r.mu.calling[0] = nil
		r.mu.calling = r.mu.calling[1:]
	}
	return nil
}

// pass hands a worker slot that a task gives back to the next called task
// not yet granted, and reports whether it did; so a called round's tasks
// follow one another through the slots without a wake-up in between.
func (r *relay) pass() bool {
	r.mu.Lock()
	t := r.nextGrantLocked()
	r.mu.Unlock()
	if t == nil {
		return false
	}
	t.grant <- struct{}{}
	return true
}

// counts returns the tasks announced and not called, and called and not
// yet withdrawn.
func (r *relay) counts() (announced, called int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.announced, r.mu.called
}

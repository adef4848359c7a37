package follower

import (
	"sync"
	"sync/atomic"
)

// workers runs the follower's work off the driver (reads, their GETs,
// leader fetches, epoch queries, probes) on long-lived goroutines: a job
// goes to an idle worker when there is one and to a new goroutine when
// there is none, so no job ever waits for another to finish, and what
// runs at once is bounded only by what the driver starts (MaxInFlight
// reads of at most two GETs each, one fallback, one epoch query and one
// probe per partition), as when each job had a goroutine of its own. A
// worker that finishes a job waits for the next unless maxIdle others
// already wait, and leaves when done closes. Reusing workers saves a
// goroutine's creation and its stack's growth per job (a read's stack
// grows through the GET, the CRC check and the slice reader).
type workers struct {
	work    chan func()
	done    <-chan struct{}
	wg      *sync.WaitGroup
	idle    atomic.Int32
	maxIdle int32
}

func newWorkers(done <-chan struct{}, wg *sync.WaitGroup, maxIdle int) *workers {
	return &workers{work: make(chan func()), done: done, wg: wg, maxIdle: int32(maxIdle)}
}

// run runs job on an idle worker, or on a new one. It never blocks.
func (w *workers) run(job func()) {
	select {
	case w.work <- job:
	default:
		w.wg.Add(1)
		go w.loop(job)
	}
}

func (w *workers) loop(job func()) {
	defer w.wg.Done()
	for {
		job()
		job = nil // keep nothing of the last job while idle
		if !w.becomeIdle() {
			return
		}
		select {
		case job = <-w.work:
			w.idle.Add(-1)
		case <-w.done:
			w.idle.Add(-1)
			return
		}
	}
}

// becomeIdle counts the caller among the idle workers unless maxIdle
// already are: the count never goes past maxIdle, not even for a moment
// (an increment undone would show a worker too many to a reader between
// the two).
func (w *workers) becomeIdle() bool {
	for {
		n := w.idle.Load()
		if n >= w.maxIdle {
			return false
		}
		if w.idle.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

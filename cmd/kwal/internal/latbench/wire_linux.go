//go:build linux

package latbench

import (
	"container/heap"
	"encoding/binary"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// wire wakes the network model's waiters at their due times from one OS
// thread, without spinning: the thread sleeps in ppoll(2) with a
// nanosecond timeout (its timer slack set to 1 ns) until the earliest due
// time, and an eventfd cuts the sleep short when an earlier one arrives.
// Go's own timers round sub-millisecond sleeps up to the netpoller's
// millisecond (a 0.5 ms link would become about 1 ms), and yielding until
// the due time burns a core the brokers under test need; this thread costs
// one wakeup per due time and holds no P while it sleeps.
type wire struct {
	mu struct {
		sync.Mutex
		waits   waitHeap
		sleep   time.Time // what the thread sleeps until; zero: until kicked
		asleep  bool
		kicked  bool // an eventfd write the thread has not read yet
		started bool
		stopped bool
		err     error // the thread could not start: waits fall back to timers
	}
	efd  int // set before the thread starts, closed after it ends
	done chan struct{}
}

func newWire() *wire { return &wire{efd: -1, done: make(chan struct{})} }

// wireCoalesce is how early the wire may end a wait to end it together
// with one due now: fewer wakeups when waits come thick. The delayConns'
// waits end spinLead before their due times and yield through the rest,
// so this costs them no precision.
const wireCoalesce = 20 * time.Microsecond

type waiter struct {
	due time.Time
	ch  chan struct{}
}

type waitHeap []waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(waiter)) }
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

// startLocked starts the thread on the first wait. Caller holds w.mu.
func (w *wire) startLocked() {
	if w.mu.started || w.mu.stopped {
		return
	}
	w.mu.started = true
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		w.mu.err = err
		close(w.done)
		return
	}
	w.efd = fd
	go w.run()
}

// after returns a channel closed once due has passed, or up to
// wireCoalesce before (at once if it has).
func (w *wire) after(due time.Time) <-chan struct{} {
	ch := make(chan struct{})
	if !time.Now().Before(due) {
		close(ch)
		return ch
	}
	w.mu.Lock()
	w.startLocked()
	if w.mu.err != nil || w.mu.stopped {
		stopped := w.mu.stopped
		w.mu.Unlock()
		if stopped {
			close(ch)
			return ch
		}
		time.AfterFunc(time.Until(due), func() { close(ch) })
		return ch
	}
	heap.Push(&w.mu.waits, waiter{due: due, ch: ch})
	kick := w.mu.asleep && !w.mu.kicked && (w.mu.sleep.IsZero() || due.Before(w.mu.sleep))
	if kick {
		w.mu.kicked = true
	}
	w.mu.Unlock()
	if kick {
		w.kick()
	}
	return ch
}

func (w *wire) kick() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(w.efd, one[:])
}

func (w *wire) run() {
	defer close(w.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	fds := []unix.PollFd{{Fd: int32(w.efd), Events: unix.POLLIN}}
	var buf [8]byte
	for {
		w.mu.Lock()
		now := time.Now()
		for len(w.mu.waits) > 0 && !w.mu.waits[0].due.After(now.Add(wireCoalesce)) {
			close(heap.Pop(&w.mu.waits).(waiter).ch)
		}
		if w.mu.stopped {
			for _, x := range w.mu.waits {
				close(x.ch)
			}
			w.mu.waits = nil
			w.mu.Unlock()
			return
		}
		var timeout *unix.Timespec
		w.mu.sleep = time.Time{}
		if len(w.mu.waits) > 0 {
			w.mu.sleep = w.mu.waits[0].due
			ts := unix.NsecToTimespec(int64(w.mu.sleep.Sub(now)))
			timeout = &ts
		}
		w.mu.asleep = true
		w.mu.Unlock()
		_, _ = unix.Ppoll(fds, timeout, nil) // EINTR: look again
		w.mu.Lock()
		w.mu.asleep = false
		if fds[0].Revents&unix.POLLIN != 0 {
			_, _ = unix.Read(w.efd, buf[:])
			w.mu.kicked = false
		}
		fds[0].Revents = 0
		w.mu.Unlock()
	}
}

// close stops the thread; waits still pending end at once.
func (w *wire) close() {
	w.mu.Lock()
	if w.mu.stopped {
		w.mu.Unlock()
		return
	}
	w.mu.stopped = true
	running := w.mu.started && w.mu.err == nil
	w.mu.Unlock()
	if !running {
		return
	}
	w.kick()
	<-w.done
	_ = unix.Close(w.efd)
}

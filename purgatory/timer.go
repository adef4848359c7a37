package purgatory

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/kwal/kwal/clock"
)

// Errors returned by Timer.Schedule.
var (
	// ErrClosed: the Timer was closed; the entry was not scheduled.
	ErrClosed = errors.New("purgatory: timer closed")
	// ErrBusy: the entry is scheduled or due and not yet run; cancel it
	// first.
	ErrBusy = errors.New("purgatory: timer entry already scheduled")
)

// TimerConfig configures a Timer. The zero value, after Validate, is a
// 1 ms × 512 wheel on the real clock with 2 executor workers.
type TimerConfig struct {
	// Tick is the resolution of the lowest level. Default 1ms.
	Tick time.Duration
	// WheelSize is the number of buckets per level. Default 512, so level 0
	// spans 512 ms at the default tick and the timeouts of fetches and of
	// most produce requests never cascade (Kafka uses 20).
	WheelSize int
	// Workers is the number of executor goroutines that run expired
	// entries. Default 2. Ignored when Manual.
	Workers int
	// Clock reads the time (see Of for the module's clock). Default
	// NewRealClock().
	Clock Clock
	// Manual starts no goroutine: the caller moves the clock and calls
	// Poll, which runs expired entries itself. Required with a ManualClock.
	Manual bool
}

// Validate fills defaults and rejects nonsense.
func (c *TimerConfig) Validate() error {
	if c.Tick == 0 {
		c.Tick = time.Millisecond
	}
	if c.WheelSize == 0 {
		c.WheelSize = 512
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Clock == nil {
		c.Clock = NewRealClock()
	}
	switch {
	case c.Tick < 0:
		return fmt.Errorf("purgatory: tick %v must be positive", c.Tick)
	case c.WheelSize < 2:
		return fmt.Errorf("purgatory: wheel size %d must be at least 2", c.WheelSize)
	case c.Workers < 0:
		return fmt.Errorf("purgatory: workers %d must be positive", c.Workers)
	}
	if _, ok := c.Clock.(*ManualClock); ok && !c.Manual {
		return errors.New("purgatory: a ManualClock needs Manual: nothing else would poll the wheel")
	}
	return nil
}

// Timer is a hierarchical timing wheel with its driver and executor.
type Timer struct {
	clock  Clock
	manual bool
	mu     struct {
		sync.Mutex
		w      wheel
		armed  int64 // expiry the driver sleeps until; MaxInt64 when none
		closed bool
	}
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	exec *executor
}

// NewTimer validates cfg and starts the driver and executor (none when
// Manual).
func NewTimer(cfg TimerConfig) (*Timer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Timer{clock: cfg.Clock, manual: cfg.Manual}
	t.mu.w = newWheel(int64(cfg.Tick), int64(cfg.WheelSize), cfg.Clock.Now())
	t.mu.armed = math.MaxInt64
	if !cfg.Manual {
		t.wake = make(chan struct{}, 1)
		t.stop = make(chan struct{})
		t.done = make(chan struct{})
		t.exec = newExecutor(cfg.Workers)
		go t.drive()
	}
	return t, nil
}

// Now reads the Timer's clock.
func (t *Timer) Now() int64 { return t.clock.Now() }

// After schedules e to run task d from now. See Schedule.
func (t *Timer) After(e *TimerEntry, d time.Duration, task Expirer) error {
	return t.Schedule(e, t.clock.Now()+int64(d), task)
}

// Schedule arms e to run task.Expire at or after deadline (clock
// nanoseconds), at most about one tick later. A deadline already passed
// goes to the bucket due now: the task runs soon, on the executor (or in
// the next Poll when Manual), never inline, and Cancel can still stop it
// until then. It returns ErrBusy if e is scheduled or due and not yet run,
// ErrClosed after Close.
func (t *Timer) Schedule(e *TimerEntry, deadline int64, task Expirer) error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	if !e.state.CompareAndSwap(entryIdle, entryScheduled) {
		t.mu.Unlock()
		return ErrBusy
	}
	e.deadline, e.task = deadline, task
	exp, moved := t.mu.w.add(e)
	wake := moved && exp < t.mu.armed
	if wake {
		t.mu.armed = exp
	}
	t.mu.Unlock()
	if wake && !t.manual {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// Cancel removes e from the wheel. It returns false if e was not scheduled
// (never, already cancelled, or already due: then its task runs or ran).
func (t *Timer) Cancel(e *TimerEntry) bool {
	// Idle entries (the common case when an operation completes after its
	// expiry started) need no lock. A Schedule racing with this load
	// simply orders after the Cancel.
	if e.state.Load() != entryScheduled {
		return false
	}
	t.mu.Lock()
	ok := e.state.Load() == entryScheduled && t.mu.w.remove(e)
	if ok {
		e.task = nil
		e.state.Store(entryIdle)
	}
	t.mu.Unlock()
	return ok
}

// Len returns the number of scheduled entries not yet due.
func (t *Timer) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.w.count
}

// Tick returns the wheel's resolution: an entry runs at most one tick
// after its deadline.
func (t *Timer) Tick() time.Duration { return time.Duration(t.mu.w.tick) } // fixed at NewTimer

// Levels returns how many wheel levels exist (overflow levels are created
// on demand).
func (t *Timer) Levels() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.w.levels)
}

// Poll advances the wheel to the clock's time and returns how many entries
// became due. When Manual it also runs them on the caller's goroutine
// before returning; otherwise the executor runs them (the driver calls Poll
// by itself).
func (t *Timer) Poll() int {
	head, tail, n, _ := t.poll()
	t.dispatch(head, tail, n)
	return n
}

func (t *Timer) dispatch(head, tail *bucket, n int) {
	if n == 0 {
		return
	}
	if !t.manual {
		t.exec.push(head, tail, n)
		return
	}
	for b := head; b != nil; {
		nx := b.nextDue
		b.nextDue = nil
		runBucket(b, math.MaxInt)
		b = nx
	}
}

func (t *Timer) poll() (head, tail *bucket, n int, next int64) {
	now := t.clock.Now()
	t.mu.Lock()
	head, tail, n = t.mu.w.poll(now, nil, nil)
	next, ok := t.mu.w.next()
	if !ok {
		next = math.MaxInt64
	}
	t.mu.armed = next
	t.mu.Unlock()
	return head, tail, n, next
}

// drive is the one goroutine that moves the wheel: it sleeps until the
// earliest bucket is due, or until Schedule files an earlier one. Under
// the lock it only swaps due level-0 buckets out (O(1) each) and cascades
// higher ones; the executor does the per-entry work.
func (t *Timer) drive() {
	defer close(t.done)
	var sleep clock.Timer
	if tc, ok := t.clock.(timerClock); ok {
		sleep = tc.newTimer(time.Hour)
	} else {
		sleep = clock.Real{}.NewTimer(time.Hour)
	}
	sleep.Stop()
	for {
		head, tail, n, next := t.poll()
		t.dispatch(head, tail, n)
		if next != math.MaxInt64 && !t.arm(sleep, next) {
			continue
		}
		select {
		case <-sleep.C():
		case <-t.wake:
			sleep.Stop()
		case <-t.stop:
			sleep.Stop()
			return
		}
	}
}

// arm sets sleep to fire at next on the clock, or reports false when next
// is already due. A timer counts from the instant it is reset, so a clock
// that moved between reading it and the reset would arm the timer late:
// with a manual clock that is a timeout that never fires when the test
// advances exactly to it. So the reading is checked after the reset and
// the timer re-armed if the clock moved (a few times at most: a clock that
// never stands still is a real one, where the lateness is nanoseconds).
func (t *Timer) arm(sleep clock.Timer, next int64) bool {
	for range 3 {
		now := t.clock.Now()
		if next-now <= 0 {
			return false
		}
		sleep.Reset(time.Duration(next - now))
		if _, real := t.clock.(*RealClock); real || t.clock.Now() == now {
			break
		}
	}
	return true
}

// Close stops the driver, runs the entries already due (on the executor,
// which it then stops; when Manual, here), and returns the tasks of the
// entries still scheduled, which will never run. Later Schedules fail with
// ErrClosed. Close is idempotent; later calls return nil.
func (t *Timer) Close() []Expirer {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.closed = true
	t.mu.Unlock()
	if !t.manual {
		close(t.stop)
		<-t.done
	}
	t.Poll()
	if !t.manual {
		t.exec.close()
	}
	t.mu.Lock()
	entries := t.mu.w.drain()
	t.mu.Unlock()
	tasks := make([]Expirer, 0, len(entries))
	for _, e := range entries {
		tasks = append(tasks, e.task)
		e.task = nil
		e.state.Store(entryIdle)
	}
	return tasks
}

// executor runs due buckets on a fixed set of goroutines sharing one queue,
// so a burst of expiries starts no goroutine. A worker takes the bucket at
// the head, runs up to batch of its entries and, if entries are left, puts
// it back at the head for whichever worker is free: a large bucket spreads
// over the workers without anyone walking it under the lock.
type executor struct {
	mu struct {
		sync.Mutex
		head, tail *bucket
		closed     bool
	}
	cond *sync.Cond
	wg   sync.WaitGroup
}

const batch = 128

func newExecutor(workers int) *executor {
	x := &executor{}
	x.cond = sync.NewCond(&x.mu.Mutex)
	x.wg.Add(workers)
	for range workers {
		go x.work()
	}
	return x
}

func (x *executor) push(head, tail *bucket, n int) {
	x.mu.Lock()
	if x.mu.tail == nil {
		x.mu.head = head
	} else {
		x.mu.tail.nextDue = head
	}
	x.mu.tail = tail
	x.mu.Unlock()
	if n > batch {
		x.cond.Broadcast()
	} else {
		x.cond.Signal()
	}
}

func (x *executor) work() {
	defer x.wg.Done()
	x.mu.Lock()
	for {
		for x.mu.head == nil && !x.mu.closed {
			x.cond.Wait()
		}
		b := x.mu.head
		if b == nil {
			x.mu.Unlock()
			return
		}
		x.mu.head = b.nextDue
		if x.mu.head == nil {
			x.mu.tail = nil
		}
		b.nextDue = nil
		x.mu.Unlock()
		more := runBucket(b, batch)
		x.mu.Lock()
		if more {
			b.nextDue = x.mu.head
			x.mu.head = b
			if x.mu.tail == nil {
				x.mu.tail = b
			}
			x.cond.Signal() // an idle worker may share the rest
		}
	}
}

// close waits for the queue to empty and the workers to stop.
func (x *executor) close() {
	x.mu.Lock()
	x.mu.closed = true
	x.mu.Unlock()
	x.cond.Broadcast()
	x.wg.Wait()
}

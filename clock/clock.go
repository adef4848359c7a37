package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends the time on C once d has passed.
	NewTimer(d time.Duration) Timer
	// Since is Now().Sub(t).
	Since(t time.Time) time.Duration
}

// Timer is the subset of *time.Timer kwal uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was
	// pending. As with Go 1.23's timers, no receive after Stop (or Reset)
	// sees a firing from before it.
	Stop() bool
	// Reset re-arms the timer to fire after d.
	Reset(d time.Duration)
}

// ResetAt re-arms t, a timer of c, to fire once c reads at: exactly at
// on a clock whose timers can be armed for a time (Manual's), however far
// another goroutine (a test's) moved it since the caller decided at; on
// the wall clock, after at minus now. A caller that computed a duration
// from an earlier reading and passed it to Reset would fire late by
// however far the clock moved in between.
func ResetAt(t Timer, c Clock, at time.Time) {
	if a, ok := t.(interface{ ResetAt(time.Time) }); ok {
		a.ResetAt(at)
		return
	}
	t.Reset(max(0, at.Sub(c.Now())))
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

func (Real) Now() time.Time                  { return time.Now() }
func (Real) Since(t time.Time) time.Duration { return time.Since(t) }
func (Real) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Stop() bool            { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }

// Manual is a fake clock for tests. Its time starts where NewManual puts it
// and moves only through Advance or Set.
type Manual struct {
	mu struct {
		sync.Mutex
		now    time.Time
		timers []*manualTimer
		armed  chan struct{} // closed at the next arming (Armed)
	}
}

var _ Clock = (*Manual)(nil)

// NewManual returns a manual clock reading start.
func NewManual(start time.Time) *Manual {
	m := &Manual{}
	m.mu.now = start
	return m
}

func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.now
}

func (m *Manual) Since(t time.Time) time.Duration { return m.Now().Sub(t) }

func (m *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{m: m, c: make(chan time.Time, 1)}
	m.mu.Lock()
	t.deadline = m.mu.now.Add(d)
	t.armed = true
	m.mu.timers = append(m.mu.timers, t)
	m.notifyArmedLocked()
	m.mu.Unlock()
	m.fire()
	return t
}

// Armed returns a channel closed the next time a timer is armed (made or
// Reset). A test takes it, checks what it waits for (Pending, a result),
// then waits on it: it learns that the goroutine under test has started
// waiting on the clock without polling.
func (m *Manual) Armed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.armed == nil {
		m.mu.armed = make(chan struct{})
	}
	return m.mu.armed
}

func (m *Manual) notifyArmedLocked() {
	if m.mu.armed != nil {
		close(m.mu.armed)
		m.mu.armed = nil
	}
}

// Advance moves the clock forward by d and fires every timer now due, in
// deadline order.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	m.mu.now = m.mu.now.Add(d)
	m.mu.Unlock()
	m.fire()
}

// Set moves the clock to t (which must not be before Now) and fires due timers.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	if t.After(m.mu.now) {
		m.mu.now = t
	}
	m.mu.Unlock()
	m.fire()
}

// Pending reports how many timers are armed; tests use it to wait until a
// goroutine under test has started waiting before they advance the clock.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range m.mu.timers {
		if t.armed {
			n++
		}
	}
	return n
}

// Next reports the earliest deadline of the armed timers, if any; tests
// use it to wait until a goroutine under test waits on the clock for a
// given instant (one timer may stand for several deadlines, as a
// driver's does).
func (m *Manual) Next() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Time
	ok := false
	for _, t := range m.mu.timers {
		if t.armed && (!ok || t.deadline.Before(next)) {
			next, ok = t.deadline, true
		}
	}
	return next, ok
}

// fire sends on the channel of every timer now due, in deadline order.
// The sends (non-blocking: each channel holds one value) happen under the
// lock, as Go's own timers do since Go 1.23: a Stop or Reset that returns
// has also taken out a value its timer's old arming left unreceived, so
// no receive after it sees a stale firing. Sent after the unlock, a
// firing read here could land after its owner had re-armed the timer,
// and wake the owner as if the new arming had come due.
func (m *Manual) fire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.mu.now
	var due []*manualTimer
	keep := m.mu.timers[:0]
	for _, t := range m.mu.timers {
		if !t.armed {
			continue
		}
		if !t.deadline.After(now) {
			t.armed = false
			due = append(due, t)
			continue
		}
		keep = append(keep, t)
	}
	for i := len(keep); i < len(m.mu.timers); i++ {
		m.mu.timers[i] = nil
	}
	m.mu.timers = keep
	sort.SliceStable(due, func(i, j int) bool { return due[i].deadline.Before(due[j].deadline) })
	for _, t := range due {
		select {
		case t.c <- now:
		default:
		}
	}
}

type manualTimer struct {
	m        *Manual
	c        chan time.Time
	deadline time.Time // guarded by m.mu
	armed    bool      // guarded by m.mu
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	was := t.armed
	t.armed = false
	t.drainLocked()
	for i, o := range t.m.mu.timers {
		if o == t {
			t.m.mu.timers = append(t.m.mu.timers[:i], t.m.mu.timers[i+1:]...)
			break
		}
	}
	return was
}

func (t *manualTimer) Reset(d time.Duration) {
	t.m.mu.Lock()
	t.resetLocked(t.m.mu.now.Add(d))
}

// ResetAt re-arms the timer to fire once the clock reads at (at once if
// it does already). A caller that computed at from an earlier reading of
// the clock is not made late by the clock moving meanwhile, as
// Reset(at.Sub(reading)) would be: a manual clock moves under another
// goroutine (the test's), between the reading and the Reset.
func (t *manualTimer) ResetAt(at time.Time) {
	t.m.mu.Lock()
	t.resetLocked(at)
}

// resetLocked arms the timer for at; the caller holds m.mu, which it
// releases.
func (t *manualTimer) resetLocked(at time.Time) {
	t.deadline = at
	t.drainLocked()
	if !t.armed {
		t.armed = true
		t.m.mu.timers = append(t.m.mu.timers, t)
	}
	t.m.notifyArmedLocked()
	t.m.mu.Unlock()
	t.m.fire()
}

// drainLocked takes out a firing not yet received (the caller holds m.mu,
// under which fire sends).
func (t *manualTimer) drainLocked() {
	select {
	case <-t.c:
	default:
	}
}

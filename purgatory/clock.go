package purgatory

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/clock"
)

// Clock is how the purgatory reads the module's clock (package clock): in
// nanoseconds on a monotonic scale, of which only differences matter, so
// the wheel does integer arithmetic. Make one with Of; NewRealClock and
// ManualClock are the two usual ones.
type Clock interface {
	Now() int64
	// Reading is the module-clock instant t on this scale: what Now
	// returns at t. An Op's Start goes through it.
	Reading(t time.Time) int64
}

// timerClock is a Clock whose timers the wheel's driver sleeps on: the
// module clock's, so that a purgatory on a clock.Manual expires its
// operations when the test advances that clock, with no Poll.
type timerClock interface {
	Clock
	newTimer(d time.Duration) clock.Timer
}

// Of adapts a module clock: nanoseconds since the call, and c's timers for
// the driver. clock.Real (or nil) gives a RealClock.
func Of(c clock.Clock) Clock {
	switch c.(type) {
	case nil, clock.Real, *clock.Real:
		return NewRealClock()
	}
	return &moduleClock{c: c, base: c.Now()}
}

type moduleClock struct {
	c    clock.Clock
	base time.Time
}

var _ timerClock = (*moduleClock)(nil)

func (m *moduleClock) Now() int64                           { return int64(m.c.Now().Sub(m.base)) }
func (m *moduleClock) Reading(t time.Time) int64            { return int64(t.Sub(m.base)) }
func (m *moduleClock) newTimer(d time.Duration) clock.Timer { return m.c.NewTimer(d) }

// RealClock is clock.Real read as nanoseconds since NewRealClock. Make it
// with NewRealClock.
type RealClock struct{ base time.Time }

var _ timerClock = (*RealClock)(nil)

// NewRealClock returns a clock reading nanoseconds since the call.
func NewRealClock() *RealClock { return &RealClock{base: time.Now()} }

// Now returns the nanoseconds elapsed since NewRealClock (time.Since: one
// monotonic reading, the speed the wheel's benchmarks were taken at).
func (c *RealClock) Now() int64 { return int64(time.Since(c.base)) }

// Reading returns t as nanoseconds since NewRealClock (t from time.Now
// or clock.Real, with its monotonic reading).
func (c *RealClock) Reading(t time.Time) int64 { return int64(t.Sub(c.base)) }

func (c *RealClock) newTimer(d time.Duration) clock.Timer { return clock.Real{}.NewTimer(d) }

// manualEpoch is where a ManualClock's clock.Manual starts.
var manualEpoch = time.Unix(0, 0).UTC()

// ManualClock is a manual module clock read as nanoseconds since it
// started: it moves only when told, and a Timer using it must be Manual
// (the caller polls). The reading is an atomic (the wheel reads it on
// every Schedule: a mutex there costs a third of ScheduleCancel); Advance
// and Set move the clock.Manual returned by Manual along, so components
// sharing the purgatory's time see the same instant and their timers fire.
// The zero value is ready. It is safe for concurrent use.
type ManualClock struct {
	now  atomic.Int64
	once sync.Once
	m    *clock.Manual
}

var _ Clock = (*ManualClock)(nil)

// Manual returns the module clock that follows this one.
func (c *ManualClock) Manual() *clock.Manual {
	c.once.Do(func() { c.m = clock.NewManual(manualEpoch.Add(time.Duration(c.now.Load()))) })
	return c.m
}

// Now returns the current manual time.
func (c *ManualClock) Now() int64 { return c.now.Load() }

// Reading returns t, an instant of the clock.Manual returned by Manual,
// on this clock's scale.
func (c *ManualClock) Reading(t time.Time) int64 { return int64(t.Sub(manualEpoch)) }

// Advance moves the clock forward by d (d < 0 is ignored: time never goes
// back) and returns the new time.
func (c *ManualClock) Advance(d time.Duration) int64 {
	if d < 0 {
		d = 0
	}
	t := c.now.Add(int64(d))
	c.Manual().Set(manualEpoch.Add(time.Duration(t)))
	return t
}

// Set moves the clock to t if t is later than now.
func (c *ManualClock) Set(t int64) {
	for {
		cur := c.now.Load()
		if t <= cur || c.now.CompareAndSwap(cur, t) {
			break
		}
	}
	c.Manual().Set(manualEpoch.Add(time.Duration(c.now.Load())))
}

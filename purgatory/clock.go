package purgatory

import (
	"sync/atomic"
	"time"
)

// Clock reads the time in nanoseconds on a monotonic scale. Only
// differences between readings matter.
type Clock interface {
	Now() int64
}

// RealClock is the monotonic wall clock. Make it with NewRealClock.
type RealClock struct{ base time.Time }

var _ Clock = (*RealClock)(nil)

// NewRealClock returns a clock reading nanoseconds since the call.
func NewRealClock() *RealClock { return &RealClock{base: time.Now()} }

// Now returns the nanoseconds elapsed since NewRealClock.
func (c *RealClock) Now() int64 { return int64(time.Since(c.base)) }

// ManualClock moves only when told. It is safe for concurrent use.
type ManualClock struct{ now atomic.Int64 }

var _ Clock = (*ManualClock)(nil)

// Now returns the current manual time.
func (c *ManualClock) Now() int64 { return c.now.Load() }

// Advance moves the clock forward by d (d < 0 is ignored: time never goes
// back) and returns the new time.
func (c *ManualClock) Advance(d time.Duration) int64 {
	if d < 0 {
		d = 0
	}
	return c.now.Add(int64(d))
}

// Set moves the clock to t if t is later than now.
func (c *ManualClock) Set(t int64) {
	for {
		cur := c.now.Load()
		if t <= cur || c.now.CompareAndSwap(cur, t) {
			return
		}
	}
}

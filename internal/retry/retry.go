package retry

import (
	"fmt"
	"time"
)

// Backoff computes the wait before the next attempt after a number of
// consecutive failures: Base doubled per failure after the first, capped
// at Max, and with Jitter, a random fraction of the delay taken off so
// that many partitions failing together do not retry in step.
type Backoff struct {
	Base time.Duration // the wait after the first failure; > 0
	Max  time.Duration // the cap; >= Base
	// Jitter in [0, 1]: the delay is multiplied by 1 - Jitter*u for the
	// caller's uniform u in [0, 1). 0.5 keeps every delay in (d/2, d].
	Jitter float64
}

// Validate rejects a Backoff that would spin or never retry.
func (b Backoff) Validate() error {
	if b.Base <= 0 || b.Max < b.Base || b.Jitter < 0 || b.Jitter > 1 {
		return fmt.Errorf("retry: backoff base %v, max %v, jitter %v (want 0 < base <= max, jitter in [0, 1])", b.Base, b.Max, b.Jitter)
	}
	return nil
}

// Delay is the wait after failures consecutive failures (1 for the
// first; below 1 counts as 1), with u in [0, 1) drawn by the caller.
func (b Backoff) Delay(failures int, u float64) time.Duration {
	d := b.Base
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	u = min(max(u, 0), 1)
	return d - time.Duration(float64(d)*b.Jitter*u)
}

// Report is what an Episode says about one event.
type Report int

const (
	// Quiet: nothing to log.
	Quiet Report = iota
	// Entered: the first failure of an episode.
	Entered
	// Still: failures go on; Count failures since the last report.
	Still
	// Left: the first success after failures; Count is the episode's total.
	Left
)

// Episode turns a stream of failures and successes into state changes.
// The zero value, with Every set, is ready; Every <= 0 never reports
// Still.
type Episode struct {
	Every time.Duration

	active   bool
	since    time.Time
	reported time.Time
	total    int64
	unlogged int64
}

// Active says whether the last event was a failure.
func (e *Episode) Active() bool { return e.active }

// Since is when the current episode began (zero when not active).
func (e *Episode) Since() time.Time { return e.since }

// Total is the number of failures of the current episode.
func (e *Episode) Total() int64 { return e.total }

// Fail records a failure at now. It returns Entered for the first of an
// episode, Still with the failures since the last report once Every has
// passed since then, else Quiet.
func (e *Episode) Fail(now time.Time) (Report, int64) {
	e.total++
	if !e.active {
		e.active, e.since, e.reported, e.unlogged = true, now, now, 0
		return Entered, 1
	}
	e.unlogged++
	if e.Every > 0 && now.Sub(e.reported) >= e.Every {
		n := e.unlogged
		e.reported, e.unlogged = now, 0
		return Still, n
	}
	return Quiet, 0
}

// OK records a success at now. It returns Left, the episode's failure
// count and how long it lasted when it ends an episode, else Quiet.
func (e *Episode) OK(now time.Time) (Report, int64, time.Duration) {
	if !e.active {
		return Quiet, 0, 0
	}
	n, d := e.total, now.Sub(e.since)
	*e = Episode{Every: e.Every}
	return Left, n, d
}

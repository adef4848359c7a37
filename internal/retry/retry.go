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
// Still and never folds episodes.
//
// A failure that flaps (fail, succeed, fail...) would start an episode at
// every failure; an episode that starts less than Every after the last
// report is therefore quiet: its failures are carried into the next
// report, and its end is not reported. So one Episode reports at most
// one Entered or Still per Every, plus one Left per reported Entered.
type Episode struct {
	Every time.Duration

	active   bool
	loud     bool // this episode's start was reported
	since    time.Time
	reported time.Time // the last report of any episode
	total    int64
	unlogged int64 // failures not yet counted in a report, carried across quiet episodes
}

// Active says whether the last event was a failure.
func (e *Episode) Active() bool { return e.active }

// Since is when the current episode began (zero when not active).
func (e *Episode) Since() time.Time { return e.since }

// Total is the number of failures of the current episode.
func (e *Episode) Total() int64 { return e.total }

func (e *Episode) due(now time.Time) bool {
	return e.reported.IsZero() || e.Every <= 0 || now.Sub(e.reported) >= e.Every
}

// Fail records a failure at now. It returns Entered for the first of an
// episode, Still once Every has passed since the last report, else
// Quiet; the count is of the failures since the last report.
func (e *Episode) Fail(now time.Time) (Report, int64) {
	e.total++
	e.unlogged++
	if !e.active {
		e.active, e.since, e.total = true, now, 1
		e.loud = e.due(now)
		if e.loud {
			n := e.unlogged
			e.reported, e.unlogged = now, 0
			return Entered, n
		}
		return Quiet, 0
	}
	if e.Every > 0 && e.due(now) {
		n := e.unlogged
		e.reported, e.unlogged = now, 0
		return Still, n
	}
	return Quiet, 0
}

// OK records a success at now. It returns Left, the episode's failure
// count and how long it lasted when it ends an episode whose start was
// reported, else Quiet.
func (e *Episode) OK(now time.Time) (Report, int64, time.Duration) {
	if !e.active {
		return Quiet, 0, 0
	}
	n, d, loud := e.total, now.Sub(e.since), e.loud
	e.active, e.loud, e.since, e.total = false, false, time.Time{}, 0
	if !loud {
		return Quiet, 0, 0 // its failures are carried to the next report
	}
	e.unlogged = 0 // counted in the total reported now
	return Left, n, d
}

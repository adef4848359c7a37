package purgatory

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
)

// TestStartCountsFromArrival is the manual-clock long-poll bug of issue
// 10: a broker read the clock when a follower's fetch arrived (its fetch
// time, which keeps it in the ISR), the test saw that fetch and advanced
// the clock past its long poll, and only then did the handler hand the
// fetch to the purgatory, which counted the timeout from the new time: the
// poll was never answered, and the follower never fetched again. With
// Start set to the arrival reading, the deadline is that reading plus
// Timeout wherever the advances fall. The purgatory here is the broker's:
// a module clock.Manual under a running driver, not Manual mode.
func TestStartCountsFromArrival(t *testing.T) {
	const wait = 50 * time.Millisecond
	for _, before := range []time.Duration{wait, wait + time.Millisecond, time.Hour} {
		t.Run(fmt.Sprintf("advanced=%v", before), func(t *testing.T) {
			m := clock.NewManual(time.Unix(1000, 0))
			p, err := New[string](Config{Timer: TimerConfig{Clock: Of(m)}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown()
			o := &expiryOp{expired: make(chan struct{})}
			o.Timeout, o.Start = wait, m.Now() // the request arrives
			m.Advance(before)                  // the test steps past its poll
			// The deadline has passed already, so the driver may expire
			// the op before TryCompleteElseWatch returns (then it reports
			// true); TryComplete never succeeds, so either way the op must
			// end by expiring.
			p.TryCompleteElseWatch(o, []string{"k"})
			// No further advance: the deadline has passed already.
			select {
			case <-o.expired:
			case <-time.After(10 * time.Second): // a hang guard only
				t.Fatalf("a %v wait that arrived %v of clock time ago is not expired: its timeout counts from the arming", wait, before)
			}
		})
	}
}

// TestStartInterleavings runs seeded schedules on a Manual-mode purgatory
// (Poll is synchronous, so "not yet" is checkable): an operation's Start
// is read, the clock moves in random steps, some before the operation is
// handed in and some after, and each Poll must expire it exactly when the
// clock has passed Start + Timeout (rounded up to the 1 ms tick), never
// before and never later, wherever the hand-over fell. A Start after the
// arming counts as the arming.
func TestStartInterleavings(t *testing.T) {
	for seed := int64(1); seed <= 500; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var c ManualClock
		c.Advance(time.Duration(rng.Intn(5000)) * time.Microsecond) // any phase against the tick
		p, err := New[string](Config{Timer: TimerConfig{Clock: &c, Manual: true}})
		if err != nil {
			t.Fatal(err)
		}
		o := &expiryOp{expired: make(chan struct{})}
		o.Timeout = time.Duration(rng.Intn(200)) * time.Millisecond
		// Mostly the arrival's reading; sometimes one ahead of the
		// clock, which may or may not still be ahead at the hand-over.
		o.Start = c.Manual().Now()
		if rng.Intn(10) == 0 {
			o.Start = o.Start.Add(time.Duration(1+rng.Intn(100)) * time.Millisecond)
		}
		start := c.Reading(o.Start)
		armAfter := rng.Intn(6) // steps before the hand-over
		const tick = int64(time.Millisecond)
		var due int64
		armed := false
		for step := 0; step < 40; step++ {
			if step == armAfter {
				start = min(start, c.Now())
				due = (start + int64(o.Timeout) + tick - 1) / tick * tick
				if p.TryCompleteElseWatch(o, []string{"k"}) {
					t.Fatalf("seed %d: completed at once", seed)
				}
				armed = true
			}
			if armed {
				p.Poll()
				expired := o.Outcome() == Expired
				if now := c.Now(); expired != (now >= due) {
					t.Fatalf("seed %d: at %v (start %v, timeout %v, armed after step %d, due %v) expired=%v",
						seed, time.Duration(now), time.Duration(start), o.Timeout, armAfter, time.Duration(due), expired)
				}
				if expired {
					break
				}
			}
			c.Advance(time.Duration(rng.Intn(40_000)) * time.Microsecond)
		}
		if armed && o.Outcome() != Expired {
			// Run out of steps: one more long step ends it.
			c.Advance(time.Second)
			p.Poll()
			if o.Outcome() != Expired {
				t.Fatalf("seed %d: not expired a second past its deadline", seed)
			}
		}
		p.Shutdown()
	}
}

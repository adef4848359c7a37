package broker

import (
	"math/rand"
	"testing"
	"time"
)

// TestNextFixedRateProperty: the ISR check's next run is on the grid of
// its first run, strictly after the reading its last run took, and no
// grid instant between that reading and it is skipped.
func TestNextFixedRateProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	base := time.Unix(1_000_000, 0)
	for i := 0; i < 10_000; i++ {
		period := time.Duration(1+rng.Int63n(int64(time.Second))) * time.Nanosecond
		due := base.Add(time.Duration(rng.Int63n(int64(time.Hour))))
		at := due.Add(time.Duration(rng.Int63n(int64(10*time.Second))) - 5*time.Second)
		next := nextFixedRate(due, at, period)
		if !next.After(at) {
			t.Fatalf("due %v at %v period %v: next %v not after the reading", due, at, period, next)
		}
		if d := next.Sub(due); d < 0 || d%period != 0 {
			t.Fatalf("due %v at %v period %v: next %v off the grid", due, at, period, next)
		}
		if next != due && next.Add(-period).After(at) {
			t.Fatalf("due %v at %v period %v: next %v skips a grid instant after the reading", due, at, period, next)
		}
	}
}

package replica

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// TestLastCaughtUpProperty drives one follower's fetches over seeded
// random histories (the leader's log end grows by random steps at random
// intervals; the follower's offset moves to a random earlier log end of
// the leader, or stays) and checks LastCaughtUp against Kafka's
// definition, computed from the whole history: the latest fetch time t
// (or the leader's start) such that the follower's current offset reaches
// the leader's log end at t. It must never be later than that (a follower
// never stays in the ISR longer than the rule allows) and never earlier
// by more than the marks' resolution, lagMax/maxMarks, plus one fetch
// interval (no spurious shrinks).
func TestLastCaughtUpProperty(t *testing.T) {
	const lagMax = 3 * time.Second
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 0x6c616721))
		start := int64(rng.IntN(100))
		l := NewLeader(LeaderState{Self: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, start, start, t0, lagMax, 1)
		type fetch struct {
			at  time.Time
			leo int64
		}
		hist := []fetch{{t0, start}}
		now, leo, off := t0, start, int64(0)
		maxGap := time.Duration(0)
		for range 2000 {
			gap := time.Duration(1+rng.IntN(30)) * time.Millisecond
			maxGap = max(maxGap, gap)
			now = now.Add(gap)
			if rng.IntN(3) > 0 {
				leo += int64(rng.IntN(20))
			}
			switch r := rng.IntN(10); {
			case r < 6: // reach a log end from up to 40 fetches ago
				off = max(off, hist[max(len(hist)-1-rng.IntN(40), 0)].leo)
			case r < 9: // no progress
			default: // everything
				off = leo
			}
			if err, _ := l.FollowerFetch(now, 2, -1, off, leo); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			hist = append(hist, fetch{now, leo})
			// hist's log ends ascend: the last one the offset reaches.
			exact := t0
			if i := sort.Search(len(hist), func(i int) bool { return hist[i].leo > off }); i > 0 {
				exact = hist[i-1].at
			}
			got, _ := l.Follower(2)
			if got.LastCaughtUp.After(exact) {
				t.Fatalf("seed %d at %v: caught up as of %v, later than %v (offset %d)", seed, now.Sub(t0), got.LastCaughtUp.Sub(t0), exact.Sub(t0), off)
			}
			if slack := lagMax/maxMarks + maxGap; exact.Sub(got.LastCaughtUp) > slack {
				t.Fatalf("seed %d at %v: caught up as of %v, %v before %v (slack %v)", seed, now.Sub(t0), got.LastCaughtUp.Sub(t0),
					exact.Sub(got.LastCaughtUp), exact.Sub(t0), slack)
			}
			if len(got.marks) > maxMarks {
				t.Fatalf("seed %d: %d marks", seed, len(got.marks))
			}
		}
	}
}

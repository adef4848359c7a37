package replica

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestLeaderHWProperty drives a Leader with seeded random events: leader
// appends, follower fetches (each follower's log end only grows, as an ISR
// member's does under one leader), ticks, and the controller committing or
// refusing proposals. After every event the HW must not have moved back,
// must not exceed the leader's log end, and must not exceed the log end of
// any member of the committed ISR that has fetched (a member that has not
// fetched holds the HW where it started). Stale controller states and
// fenced fetches are redelivered along the way and must change nothing.
func TestLeaderHWProperty(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 0x6b77616c))
		replicas := []int32{1, 2, 3, 4}
		now := t0
		leo := int64(rng.IntN(5))
		hw0 := int64(rng.IntN(int(leo) + 1))
		pe := int32(1)
		l := NewLeader(LeaderState{Self: 1, LeaderEpoch: 3, PartitionEpoch: pe, Replicas: replicas, ISR: []int32{1, 2, 3}}, leo, hw0, now, 50*time.Millisecond, 2)
		fleo := map[int32]int64{2: 0, 3: 0, 4: 0}
		var proposed *ProposeISR
		lastHW := l.HighWatermark()
		take := func(acts []Action) {
			for _, a := range acts {
				switch a := a.(type) {
				case AdvanceHW:
					if a.HW != l.HighWatermark() {
						t.Fatalf("seed %d: action hw %d, machine %d", seed, a.HW, l.HighWatermark())
					}
				case ProposeISR:
					if proposed != nil {
						t.Fatalf("seed %d: second proposal %v while %v in flight", seed, a, *proposed)
					}
					proposed = &a
				}
			}
		}
		for step := range 400 {
			now = now.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
			switch k := rng.IntN(10); {
			case k < 2:
				leo += int64(rng.IntN(4))
				take(l.MaybeAdvanceHW(leo))
			case k < 7:
				r := int32(2 + rng.IntN(3))
				if rng.IntN(4) > 0 { // a fetch reports a log end at or past its last
					fleo[r] = min(leo, fleo[r]+int64(rng.IntN(4)))
				}
				err, acts := l.FollowerFetch(now, r, 3, fleo[r], leo)
				if err != nil {
					t.Fatalf("seed %d: fetch refused: %v", seed, err)
				}
				take(acts)
				take(l.MaybeAdvanceHW(leo))
			case k < 8:
				take(l.Tick(now, leo))
				// A stale controller state (an older partition epoch) and a
				// fetch at an older leader epoch, redelivered: both change
				// nothing.
				isr, prog := l.ISR(), l.FollowerLEOs()
				if acts := l.ISRChanged(pe, replicas, []int32{1}, leo, now); len(acts) != 0 || !slices.Equal(l.ISR(), isr) {
					t.Fatalf("seed %d: stale ISR change applied: %v", seed, acts)
				}
				if err, _ := l.FollowerFetch(now, 2, 2, leo, leo); err == nil || l.FollowerLEOs()[2] != prog[2] {
					t.Fatalf("seed %d: fenced fetch applied (err %v)", seed, err)
				}
			default:
				if proposed == nil {
					continue
				}
				if rng.IntN(3) == 0 {
					l.ISRRefused()
				} else {
					pe++
					take(l.ISRChanged(pe, replicas, proposed.ISR, leo, now))
				}
				proposed = nil
			}
			hw := l.HighWatermark()
			if hw < lastHW {
				t.Fatalf("seed %d step %d: HW went back %d -> %d", seed, step, lastHW, hw)
			}
			if hw > leo {
				t.Fatalf("seed %d step %d: HW %d past the leader's log end %d", seed, step, hw, leo)
			}
			for _, r := range l.ISR() {
				if r == 1 {
					continue
				}
				p, _ := l.Follower(r)
				if p.LEO >= 0 && hw > max(p.LEO, hw0) {
					t.Fatalf("seed %d step %d: HW %d past ISR member %d's log end %d (isr %v)", seed, step, hw, r, p.LEO, l.ISR())
				}
				if p.LEO < 0 && hw != hw0 {
					t.Fatalf("seed %d step %d: HW %d moved while ISR member %d never fetched", seed, step, hw, r)
				}
			}
			if !slices.Contains(l.ISR(), 1) {
				t.Fatalf("seed %d: the leader left its ISR", seed)
			}
			lastHW = hw
		}
	}
}

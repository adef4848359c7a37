package replica

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTruncationFindsDivergence generates seeded histories of three
// replicas under random leader changes (a leader appends at its epoch only
// after it first appends, as kwal's leader caches it; followers copy exact
// prefixes; elections may be unclean), so logs obey log matching. Whenever
// a follower truncates against the current leader, the offset must be
// exactly where its log stops agreeing with the leader's: never above (a
// divergent record kept), never below (a shared record dropped). After it
// fetches the rest, its log equals the leader's.
func TestTruncationFindsDivergence(t *testing.T) {
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 101))
		logs := []*simLog{{}, {}, {}}
		leader, epoch := 0, int32(1)
		for step := range 60 {
			switch k := rng.IntN(10); {
			case k < 4:
				for range 1 + rng.IntN(3) {
					logs[leader].recs = append(logs[leader].recs, epoch)
				}
			case k < 8:
				f := rng.IntN(3)
				if f == leader {
					continue
				}
				l, fl := logs[leader], logs[f]
				asks := 0
				to, err := TruncationOffset(fl.epochs(), int64(len(fl.recs)), func(e int32) (int32, int64, error) {
					asks++
					a := l.answer(e)
					return a.Epoch, a.EndOffset, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				want := commonPrefix(fl.recs, l.recs)
				if to != want {
					t.Fatalf("seed %d step %d: follower %v, leader %v: truncate to %d, logs agree up to %d",
						seed, step, fl.recs, l.recs, to, want)
				}
				if asks > len(fl.epochs()) {
					t.Fatalf("seed %d: %d queries for %d epochs", seed, asks, len(fl.epochs()))
				}
				fl.truncate(to)
				// Fetch part or all of the rest.
				end := len(fl.recs) + rng.IntN(len(l.recs)-len(fl.recs)+1)
				fl.recs = append(fl.recs, l.recs[len(fl.recs):end]...)
				if !slices.Equal(fl.recs, l.recs[:end]) {
					t.Fatalf("seed %d: follower %v is not a prefix of leader %v", seed, fl.recs, l.recs)
				}
			default:
				leader = rng.IntN(3)
				epoch++
			}
		}
	}
}

func commonPrefix(a, b []int32) int64 {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return int64(n)
}

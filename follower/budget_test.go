package follower

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/kwal/kwal/metadata"
)

// TestReadBudgetSpentWithAHedge is TestFallbackBudgetIsTimeNotAttempts
// with hedged reads: object storage hangs, so every read sends its hedge
// after HedgeDelay and then waits on both GETs. The driver watches the
// reads' budgets (watchFlights): once FallbackAfter has passed on the
// clock since the reads started, it cancels them, both GETs of each answer
// with errReadBudget, and the follower takes the log from the leader at
// that instant, not before.
func TestReadBudgetSpentWithAHedge(t *testing.T) {
	const budget, hedge = 1 * time.Second, 10 * time.Millisecond
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(111, 112))
	leader := r.addLeader(tp0, 0)
	fillLeader(t, leader, rng, 60, 0)
	for _, o := range packObjects(t, r.put, "", cutSlices(t, tp0, leader, 0, leader.LogEndOffset(), rng, 2<<10), rng, 1, metadata.CodecNone) {
		r.ix.publish(o.key, o.entries...)
	}
	store := &downStore{Store: r.put, hang: true}
	r.read = store
	r.cfg = func(c *Config) {
		c.FallbackAfter, c.HedgeDelay = budget, hedge
		c.Jitter = func() float64 { return 0 }
	}
	r.start()
	// The driver waiting for a read's hedge time before the clock moves,
	// so that a hedge is due at the first step, well before the budget.
	waitFor(t, "a GET in the dead store and the driver's timer at its hedge time", nil, 0, func() bool {
		next, ok := r.clk.Next()
		return store.calls.Load() > 0 && ok && !next.After(t0.Add(hedge))
	}, func() string { next, _ := r.clk.Next(); return fmt.Sprint(next.Sub(t0)) })
	for r.clk.Now().Sub(t0) < budget-100*time.Millisecond {
		r.clk.Advance(100 * time.Millisecond)
		if n := r.leader.fetches.Load(); n != 0 {
			t.Fatalf("fetched from the leader %d times at %v, before the budget of %v", n, r.clk.Now().Sub(t0), budget)
		}
	}
	// The hedges went out (each read's second GET hangs too), and no GET
	// has answered.
	waitFor(t, "hedges", nil, 0, func() bool { return r.f.Metrics().Hedges > 0 }, func() string { return fmt.Sprint(r.f.Metrics()) })
	if m := r.f.Metrics(); m.ReadErrors != 0 {
		t.Fatalf("GETs answered before the budget was spent: %+v", m)
	}
	r.clk.Advance(t0.Add(budget).Sub(r.clk.Now()))
	r.waitCaughtUp(false)
	// Every GET sent, hedges included, was cancelled: none is left hanging
	// (the clock no longer moves, so no read or probe starts).
	waitFor(t, "every GET cancelled", nil, 0, func() bool {
		m := r.f.Metrics()
		return m.GETs > m.Hedges && m.ReadErrors == m.GETs
	}, func() string { return fmt.Sprint(r.f.Metrics()) })
	if at := r.clk.Now().Sub(t0); at != budget {
		t.Fatalf("caught up at %v of clock, want %v", at, budget)
	}
	r.checkAll()
	if m := r.f.Metrics(); m.LeaderBytes == 0 || m.Fallbacks != 1 || m.HedgeWins != 0 {
		t.Fatalf("want one fallback serving the log and no hedge winning: %+v", m)
	}
}

// TestPlanChainsMaxReadsIsAPrefix: with MaxReads k, PlanChains returns
// the first k reads of the plan without a bound, whatever the chains (the
// driver asks for only the reads it can start, and PlanChains stops once
// it has them).
func TestPlanChainsMaxReadsIsAPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tps := []metadata.TopicPartition{tpA, tpB, {Topic: "c", Partition: 3}}
	for round := range 300 {
		chains := map[metadata.TopicPartition][]Located{}
		for _, tp := range tps[:1+rng.IntN(len(tps))] {
			var ls []Located
			base := int64(0)
			for range rng.IntN(12) {
				n := 1 + rng.Int64N(5)
				key := fmt.Sprintf("o%d", rng.IntN(4))
				ls = append(ls, loc(key, tp, base, base+n-1, rng.Int64N(20)*100, 1+rng.Int64N(150)))
				base += n
			}
			chains[tp] = ls
		}
		cfg := PlanConfig{MaxRangeBytes: rng.Int64N(600), MergeGapBytes: rng.Int64N(120)}
		all := PlanChains(chains, cfg)
		for k := 1; k <= len(all)+1; k++ {
			cfg.MaxReads = k
			got := PlanChains(chains, cfg)
			want := all[:min(k, len(all))]
			if !reflect.DeepEqual(spans(got), spans(want)) || !reflect.DeepEqual(append([]Read{}, got...), append([]Read{}, want...)) {
				t.Fatalf("round %d, MaxReads %d: got %v, want the first reads of %v", round, k, spans(got), spans(all))
			}
		}
	}
}

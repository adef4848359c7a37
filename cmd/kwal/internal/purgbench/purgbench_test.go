package purgbench

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kwal/kwal/purgatory"
)

// BenchmarkT1 is workload T1 as a Go benchmark: 10,000 pending timers, each
// op cancels one and schedules a new one (1..200 ms). Each contestant also
// reports its time relative to kwal's wheel, measured in the same process.
func BenchmarkT1(b *testing.B) {
	for _, c := range Contestants {
		b.Run(fmt.Sprintf("timer=%s", c), func(b *testing.B) {
			b.ReportAllocs()
			sys := newTimer(c)
			defer sys.close()
			rng := rand.New(rand.NewPCG(1, 2))
			nop := func(*op) {}
			slots := make([]*op, 10_000)
			for i := range slots {
				o := &op{onFire: nop}
				o.fireFn = o.fire
				sys.schedule(o, timeout1to200(rng))
				slots[i] = o
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := rng.IntN(len(slots))
				o := slots[j]
				sys.cancel(o)
				if !sys.schedule(o, timeout1to200(rng)) {
					o = &op{onFire: nop}
					o.fireFn = o.fire
					sys.schedule(o, timeout1to200(rng))
					slots[j] = o
				}
			}
		})
	}
}

// BenchmarkT1Ratio runs kwal and each other contestant back to back on the
// same op count and reports other/kwal as a ratio (above 1: kwal faster).
func BenchmarkT1Ratio(b *testing.B) {
	for _, c := range []string{Runtime, Russell} {
		b.Run(fmt.Sprintf("vs=%s", c), func(b *testing.B) {
			b.ReportAllocs()
			n := max(b.N, 10_000)
			k := T1(Kwal, 10_000, n, 1, 1)
			o := T1(c, 10_000, n, 1, 1)
			b.ReportMetric(k.NsPerOp, "kwal-ns/op")
			b.ReportMetric(o.NsPerOp, c+"-ns/op")
			b.ReportMetric(o.NsPerOp/k.NsPerOp, "ratio")
		})
	}
}

func TestQuickWorkloadsProduceFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real timers for about a second")
	}
	f := T1(Kwal, 1000, 20_000, 2, 1)
	if f.NsPerOp <= 0 {
		t.Fatalf("T1 %+v", f)
	}
	g := T2(Kwal, 20_000, 1)
	if g.Fired != g.Expected || g.P99LateMs < 0 {
		t.Fatalf("T2 %+v", g)
	}
	p := P(Kwal, 20_000, 100*time.Millisecond, Mixes[0], ViaForce, 1)
	if p.Rate <= 0 || p.Expected <= 0 {
		t.Fatalf("P %+v", p)
	}
}

func TestMedianAndRatios(t *testing.T) {
	m := median([]Figures{{NsPerOp: 3}, {NsPerOp: 1}, {NsPerOp: 2}})
	if m.NsPerOp != 2 {
		t.Fatalf("median %v", m.NsPerOp)
	}
	rows := []Row{
		{Contestant: Kwal, Workload: "T1 g=1", Median: Figures{NsPerOp: 100}},
		{Contestant: Runtime, Workload: "T1 g=1", Median: Figures{NsPerOp: 400}},
		{Contestant: Russell, Workload: "T1 g=1", Median: Figures{NsPerOp: 300}},
		{Contestant: Null, Workload: "T1 g=1", Median: Figures{NsPerOp: 10}},
	}
	ratios(rows)
	if rows[0].Ratio != 3 || rows[2].Ratio != 1.0/3 || rows[3].Ratio != 0 {
		t.Fatalf("ratios %+v", rows)
	}
}

// TestPurgatoryUnderEveryTimer is the acceptance check of the timers P and
// I plug into the purgatory: under each, requests complete or expire
// exactly once, expiries are not early (but for russellluo's tick), and
// nothing is left pending.
func TestPurgatoryUnderEveryTimer(t *testing.T) {
	for _, c := range []string{Kwal, Runtime, Russell} {
		t.Run("timer="+c, func(t *testing.T) {
			early := int64(0)
			if c == Russell {
				early = int64(time.Millisecond)
			}
			clock := purgatory.NewRealClock()
			p := newPurgatory(c, clock)
			const n = 300
			tl := newTally(n)
			reqs := make([]*request, n)
			for i := range reqs {
				r := &request{clock: clock, tally: tl, id: int32(i), keys: [3]int{i % 5, 5 + i%3, 9}}
				r.Timeout = time.Duration(1+i%5) * time.Millisecond
				if i%3 == 1 {
					// Forced complete right after the watch: a timeout no
					// scheduling delay can reach, so expiry never races the
					// force (a 3 ms one lost to it once in CI under load).
					r.Timeout = time.Hour
				}
				r.completesAt = clock.Now() + int64(time.Hour) // expires
				if i%3 == 0 {
					r.completesAt = 0 // completes at once
				}
				p.TryCompleteElseWatch(r, r.keys[:])
				if i%3 == 1 {
					r.ForceComplete() // the completer's path
				}
				reqs[i] = r
			}
			select {
			case <-tl.all:
			case <-time.After(5 * time.Second):
				t.Fatalf("%d of %d done", tl.done.Load(), n)
			}
			for i, r := range reqs {
				want := purgatory.Completed
				if i%3 == 2 {
					want = purgatory.Expired
				}
				if r.Outcome() != want {
					t.Fatalf("request %d: %v, want %v", i, r.Outcome(), want)
				}
				// RussellLuo files by floor, as Kafka does: up to a tick early.
				if want == purgatory.Expired && tl.late[i] < -early {
					t.Fatalf("request %d expired %v early", i, time.Duration(-tl.late[i]))
				}
			}
			if tl.expired.Load() != n/3 || tl.done.Load() != n {
				t.Fatalf("expired %d done %d", tl.expired.Load(), tl.done.Load())
			}
			if m := p.Metrics(); m.Pending != 0 || m.Watchers != 0 {
				t.Fatalf("metrics %+v", m)
			}
			p.Shutdown()
		})
	}
}

package purgbench

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
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
	p := P(Kwal, 20_000, 100*time.Millisecond, Mixes[0], 1)
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

package purgatory

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

type nopTask struct{}

func (nopTask) Expire() {}

// BenchmarkScheduleCancel is T1 on the bare wheel: cancel a random pending
// entry and schedule it again, timeout uniform in 1..200 ms.
func BenchmarkScheduleCancel(b *testing.B) {
	for _, pending := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			b.ReportAllocs()
			c := &ManualClock{}
			tm, err := NewTimer(TimerConfig{Clock: c, Manual: true})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 1))
			es := make([]TimerEntry, pending)
			for i := range es {
				_ = tm.After(&es[i], time.Duration(1+rng.IntN(200))*time.Millisecond, nopTask{})
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e := &es[rng.IntN(pending)]
				tm.Cancel(e)
				_ = tm.After(e, time.Duration(1+rng.IntN(200))*time.Millisecond, nopTask{})
			}
		})
	}
}

type benchOp struct {
	Op
	ready bool
}

func (o *benchOp) TryComplete() bool { return o.ready }
func (o *benchOp) OnComplete()       {}
func (o *benchOp) OnExpiration()     {}

// BenchmarkWatchComplete watches an op under keys and completes it through
// CheckAndComplete.
func BenchmarkWatchComplete(b *testing.B) {
	for _, keys := range []int{1, 3} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			b.ReportAllocs()
			p, _ := manualPurgatory(b)
			ks := make([]string, keys)
			for i := range ks {
				ks[i] = fmt.Sprint("topic-", i)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o := &benchOp{}
				o.Timeout = time.Second
				p.TryCompleteElseWatch(o, ks)
				o.ready = true
				p.CheckAndComplete(ks[0])
			}
		})
	}
}

// BenchmarkSteadyState is workload P's purgatory work without the clock:
// pending operations over 100 keys, 3 keys each; every op completes a
// random pending one with ForceComplete and hands in a new one, 200 ms
// timeout. Allocations include the operation itself.
func BenchmarkSteadyState(b *testing.B) {
	for _, pending := range []int{1_000, 20_000} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			b.ReportAllocs()
			c := &ManualClock{}
			p, err := New[int](Config{Timer: TimerConfig{Clock: c, Manual: true}})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			add := func() *benchOp {
				o := &benchOp{}
				o.Timeout = 200 * time.Millisecond
				k0 := rng.IntN(100)
				keys := [3]int{k0, (k0 + 1 + rng.IntN(99)) % 100, (k0 + 50) % 100}
				p.TryCompleteElseWatch(o, keys[:])
				return o
			}
			ops := make([]*benchOp, pending)
			for i := range ops {
				ops[i] = add()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := rng.IntN(pending)
				ops[j].ForceComplete()
				ops[j] = add()
			}
		})
	}
}

package purgbench

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestExpT2(t *testing.T) {
	n := 1_000_000
	sys := newTimer(Kwal)
	defer sys.close()
	c := newClock()
	rng := rand.New(rand.NewPCG(1, 2))
	ops := make([]op, n)
	var fired atomic.Int64
	allDone := make(chan struct{})
	onFire := func(o *op) {
		o.late = c.now() - o.deadline
		if fired.Add(1) == int64(n) {
			close(allDone)
		}
	}
	timeouts := make([]time.Duration, n)
	for i := range ops {
		ops[i].onFire = onFire
		ops[i].fireFn = ops[i].fire
		timeouts[i] = timeout1to200(rng)
	}
	runtime.GC()
	t0 := c.now()
	for i := range ops {
		o := &ops[i]
		o.deadline = c.now() + int64(timeouts[i])
		sys.schedule(o, timeouts[i])
	}
	t1 := c.now()
	<-allDone
	t2 := c.now()
	t.Logf("schedule %v total %v", time.Duration(t1-t0), time.Duration(t2-t0))
	// lateness by deadline bucket of 10ms
	var mx [40]int64
	for i := range ops {
		b := (ops[i].deadline - t0) / int64(10*time.Millisecond)
		if b < 40 {
			mx[b] = max(mx[b], ops[i].late)
		}
	}
	for b, v := range mx {
		t.Logf("deadline %3dms..: max late %v", b*10, time.Duration(v))
	}
}

func TestExpT2Fig(t *testing.T) {
	for i := 0; i < 3; i++ {
		f := T2(Kwal, 1_000_000, uint64(i+1))
		t.Logf("p99 %.2f max %.2f cpu %.0f gor %.0f", f.P99LateMs, f.MaxLateMs, f.CPUNsPerTimer, f.PeakGoroutines)
	}
}

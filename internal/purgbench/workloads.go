package purgbench

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Figures is what one run of one workload measured. Zero means not
// measured for that workload.
type Figures struct {
	NsPerOp        float64 `json:"ns_per_op,omitempty"`
	AllocsPerOp    float64 `json:"allocs_per_op,omitempty"`
	CPUNsPerTimer  float64 `json:"cpu_ns_per_timer,omitempty"`
	NetCPUNsPerReq float64 `json:"net_cpu_ns_per_request,omitempty"`
	P99LateMs      float64 `json:"p99_lateness_ms,omitempty"`
	MaxLateMs      float64 `json:"max_lateness_ms,omitempty"`
	TargetRate     float64 `json:"target_rate,omitempty"`
	Rate           float64 `json:"rate,omitempty"`
	Fired          float64 `json:"fired,omitempty"`
	Expected       float64 `json:"expected,omitempty"`
	PeakGoroutines float64 `json:"peak_goroutines,omitempty"`
	CPUMsPerSec    float64 `json:"cpu_ms_per_s,omitempty"`
}

type clock struct{ base time.Time }

func newClock() clock            { return clock{time.Now()} }
func (c clock) now() int64       { return int64(time.Since(c.base)) }
func (c clock) fn() func() int64 { return c.now }

// cpuNanos is the process's user+system CPU time.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

func p99(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return float64(xs[(len(xs)*99)/100]) / 1e6
}

func timeout1to200(rng *rand.Rand) time.Duration {
	return time.Duration(1+rng.IntN(200)) * time.Millisecond
}

// T1 is the steady state: pending timers, then ops of "cancel a random
// pending timer, schedule a new one with timeout uniform in 1..200 ms",
// split over goroutines.
func T1(name string, pending, ops, goroutines int, seed uint64) Figures {
	sys := newTimer(name)
	defer sys.close()
	nop := func(*op) {}
	slots := make([][]*op, goroutines)
	rngs := make([]*rand.Rand, goroutines)
	for g := range slots {
		rngs[g] = rand.New(rand.NewPCG(seed, uint64(g)))
		slots[g] = make([]*op, pending/goroutines)
		for i := range slots[g] {
			o := &op{onFire: nop}
			o.fireFn = o.fire
			sys.schedule(o, timeout1to200(rngs[g]))
			slots[g][i] = o
		}
	}
	runtime.GC()
	per := ops / goroutines
	var wg sync.WaitGroup
	m0 := mallocs()
	start := time.Now()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(mine []*op, rng *rand.Rand) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				j := rng.IntN(len(mine))
				o := mine[j]
				sys.cancel(o)
				if !sys.schedule(o, timeout1to200(rng)) {
					o = &op{onFire: nop}
					o.fireFn = o.fire
					sys.schedule(o, timeout1to200(rng))
					mine[j] = o
				}
			}
		}(slots[g], rngs[g])
	}
	wg.Wait()
	el := time.Since(start)
	m1 := mallocs()
	total := float64(per * goroutines)
	return Figures{NsPerOp: float64(el.Nanoseconds()) / total, AllocsPerOp: float64(m1-m0) / total}
}

// T2 is burst expiry: schedule n timers (timeout uniform in 1..200 ms) and
// let every one fire.
func T2(name string, n int, seed uint64) Figures {
	sys := newTimer(name)
	defer sys.close()
	c := newClock()
	rng := rand.New(rand.NewPCG(seed, 2))
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
	peak := runtime.NumGoroutine()
	stopSample := make(chan struct{})
	sampled := make(chan int)
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		p := 0
		for {
			select {
			case <-stopSample:
				sampled <- p
				return
			case <-t.C:
				p = max(p, runtime.NumGoroutine())
			}
		}
	}()
	cpu0 := cpuNanos()
	for i := range ops {
		o := &ops[i]
		o.deadline = c.now() + int64(timeouts[i])
		sys.schedule(o, timeouts[i])
	}
	select {
	case <-allDone:
	case <-time.After(30 * time.Second):
	}
	cpu1 := cpuNanos()
	close(stopSample)
	peak = max(peak, <-sampled)
	late := make([]int64, n)
	var maxLate int64
	for i := range ops {
		late[i] = ops[i].late
		maxLate = max(maxLate, late[i])
	}
	return Figures{
		CPUNsPerTimer:  float64(cpu1-cpu0) / float64(n),
		P99LateMs:      p99(late),
		MaxLateMs:      float64(maxLate) / 1e6,
		Fired:          float64(fired.Load()),
		Expected:       float64(n),
		PeakGoroutines: float64(peak),
	}
}

// Mix is a log-normal completion-delay distribution.
type Mix struct {
	Name     string
	Median   time.Duration
	P75      time.Duration
	Timeout  time.Duration
	mu, sigm float64
}

// Mixes are Kafka's low and high timeout mixes.
var Mixes = []Mix{
	{Name: "low", Median: 20 * time.Millisecond, P75: 60 * time.Millisecond, Timeout: 200 * time.Millisecond},
	{Name: "high", Median: 200 * time.Millisecond, P75: 400 * time.Millisecond, Timeout: 200 * time.Millisecond},
}

func (m Mix) delay(rng *rand.Rand) time.Duration {
	mu := math.Log(float64(m.Median))
	sigma := (math.Log(float64(m.P75)) - mu) / 0.6744897501960817
	return time.Duration(math.Exp(mu + sigma*rng.NormFloat64()))
}

type completion struct {
	at int64
	o  *pOp
}

// P is Kafka's TestPurgatoryPerformance: Poisson arrivals at rate per second
// for dur, each request watching 3 of 100 keys and completed through
// checkAndComplete by a completer goroutine after a log-normal delay, or
// expired by its timeout. name "" runs the load alone (no purgatory) to
// measure the harness's own CPU.
func P(name string, rate float64, dur time.Duration, mix Mix, seed uint64) Figures {
	c := newClock()
	var l *layer
	var sys timerSys
	if name != "" {
		sys = newTimer(name)
		l = newLayer(sys, c.fn())
	}
	rng := rand.New(rand.NewPCG(seed, uint64(rate)))
	n := int(rate * dur.Seconds())
	ops := make([]*pOp, 0, n)
	feed := make(chan completion, 1<<16)
	completerDone := make(chan struct{})
	go completer(c, l, feed, completerDone)
	expected := 0
	onFire := func(x *op) { l.expire(x) }
	runtime.GC()
	cpu0 := cpuNanos()
	start := c.now()
	next := float64(start)
	for len(ops) < n {
		now := c.now()
		if ahead := int64(next) - now; ahead > int64(200*time.Microsecond) {
			time.Sleep(time.Duration(ahead))
			now = c.now()
		}
		for len(ops) < n && int64(next) <= now {
			o := &pOp{}
			o.op.onFire = onFire
			o.op.fireFn = o.op.fire
			k0 := rng.IntN(100)
			k1 := (k0 + 1 + rng.IntN(99)) % 100
			k2 := k0
			for k2 == k0 || k2 == k1 {
				k2 = rng.IntN(100)
			}
			o.keys = [3]int{k0, k1, k2}
			d := mix.delay(rng)
			if d >= mix.Timeout {
				expected++
			} else {
				feed <- completion{at: now + int64(d), o: o}
			}
			if l != nil {
				l.tryCompleteElseWatch(o, mix.Timeout)
			}
			ops = append(ops, o)
			next += rng.ExpFloat64() / rate * 1e9
		}
	}
	genEnd := c.now()
	close(feed)
	<-completerDone
	// Wait for the timeouts of the last requests.
	if l != nil {
		deadline := time.Now().Add(mix.Timeout + 500*time.Millisecond)
		for l.completed.Load()+l.expired.Load() < int64(n) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	cpu1 := cpuNanos()
	f := Figures{
		TargetRate:    rate,
		Rate:          float64(n) / (float64(genEnd-start) / 1e9),
		Expected:      float64(expected),
		CPUNsPerTimer: float64(cpu1-cpu0) / float64(n),
	}
	if l != nil {
		f.Fired = float64(l.expired.Load())
		var late []int64
		for _, o := range ops {
			if o.done.Load() == 2 {
				late = append(late, o.op.late)
			}
		}
		f.P99LateMs = p99(late)
		if len(late) > 0 {
			f.MaxLateMs = float64(late[len(late)-1]) / 1e6
		}
		l.shutdown(ops)
		sys.close()
	}
	return f
}

// completer marks requests ready when their delay has passed and calls
// checkAndComplete on their first key, like Kafka's CompletionQueue.
func completer(c clock, l *layer, feed <-chan completion, done chan<- struct{}) {
	defer close(done)
	var h []completion // min-heap by at
	push := func(x completion) {
		h = append(h, x)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if h[p].at <= h[i].at {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
	}
	pop := func() completion {
		x := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for i := 0; ; {
			m, lc := i, 2*i+1
			if lc < len(h) && h[lc].at < h[m].at {
				m = lc
			}
			if lc+1 < len(h) && h[lc+1].at < h[m].at {
				m = lc + 1
			}
			if m == i {
				break
			}
			h[m], h[i] = h[i], h[m]
			i = m
		}
		return x
	}
	open := true
	for open || len(h) > 0 {
		// Take whatever arrived.
	drain:
		for open {
			select {
			case x, ok := <-feed:
				if !ok {
					open = false
					break drain
				}
				push(x)
			default:
				break drain
			}
		}
		now := c.now()
		for len(h) > 0 && h[0].at <= now {
			x := pop()
			x.o.ready.Store(true)
			if l != nil {
				l.checkAndComplete(x.o.keys[0])
			}
		}
		wait := int64(time.Millisecond)
		if len(h) > 0 {
			wait = min(wait, h[0].at-now)
		}
		if wait > 0 {
			time.Sleep(time.Duration(wait))
		}
	}
}

// I is idle: pending operations with long timeouts, then CPU per second
// over dur.
func I(name string, pending int, dur time.Duration) Figures {
	c := newClock()
	sys := newTimer(name)
	l := newLayer(sys, c.fn())
	ops := make([]*pOp, pending)
	for i := range ops {
		o := &pOp{}
		o.op.onFire = func(x *op) { l.expire(x) }
		o.op.fireFn = o.op.fire
		o.keys = [3]int{i % 100, (i + 1) % 100, (i + 2) % 100}
		l.tryCompleteElseWatch(o, 60*time.Second)
		ops[i] = o
	}
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	cpu0 := cpuNanos()
	time.Sleep(dur)
	cpu1 := cpuNanos()
	l.shutdown(ops)
	sys.close()
	return Figures{CPUMsPerSec: float64(cpu1-cpu0) / 1e6 / dur.Seconds()}
}

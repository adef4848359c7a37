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

	"github.com/kwal/kwal/purgatory"
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

// delay draws a completion latency, truncated to whole milliseconds as
// Kafka's LatencySamples does: a request queued for completion (latency
// under the timeout) then completes at least a millisecond before it would
// expire, which the completer's millisecond sleeps need.
func (m Mix) delay(rng *rand.Rand) time.Duration {
	mu := math.Log(float64(m.Median))
	sigma := (math.Log(float64(m.P75)) - mu) / 0.6744897501960817
	d := time.Duration(math.Exp(mu + sigma*rng.NormFloat64()))
	return d.Truncate(time.Millisecond)
}

// Completion is how P's completer completes a request whose time has come.
type Completion int

const (
	// ViaForce calls ForceComplete on the request, as Kafka's
	// CompletionQueue does: O(1) whatever the watcher lists hold.
	ViaForce Completion = iota
	// ViaCheck calls CheckAndComplete on the request's first key, which
	// tries every request watching that key: the broker's path when a
	// partition's state changes, and O(list) per completion.
	ViaCheck
)

func (c Completion) String() string {
	if c == ViaCheck {
		return "check"
	}
	return "force"
}

// P is Kafka's TestPurgatoryPerformance: Poisson arrivals at rate per second
// for dur, each request watching 3 of 100 keys (Kafka draws one set of 3
// for all requests; we draw per request, which spreads the watcher lists).
// A request whose log-normal latency is under the timeout goes to a
// completer goroutine that completes it when its time comes (via); the
// rest expire. TryComplete is true once the latency has passed, as in
// Kafka. name "" runs the load alone, without a purgatory, to measure the
// harness's own CPU.
func P(name string, rate float64, dur time.Duration, mix Mix, via Completion, seed uint64) Figures {
	clock := purgatory.NewRealClock()
	var p *purgatory.Purgatory[int]
	if name != "" {
		p = newPurgatory(name, clock)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(rate)))
	n := int(rate * dur.Seconds())
	t := newTally(n)
	feed := make(chan *request, 1<<16)
	completerDone := make(chan struct{})
	go completer(clock, p, via, feed, completerDone)
	expected := 0
	runtime.GC()
	cpu0 := cpuNanos()
	start := clock.Now()
	next := float64(start)
	for i := 0; i < n; {
		now := clock.Now()
		if ahead := int64(next) - now; ahead > 0 {
			// Sleep, never spin: a spinning generator would take a core
			// from the purgatory on a small machine. Arrivals that fall
			// due meanwhile are issued together, as Kafka's generator does
			// at millisecond granularity.
			time.Sleep(time.Duration(ahead))
			continue
		}
		for ; i < n && int64(next) <= now; i++ {
			r := &request{clock: clock, tally: t, id: int32(i)}
			r.Timeout = mix.Timeout
			k0 := rng.IntN(100)
			k1 := (k0 + 1 + rng.IntN(99)) % 100
			k2 := k0
			for k2 == k0 || k2 == k1 {
				k2 = rng.IntN(100)
			}
			r.keys = [3]int{k0, k1, k2}
			d := mix.delay(rng)
			r.completesAt = now + int64(d)
			// Handed in before it is queued: ForceComplete is for
			// operations already in a purgatory. (Kafka queues first.)
			switch {
			case p != nil && p.TryCompleteElseWatch(r, r.keys[:]):
				// Completed at once: its latency truncated to 0 ms, or the
				// generator is that far behind.
			case p == nil && d == 0:
				// The same, without a purgatory.
			case d >= mix.Timeout:
				expected++
			default:
				feed <- r
			}
			next += rng.ExpFloat64() / rate * 1e9
		}
	}
	genEnd := clock.Now()
	close(feed)
	<-completerDone
	if p != nil {
		// Wait for the timeouts of the last requests.
		select {
		case <-t.all:
		case <-time.After(mix.Timeout + 500*time.Millisecond):
		}
	}
	cpu1 := cpuNanos()
	f := Figures{
		TargetRate:    rate,
		Rate:          float64(n) / (float64(genEnd-start) / 1e9),
		Expected:      float64(expected),
		CPUNsPerTimer: float64(cpu1-cpu0) / float64(n),
	}
	if p != nil {
		f.Fired = float64(t.expired.Load())
		var late []int64
		for _, l := range t.late {
			if l != notExpired {
				late = append(late, l)
			}
		}
		f.P99LateMs = p99(late)
		if len(late) > 0 {
			f.MaxLateMs = float64(late[len(late)-1]) / 1e6
		}
		p.Shutdown()
	}
	return f
}

// completer is Kafka's CompletionQueue: a heap of requests by completion
// time, completed when their time comes. It sleeps until the earliest is
// due, at most a millisecond so newly queued requests are seen.
func completer(clock *purgatory.RealClock, p *purgatory.Purgatory[int], via Completion, feed <-chan *request, done chan<- struct{}) {
	defer close(done)
	var h []*request // min-heap by completesAt
	push := func(x *request) {
		h = append(h, x)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if h[p].completesAt <= h[i].completesAt {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
	}
	pop := func() *request {
		x := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h[last] = nil
		h = h[:last]
		for i := 0; ; {
			m, lc := i, 2*i+1
			if lc < len(h) && h[lc].completesAt < h[m].completesAt {
				m = lc
			}
			if lc+1 < len(h) && h[lc+1].completesAt < h[m].completesAt {
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
		now := clock.Now()
		for len(h) > 0 && h[0].completesAt <= now {
			r := pop()
			if p == nil {
				continue
			}
			if via == ViaCheck {
				p.CheckAndComplete(r.keys[0])
			} else {
				r.ForceComplete()
			}
		}
		wait := int64(time.Millisecond)
		if len(h) > 0 {
			wait = min(wait, h[0].completesAt-now)
		}
		if wait > 0 {
			time.Sleep(time.Duration(wait))
		}
	}
}

// I is idle: pending requests with long timeouts, then CPU per second
// over dur.
func I(name string, pending int, dur time.Duration) Figures {
	clock := purgatory.NewRealClock()
	p := newPurgatory(name, clock)
	t := newTally(pending)
	reqs := make([]*request, pending)
	for i := range reqs {
		r := &request{clock: clock, completesAt: math.MaxInt64, tally: t, id: int32(i)}
		r.Timeout = time.Minute
		r.keys = [3]int{i % 100, (i + 1) % 100, (i + 2) % 100}
		p.TryCompleteElseWatch(r, r.keys[:])
		reqs[i] = r
	}
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	cpu0 := cpuNanos()
	time.Sleep(dur)
	cpu1 := cpuNanos()
	p.Shutdown()
	// Shutdown cannot reach the timers of runtime and russellluo.
	for _, r := range reqs {
		r.ForceComplete()
	}
	return Figures{CPUMsPerSec: float64(cpu1-cpu0) / 1e6 / dur.Seconds()}
}

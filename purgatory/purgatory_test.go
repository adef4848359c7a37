package purgatory

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeOp completes when ready is set; it counts its callbacks.
type fakeOp struct {
	Op
	ready       atomic.Bool
	completes   atomic.Int32
	expirations atomic.Int32
	tries       atomic.Int32
}

func (f *fakeOp) TryComplete() bool { f.tries.Add(1); return f.ready.Load() }
func (f *fakeOp) OnComplete()       { f.completes.Add(1) }
func (f *fakeOp) OnExpiration()     { f.expirations.Add(1) }

func newOp(timeout time.Duration) *fakeOp {
	f := &fakeOp{}
	f.Timeout = timeout
	return f
}

func manualPurgatory(t testing.TB) (*Purgatory[string], *ManualClock) {
	t.Helper()
	c := &ManualClock{}
	p, err := New[string](Config{Timer: TimerConfig{Clock: c, Manual: true}, Stripes: 4})
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

func TestCompleteImmediately(t *testing.T) {
	p, _ := manualPurgatory(t)
	op := newOp(time.Second)
	op.ready.Store(true)
	if !p.TryCompleteElseWatch(op, []string{"a"}) {
		t.Fatal("ready op not completed")
	}
	if op.Outcome() != Completed || op.completes.Load() != 1 {
		t.Fatalf("outcome %v completes %d", op.Outcome(), op.completes.Load())
	}
	m := p.Metrics()
	if m.Pending != 0 || m.Watchers != 0 || m.TimerEntries != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestCheckAndCompleteRemovesFromTimerAndLists(t *testing.T) {
	p, c := manualPurgatory(t)
	a, b := newOp(time.Second), newOp(time.Second)
	if p.TryCompleteElseWatch(a, []string{"x", "y"}) || p.TryCompleteElseWatch(b, []string{"y", "z"}) {
		t.Fatal("unready op completed")
	}
	m := p.Metrics()
	if m.Pending != 2 || m.Watchers != 4 || m.Keys != 3 || m.TimerEntries != 2 {
		t.Fatalf("metrics %+v", m)
	}
	if n := p.CheckAndComplete("y"); n != 0 {
		t.Fatalf("completed %d unready ops", n)
	}
	a.ready.Store(true)
	if n := p.CheckAndComplete("y"); n != 1 {
		t.Fatalf("completed %d, want 1", n)
	}
	m = p.Metrics()
	if m.Pending != 1 || m.Watchers != 2 || m.Keys != 2 || m.TimerEntries != 1 {
		t.Fatalf("after completion metrics %+v", m)
	}
	c.Advance(2 * time.Second)
	p.Poll()
	if a.Outcome() != Completed || a.completes.Load() != 1 || a.expirations.Load() != 0 {
		t.Fatalf("a: %v %d %d", a.Outcome(), a.completes.Load(), a.expirations.Load())
	}
	if b.Outcome() != Expired || b.completes.Load() != 1 || b.expirations.Load() != 1 {
		t.Fatalf("b: %v %d %d", b.Outcome(), b.completes.Load(), b.expirations.Load())
	}
	m = p.Metrics()
	if m.Pending != 0 || m.Watchers != 0 || m.Keys != 0 || m.Expired != 1 || m.ExpirationsPerSecond != 0.5 {
		t.Fatalf("final metrics %+v", m)
	}
}

func TestExpiryNeverEarly(t *testing.T) {
	p, c := manualPurgatory(t)
	op := newOp(200 * time.Millisecond)
	p.TryCompleteElseWatch(op, []string{"k"})
	c.Advance(200*time.Millisecond - 1)
	p.Poll()
	if op.IsCompleted() {
		t.Fatal("expired before its timeout")
	}
	c.Advance(1)
	p.Poll()
	if op.Outcome() != Expired {
		t.Fatalf("outcome %v, want expired at the timeout", op.Outcome())
	}
}

func TestShutdownCompletesPendingAndLaterOps(t *testing.T) {
	p, _ := manualPurgatory(t)
	a := newOp(time.Minute)
	p.TryCompleteElseWatch(a, []string{"k", "l", "m", "n", "o", "p"}) // beyond inline nodes
	p.Shutdown()
	p.Shutdown()
	if a.Outcome() != ShutDown || a.completes.Load() != 1 {
		t.Fatalf("a: %v %d", a.Outcome(), a.completes.Load())
	}
	b := newOp(time.Minute)
	if !p.TryCompleteElseWatch(b, []string{"k"}) || b.Outcome() != ShutDown {
		t.Fatalf("op after shutdown: %v", b.Outcome())
	}
	if m := p.Metrics(); m.Pending != 0 || m.Watchers != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestForceCompleteFromOutside(t *testing.T) {
	p, c := manualPurgatory(t)
	op := newOp(time.Second)
	p.TryCompleteElseWatch(op, []string{"k"})
	if !op.ForceComplete() || op.ForceComplete() {
		t.Fatal("ForceComplete must win exactly once")
	}
	c.Advance(time.Hour)
	p.Poll()
	p.Shutdown()
	if op.completes.Load() != 1 || op.Outcome() != Completed {
		t.Fatalf("%v %d", op.Outcome(), op.completes.Load())
	}
}

// TestExactlyOnceProperty plays random interleavings of watch, readiness,
// CheckAndComplete, ForceComplete, clock moves and shutdown on the manual
// clock, against a model of what must have happened to each op.
func TestExactlyOnceProperty(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e"}
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		p, c := manualPurgatory(t)
		var ops []*fakeOp
		var opKeys [][]string
		var deadlines []int64
		shutdownAt := rng.IntN(400)
		for step := 0; step < 400; step++ {
			if step == shutdownAt {
				p.Shutdown()
			}
			switch r := rng.IntN(10); {
			case r < 4:
				op := newOp(time.Duration(rng.IntN(50)) * time.Millisecond)
				op.ready.Store(rng.IntN(8) == 0)
				ks := make([]string, 1+rng.IntN(6))
				for i := range ks {
					ks[i] = keys[rng.IntN(len(keys))]
				}
				wasReady := op.ready.Load()
				got := p.TryCompleteElseWatch(op, ks)
				if wasReady && op.Outcome() == Pending {
					t.Fatalf("seed %d: ready op pending", seed)
				}
				if got != op.IsCompleted() {
					t.Fatalf("seed %d: returned %v, completed %v", seed, got, op.IsCompleted())
				}
				ops = append(ops, op)
				opKeys = append(opKeys, ks)
				deadlines = append(deadlines, c.Now()+int64(op.Timeout))
			case r < 6 && len(ops) > 0:
				i := rng.IntN(len(ops))
				ops[i].ready.Store(true)
				k := opKeys[i][rng.IntN(len(opKeys[i]))]
				before := ops[i].IsCompleted()
				p.CheckAndComplete(k)
				if !before && !ops[i].IsCompleted() {
					t.Fatalf("seed %d: ready op %d not completed by its key", seed, i)
				}
			case r < 7 && len(ops) > 0:
				ops[rng.IntN(len(ops))].ForceComplete()
			default:
				c.Advance(time.Duration(rng.IntN(20)) * time.Millisecond)
				p.Poll()
				for i, op := range ops {
					if op.Outcome() == Pending && deadlines[i]+int64(time.Millisecond) <= c.Now() {
						t.Fatalf("seed %d: op %d more than a tick late", seed, i)
					}
				}
			}
		}
		p.Shutdown()
		for i, op := range ops {
			if n := op.completes.Load(); n != 1 {
				t.Fatalf("seed %d: op %d completed %d times", seed, i, n)
			}
			wantExp := int32(0)
			if op.Outcome() == Expired {
				wantExp = 1
			}
			if op.expirations.Load() != wantExp || op.Outcome() == Pending {
				t.Fatalf("seed %d: op %d outcome %v expirations %d", seed, i, op.Outcome(), op.expirations.Load())
			}
		}
		if m := p.Metrics(); m.Pending != 0 || m.Watchers != 0 || m.Keys != 0 || m.TimerEntries != 0 {
			t.Fatalf("seed %d: metrics after shutdown %+v", seed, m)
		}
	}
}

// TestStressConcurrent races adders, completers, force-completers, the real
// driver expiring ops and a shutdown; every op must complete exactly once.
func TestStressConcurrent(t *testing.T) {
	p, err := New[int](Config{Timer: TimerConfig{Workers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	const adders, perAdder, nkeys = 4, 2000, 16
	all := make([][]*fakeOp, adders)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for a := 0; a < adders; a++ {
		wg.Add(1)
		go func(a int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(a), 3))
			for i := 0; i < perAdder; i++ {
				op := newOp(time.Duration(rng.IntN(3000)) * time.Microsecond)
				keys := []int{rng.IntN(nkeys), rng.IntN(nkeys), rng.IntN(nkeys)}
				all[a] = append(all[a], op)
				p.TryCompleteElseWatch(op, keys)
				if rng.IntN(3) == 0 {
					op.ready.Store(true)
				}
				if rng.IntN(50) == 0 {
					op.ForceComplete()
				}
			}
		}(a)
	}
	var cwg sync.WaitGroup
	for cpl := 0; cpl < 2; cpl++ {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for k := 0; ; k = (k + 1) % nkeys {
				select {
				case <-stop:
					return
				default:
				}
				p.CheckAndComplete(k)
				if k == 0 {
					_ = p.Metrics()
				}
			}
		}()
	}
	wg.Wait()
	p.Shutdown()
	close(stop)
	cwg.Wait()
	outcomes := map[Outcome]int{}
	for _, ops := range all {
		for _, op := range ops {
			if op.completes.Load() != 1 {
				t.Fatalf("op completed %d times (%v)", op.completes.Load(), op.Outcome())
			}
			if (op.Outcome() == Expired) != (op.expirations.Load() == 1) {
				t.Fatalf("outcome %v with %d expirations", op.Outcome(), op.expirations.Load())
			}
			outcomes[op.Outcome()]++
		}
	}
	if m := p.Metrics(); m.Pending != 0 || m.Watchers != 0 || m.TimerEntries != 0 {
		t.Fatalf("metrics after shutdown %+v", m)
	}
	t.Logf("outcomes %v", outcomes)
}

// TestLeakMillionCompleted checks that completed operations leave nothing
// behind: the live heap after a million watched-and-completed operations
// returns to its baseline.
func TestLeakMillionCompleted(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	p, c := manualPurgatory(t)
	keys := make([][]string, 100)
	for i := range keys {
		keys[i] = []string{string(rune('a' + i%26)), string(rune('A' + i%26)), string(rune('0' + i%10))}
	}
	// Warm the maps and pools, then take the baseline.
	for i := 0; i < 1000; i++ {
		op := newOp(time.Second)
		p.TryCompleteElseWatch(op, keys[i%100])
		op.ready.Store(true)
		p.CheckAndComplete(keys[i%100][0])
	}
	base := liveHeap()
	for i := 0; i < n; i++ {
		op := newOp(time.Second)
		p.TryCompleteElseWatch(op, keys[i%100])
		if i%2 == 0 {
			op.ready.Store(true)
			p.CheckAndComplete(keys[i%100][i%3])
		} else {
			op.ForceComplete()
		}
		if i%100_000 == 0 {
			c.Advance(time.Millisecond)
			p.Poll()
		}
	}
	after := liveHeap()
	m := p.Metrics()
	if m.Pending != 0 || m.Watchers != 0 || m.TimerEntries != 0 {
		t.Fatalf("metrics %+v", m)
	}
	// One op is ~500 B, so a leak of even 1% would be ~5 MB.
	if after > base+1<<20 {
		t.Fatalf("live heap %d B after %d completed ops, baseline %d B", after, n, base)
	}
	t.Logf("live heap %d -> %d B", base, after)
}

func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// fakeTimeouts is a Timeouts that fires only when told.
type fakeTimeouts struct {
	mu     sync.Mutex
	armed  map[Operation]Expirer
	dls    map[Operation]int64
	closed bool
}

var _ Timeouts = (*fakeTimeouts)(nil)

func (f *fakeTimeouts) Arm(op Operation, deadline int64, x Expirer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.armed[op], f.dls[op] = x, deadline
	return nil
}

func (f *fakeTimeouts) Disarm(op Operation) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.armed[op]
	delete(f.armed, op)
	return ok
}

func (f *fakeTimeouts) Close() []Expirer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	var out []Expirer
	for _, x := range f.armed {
		out = append(out, x)
	}
	clear(f.armed)
	return out
}

// fire runs op's timeout as a timer would.
func (f *fakeTimeouts) fire(op Operation) {
	f.mu.Lock()
	x := f.armed[op]
	delete(f.armed, op)
	f.mu.Unlock()
	if x != nil {
		x.Expire()
	}
}

func TestCustomTimeouts(t *testing.T) {
	c := &ManualClock{}
	c.Set(int64(time.Second))
	ft := &fakeTimeouts{armed: map[Operation]Expirer{}, dls: map[Operation]int64{}}
	p, err := New[string](Config{Timer: TimerConfig{Clock: c, Manual: true}, Timeouts: ft})
	if err != nil {
		t.Fatal(err)
	}
	if p.Timer() != nil || p.Poll() != 0 {
		t.Fatal("a purgatory with Timeouts has no Timer of its own")
	}
	done, expiring, left := newOp(time.Second), newOp(2*time.Second), newOp(time.Minute)
	for _, op := range []*fakeOp{done, expiring, left} {
		if p.TryCompleteElseWatch(op, []string{"k"}) {
			t.Fatal("unready op completed")
		}
		if want := c.Now() + int64(op.Timeout); op.Deadline() != want || ft.dls[op] != want {
			t.Fatalf("deadline %d, armed at %d, want %d", op.Deadline(), ft.dls[op], want)
		}
	}
	done.ready.Store(true)
	if n := p.CheckAndComplete("k"); n != 1 {
		t.Fatalf("completed %d, want 1", n)
	}
	if _, armed := ft.armed[done]; armed {
		t.Fatal("completion did not disarm the timeout")
	}
	ft.fire(expiring)
	if expiring.Outcome() != Expired || expiring.expirations.Load() != 1 {
		t.Fatalf("expiring: %v", expiring.Outcome())
	}
	if m := p.Metrics(); m.Pending != 1 || m.Expired != 1 || m.Watchers != 1 || m.TimerEntries != 0 {
		t.Fatalf("metrics %+v", m)
	}
	p.Shutdown()
	if left.Outcome() != ShutDown {
		t.Fatalf("left: %v, want shut down from the timeouts Close returned", left.Outcome())
	}
	late := newOp(time.Second)
	if !p.TryCompleteElseWatch(late, []string{"k"}) || late.Outcome() != ShutDown {
		t.Fatalf("op after shutdown: %v", late.Outcome())
	}
}

// selfCompleter completes itself inside TryComplete, Kafka style.
type selfCompleter struct {
	fakeOp
}

func (s *selfCompleter) TryComplete() bool {
	return s.ready.Load() && s.ForceComplete()
}

func TestCheckAndCompleteCountsSelfCompletion(t *testing.T) {
	p, _ := manualPurgatory(t)
	op := &selfCompleter{}
	op.Timeout = time.Second
	p.TryCompleteElseWatch(op, []string{"k"})
	op.ready.Store(true)
	if n := p.CheckAndComplete("k"); n != 1 || op.Outcome() != Completed || op.completes.Load() != 1 {
		t.Fatalf("completed %d, outcome %v, OnComplete %d times", n, op.Outcome(), op.completes.Load())
	}
}

// TestWatchListRemovalKeepsTheRest completes random watchers of one key out
// of order (each removal moves the last watcher into the hole), then checks
// that CheckAndComplete still reaches every one left, once.
func TestWatchListRemovalKeepsTheRest(t *testing.T) {
	p, _ := manualPurgatory(t)
	rng := rand.New(rand.NewPCG(5, 5))
	ops := make([]*fakeOp, 500)
	for i := range ops {
		ops[i] = newOp(time.Hour)
		p.TryCompleteElseWatch(ops[i], []string{"hot", string(rune('a' + i%7))})
	}
	left := 0
	for _, op := range ops {
		if rng.IntN(2) == 0 {
			op.ForceComplete()
		} else {
			left++
		}
	}
	if m := p.Metrics(); m.Pending != int64(left) || m.Watchers != int64(2*left) {
		t.Fatalf("metrics %+v, want %d pending", m, left)
	}
	for _, op := range ops {
		op.ready.Store(true)
	}
	if n := p.CheckAndComplete("hot"); n != left {
		t.Fatalf("completed %d, want %d", n, left)
	}
	for i, op := range ops {
		if op.completes.Load() != 1 {
			t.Fatalf("op %d completed %d times", i, op.completes.Load())
		}
	}
	if m := p.Metrics(); m.Pending != 0 || m.Watchers != 0 || m.Keys != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

// TestKeysComeAndGo: a key whose only watcher keeps completing costs no
// allocation, and the empty lists of keys gone for good are swept.
func TestKeysComeAndGo(t *testing.T) {
	p, _ := manualPurgatory(t)
	ops := make([]*fakeOp, 1000)
	for i := range ops {
		ops[i] = newOp(time.Hour)
	}
	i := 0
	keys := []string{"p-0"}
	allocs := testing.AllocsPerRun(len(ops)-1, func() {
		p.TryCompleteElseWatch(ops[i], keys)
		ops[i].ForceComplete()
		i++
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per watch and complete on a known key", allocs)
	}
	for k := 0; k < 10_000; k++ {
		op := newOp(time.Hour)
		p.TryCompleteElseWatch(op, []string{fmt.Sprint("gone-", k)})
		op.ForceComplete()
	}
	lists := 0
	for s := range p.stripes {
		lists += len(p.stripes[s].mu.lists)
	}
	if m := p.Metrics(); m.Keys != 0 || lists > 4*(8+1) {
		t.Fatalf("keys %d, %d lists kept after 10000 keys came and went", m.Keys, lists)
	}
}

// TestWatchListShrinksAfterBurst: a key's list gives back most of its room
// once a burst of watchers is gone, and still finds those left.
func TestWatchListShrinksAfterBurst(t *testing.T) {
	p, _ := manualPurgatory(t)
	ops := make([]*fakeOp, 20_000)
	for i := range ops {
		ops[i] = newOp(time.Hour)
		p.TryCompleteElseWatch(ops[i], []string{"burst"})
	}
	for _, op := range ops[10:] {
		op.ForceComplete()
	}
	s := &p.stripes[p.stripeIndex("burst")]
	if c := cap(s.mu.lists["burst"].ops); c > 2048 {
		t.Fatalf("capacity %d left for 10 watchers", c)
	}
	for _, op := range ops[:10] {
		op.ready.Store(true)
	}
	if n := p.CheckAndComplete("burst"); n != 10 {
		t.Fatalf("completed %d, want 10", n)
	}
}

package purgatory

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome says how an operation completed.
type Outcome uint32

const (
	// Pending: not completed yet.
	Pending Outcome = iota
	// Completed: its condition held (TryComplete or ForceComplete).
	Completed
	// Expired: its timeout passed first.
	Expired
	// ShutDown: the purgatory shut down first.
	ShutDown
)

func (o Outcome) String() string {
	switch o {
	case Pending:
		return "pending"
	case Completed:
		return "completed"
	case Expired:
		return "expired"
	case ShutDown:
		return "shut down"
	}
	return fmt.Sprintf("Outcome(%d)", uint32(o))
}

// Operation is a delayed operation (Kafka's DelayedOperation). Implement
// it by embedding Op in a struct and adding the three methods.
type Operation interface {
	// TryComplete checks the condition and returns true when it holds; the
	// purgatory then completes the operation. It may also call
	// ForceComplete itself. Calls are serialised per operation.
	TryComplete() bool
	// OnComplete runs exactly once, whatever completed the operation;
	// Outcome tells which.
	OnComplete()
	// OnExpiration runs after OnComplete when the timeout completed it.
	OnExpiration()

	base() *Op
}

// releaser is the purgatory an Op was handed to; it takes a completed Op out
// of the timer and the watcher lists.
type releaser interface {
	release(o *Op)
}

// inlineKeys watch nodes live inside the Op; more keys allocate.
const inlineKeys = 4

// Op is the part of a delayed operation the purgatory owns: the timer entry,
// the watch nodes and the once-only outcome. Embed it; set Timeout before
// TryCompleteElseWatch. An Op is used once.
type Op struct {
	// Timeout is how long the operation may wait. Zero or less expires it
	// at the next tick unless it completes first.
	Timeout time.Duration
	// Start, if set, is the instant (of the module clock the purgatory
	// was made on, see Of) Timeout counts from; unset, it counts from
	// TryCompleteElseWatch. A request handler that read the clock when
	// the request arrived and acted on that reading (a follower fetch's
	// time, which decides the ISR) sets it, so that a clock moving on
	// before the operation is armed cannot put the deadline later than
	// that reading plus Timeout: on a manual clock, a test that advances
	// past the deadline of a request it saw arrive would otherwise leave
	// the request waiting a whole Timeout more. A Start later than the
	// clock's time at arming counts as that time.
	Start time.Time

	entry    TimerEntry
	deadline int64
	outcome  atomic.Uint32
	mu       sync.Mutex // serialises TryComplete
	self     Operation
	owner    releaser
	nodes    [inlineKeys]watchNode
	more     []watchNode
	nkeys    int
}

func (o *Op) base() *Op { return o }

// Deadline returns when the operation's timeout falls due, on the
// purgatory's clock. It is set by TryCompleteElseWatch before the timeout is
// armed, so OnExpiration may read it.
func (o *Op) Deadline() int64 { return o.deadline }

// IsCompleted reports whether the operation has completed.
func (o *Op) IsCompleted() bool { return o.outcome.Load() != uint32(Pending) }

// Outcome returns how the operation completed, or Pending.
func (o *Op) Outcome() Outcome { return Outcome(o.outcome.Load()) }

// ForceComplete completes the operation if nothing has yet, and reports
// whether this call did. Call it from TryComplete (Kafka style) or from
// anywhere once the operation is in a purgatory.
func (o *Op) ForceComplete() bool { return o.finish(Completed) }

func (o *Op) finish(out Outcome) bool {
	if !o.outcome.CompareAndSwap(uint32(Pending), uint32(out)) {
		return false
	}
	if o.owner != nil {
		o.owner.release(o)
	}
	if o.self != nil {
		o.self.OnComplete()
		if out == Expired {
			o.self.OnExpiration()
		}
	}
	return true
}

// home is the stripe that counts o: its first key's, 0 without keys.
func (o *Op) home() uint32 {
	if o.nkeys == 0 {
		return 0
	}
	return o.nodes[0].stripe
}

func (o *Op) node(i int) *watchNode {
	if i < inlineKeys {
		return &o.nodes[i]
	}
	return &o.more[i-inlineKeys]
}

// opTask is the Op as the timer sees it, so Expire is not part of Op's API.
type opTask Op

func (t *opTask) Expire() { (*Op)(t).finish(Expired) }

// watchNode is an Op's place in the watcher list of one key.
type watchNode struct {
	list   any    // *watchList[K] while watched; guarded by the stripe's lock
	idx    int32  // position in list.ops; guarded by the stripe's lock
	stripe uint32 // index of the key's stripe, fixed before the Op is visible
}

// Timeouts arms and disarms the timeouts of a purgatory's operations. The
// purgatory's own Timer does this unless Config.Timeouts is set; another
// implementation puts a different timer under the same watcher layer, which
// is how `kwal bench purgatory` compares timers. The broker leaves it nil.
type Timeouts interface {
	// Arm makes expire.Expire run once, at or after deadline (nanoseconds
	// on Config.Timer.Clock), unless Disarm stops it first. It returns
	// ErrClosed after Close.
	Arm(op Operation, deadline int64, expire Expirer) error
	// Disarm stops op's timeout and reports whether it did. The purgatory
	// may call it on another goroutine while Arm for the same op is still
	// running (a completion racing with TryCompleteElseWatch), so it must
	// be safe then; it calls Disarm again after Arm returns if the op
	// completed meanwhile.
	Disarm(op Operation) bool
	// Close stops the timer and returns the Expirers of timeouts still
	// armed, which will never run. An implementation that cannot list them
	// returns nil; Shutdown then leaves those operations pending.
	Close() []Expirer
}

// Config configures a Purgatory.
type Config struct {
	// Timer configures the purgatory's own timing wheel. With Timeouts set,
	// only its Clock is used.
	Timer TimerConfig
	// Stripes is the number of watcher-list stripes, a power of two.
	// Default 64.
	Stripes int
	// Timeouts, if set, arms operation timeouts instead of the purgatory's
	// own Timer (see Timeouts).
	Timeouts Timeouts
}

// Validate fills defaults and rejects nonsense.
func (c *Config) Validate() error {
	if c.Stripes == 0 {
		c.Stripes = 64
	}
	if c.Stripes < 0 || c.Stripes&(c.Stripes-1) != 0 {
		return fmt.Errorf("purgatory: stripes %d must be a power of two", c.Stripes)
	}
	return c.Timer.Validate()
}

// Metrics is a snapshot of a purgatory.
type Metrics struct {
	// Pending operations: handed in and not completed.
	Pending int64
	// Watchers is the number of (operation, key) watch links.
	Watchers int64
	// Keys is the number of keys with at least one watcher.
	Keys int
	// Expired counts operations completed by their timeout, ever.
	Expired uint64
	// ExpirationsPerSecond is the expiry rate since the previous call to
	// Metrics (since New for the first call).
	ExpirationsPerSecond float64
	// TimerEntries is the number of entries in the timing wheel not yet
	// due; 0 with Config.Timeouts.
	TimerEntries int
}

// Purgatory holds delayed operations watched under keys of type K.
type Purgatory[K comparable] struct {
	timer   *Timer   // nil with Config.Timeouts
	ext     Timeouts // Config.Timeouts
	clock   Clock
	seed    maphash.Seed
	mask    uint64
	stripes []stripe[K]
	closed  atomic.Bool
	pool    sync.Pool // *[]*Op snapshots for CheckAndComplete
	rate    struct {
		sync.Mutex
		at      int64
		expired uint64
	}
}

type stripe[K comparable] struct {
	mu struct {
		sync.Mutex
		lists    map[K]*watchList[K]
		watchers int64
		// empty lists stay in the map, so a key that keeps going from one
		// watcher to none costs no allocation; they are swept when they
		// outnumber the others.
		empty int
	}
	// Counts of the operations whose first key maps here, kept beside the
	// lock that watching them takes anyway: a single purgatory-wide
	// counter would bounce between the cores adding and completing.
	pending atomic.Int64
	expired atomic.Uint64
	_       [64]byte // keep stripes on separate cache lines
}

// watchList is a key's watchers as a slice: adding appends, removing moves
// the last watcher into the hole. Unlike a linked list, removal touches no
// other operation but the last one added, which is usually still in cache.
// Order is not kept; CheckAndComplete tries every watcher anyway.
type watchList[K comparable] struct {
	key K
	ops []watchRef
}

type watchRef struct {
	op *Op
	i  int // which of op's keys
}

var _ releaser = (*Purgatory[int])(nil)
var _ Expirer = (*opTask)(nil)

// New makes a purgatory and starts its timer.
func New[K comparable](cfg Config) (*Purgatory[K], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var t *Timer
	if cfg.Timeouts == nil {
		var err error
		if t, err = NewTimer(cfg.Timer); err != nil {
			return nil, err
		}
	}
	p := &Purgatory[K]{
		timer:   t,
		ext:     cfg.Timeouts,
		clock:   cfg.Timer.Clock,
		seed:    maphash.MakeSeed(),
		mask:    uint64(cfg.Stripes - 1),
		stripes: make([]stripe[K], cfg.Stripes),
	}
	for i := range p.stripes {
		p.stripes[i].mu.lists = make(map[K]*watchList[K])
	}
	p.rate.at = p.clock.Now()
	p.pool.New = func() any { s := make([]*Op, 0, 64); return &s }
	return p, nil
}

// Timer returns the purgatory's timing wheel (for Poll with a manual
// clock, and for inspection); nil with Config.Timeouts.
func (p *Purgatory[K]) Timer() *Timer { return p.timer }

// Poll advances the timer; see Timer.Poll. It returns 0 with
// Config.Timeouts.
func (p *Purgatory[K]) Poll() int {
	if p.timer == nil {
		return 0
	}
	return p.timer.Poll()
}

func (p *Purgatory[K]) arm(o *Op, deadline int64) error {
	if p.timer != nil {
		return p.timer.Schedule(&o.entry, deadline, (*opTask)(o))
	}
	return p.ext.Arm(o.self, deadline, (*opTask)(o))
}

func (p *Purgatory[K]) disarm(o *Op) {
	if p.timer != nil {
		p.timer.Cancel(&o.entry)
	} else {
		p.ext.Disarm(o.self)
	}
}

func (p *Purgatory[K]) stripeIndex(key K) uint32 {
	return uint32(maphash.Comparable(p.seed, key) & p.mask)
}

// TryCompleteElseWatch tries op; if it cannot complete, watches it under
// each key, tries once more, and arms its timeout. It returns true if op
// completed during the call (by any cause). After Shutdown it completes op
// with outcome ShutDown and returns true. Kafka: tryCompleteElseWatch.
func (p *Purgatory[K]) TryCompleteElseWatch(op Operation, keys []K) bool {
	o := op.base()
	o.self, o.owner = op, p
	o.nkeys = len(keys)
	if len(keys) > inlineKeys {
		o.more = make([]watchNode, len(keys)-inlineKeys)
	}
	for i, k := range keys {
		o.node(i).stripe = p.stripeIndex(k)
	}
	p.stripes[o.home()].pending.Add(1)
	if p.closed.Load() {
		o.finish(ShutDown)
		return true
	}
	if p.try(o) {
		return true
	}
	for i, k := range keys {
		if o.IsCompleted() {
			return true
		}
		p.watch(o, i, k)
	}
	if p.try(o) {
		return true
	}
	start := p.clock.Now()
	if !o.Start.IsZero() {
		start = min(start, p.clock.Reading(o.Start))
	}
	o.deadline = start + int64(o.Timeout)
	if err := p.arm(o, o.deadline); err != nil {
		// Closed: Shutdown came first.
		o.finish(ShutDown)
		return true
	}
	// A completion racing with arm may have missed the timeout.
	if o.IsCompleted() {
		p.disarm(o)
		return true
	}
	return false
}

// try calls TryComplete under the op's lock and reports whether the op is
// completed afterwards.
func (p *Purgatory[K]) try(o *Op) bool {
	o.mu.Lock()
	if !o.IsCompleted() && o.self.TryComplete() {
		o.finish(Completed)
	}
	o.mu.Unlock()
	return o.IsCompleted()
}

func (p *Purgatory[K]) watch(o *Op, i int, key K) {
	n := o.node(i)
	s := &p.stripes[n.stripe]
	s.mu.Lock()
	// Checked under the stripe lock: release unlinks under it too, after
	// the outcome is set, so a completed op is never left linked.
	if !o.IsCompleted() {
		l := s.mu.lists[key]
		if l == nil {
			l = &watchList[K]{key: key}
			s.mu.lists[key] = l
		} else if len(l.ops) == 0 {
			s.mu.empty--
		}
		n.list, n.idx = l, int32(len(l.ops))
		l.ops = append(l.ops, watchRef{o, i})
		s.mu.watchers++
	}
	s.mu.Unlock()
}

// unwatch takes node i of o out of its list.
func (s *stripe[K]) unwatch(n *watchNode) {
	s.mu.Lock()
	if l, _ := n.list.(*watchList[K]); l != nil {
		last := len(l.ops) - 1
		if int(n.idx) != last {
			moved := l.ops[last]
			l.ops[n.idx] = moved
			moved.op.node(moved.i).idx = n.idx
		}
		l.ops[last] = watchRef{}
		l.ops = l.ops[:last]
		// After a burst, give back what a quarter of it would not use.
		if c := cap(l.ops); c > 1024 && last < c/4 {
			l.ops = append(make([]watchRef, 0, c/2), l.ops...)
		}
		n.list = nil
		s.mu.watchers--
		if last == 0 {
			s.mu.empty++
			if s.mu.empty > 8 && s.mu.empty > len(s.mu.lists)/2 {
				s.sweepLocked()
			}
		}
	}
	s.mu.Unlock()
}

func (s *stripe[K]) sweepLocked() {
	for k, l := range s.mu.lists {
		if len(l.ops) == 0 {
			delete(s.mu.lists, k)
		}
	}
	s.mu.empty = 0
}

// release runs once per op, right after its outcome is set.
func (p *Purgatory[K]) release(o *Op) {
	p.disarm(o)
	for i := 0; i < o.nkeys; i++ {
		n := o.node(i)
		p.stripes[n.stripe].unwatch(n)
	}
	home := &p.stripes[o.home()]
	if Outcome(o.outcome.Load()) == Expired {
		home.expired.Add(1)
	}
	home.pending.Add(-1)
}

// CheckAndComplete retries the operations watching key and returns how many
// it completed (those whose TryComplete returned true, or completed
// themselves with ForceComplete inside it). Kafka: checkAndComplete.
func (p *Purgatory[K]) CheckAndComplete(key K) int {
	s := &p.stripes[p.stripeIndex(key)]
	s.mu.Lock()
	l := s.mu.lists[key]
	if l == nil || len(l.ops) == 0 {
		s.mu.Unlock()
		return 0
	}
	bp := p.pool.Get().(*[]*Op)
	ops := (*bp)[:0]
	for _, r := range l.ops {
		ops = append(ops, r.op)
	}
	s.mu.Unlock()
	done := 0
	for _, o := range ops {
		if o.IsCompleted() {
			continue
		}
		o.mu.Lock()
		if !o.IsCompleted() && o.self.TryComplete() {
			// TryComplete may have called ForceComplete itself; only an
			// expiry racing with it leaves another outcome.
			if o.finish(Completed) || o.Outcome() == Completed {
				done++
			}
		}
		o.mu.Unlock()
	}
	clear(ops)
	*bp = ops[:0]
	p.pool.Put(bp)
	return done
}

// Shutdown completes every pending operation with outcome ShutDown (those
// already due finish expiring first) and stops the timer. Operations handed
// in concurrently or later complete with ShutDown inside their own call.
// It is idempotent.
func (p *Purgatory[K]) Shutdown() {
	if p.closed.Swap(true) {
		return
	}
	var left []Expirer
	if p.timer != nil {
		left = p.timer.Close()
	} else {
		left = p.ext.Close()
	}
	for _, t := range left {
		(*Op)(t.(*opTask)).finish(ShutDown)
	}
}

// Metrics returns a snapshot.
func (p *Purgatory[K]) Metrics() Metrics {
	m := Metrics{}
	if p.timer != nil {
		m.TimerEntries = p.timer.Len()
	}
	for i := range p.stripes {
		s := &p.stripes[i]
		s.mu.Lock()
		m.Watchers += s.mu.watchers
		m.Keys += len(s.mu.lists) - s.mu.empty
		s.mu.Unlock()
		m.Pending += s.pending.Load()
		m.Expired += s.expired.Load()
	}
	now := p.clock.Now()
	p.rate.Lock()
	if dt := now - p.rate.at; dt > 0 {
		m.ExpirationsPerSecond = float64(m.Expired-p.rate.expired) / (float64(dt) / 1e9)
	}
	p.rate.at, p.rate.expired = now, m.Expired
	p.rate.Unlock()
	return m
}

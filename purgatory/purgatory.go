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

	entry   TimerEntry
	outcome atomic.Uint32
	mu      sync.Mutex // serialises TryComplete
	self    Operation
	owner   releaser
	nodes   [inlineKeys]watchNode
	more    []watchNode
	nkeys   int
}

func (o *Op) base() *Op { return o }

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

func (o *Op) node(i int) *watchNode {
	if i < inlineKeys {
		return &o.nodes[i]
	}
	return &o.more[i-inlineKeys]
}

// opTask is the Op as the timer sees it, so Expire is not part of Op's API.
type opTask Op

func (t *opTask) Expire() { (*Op)(t).finish(Expired) }

// watchNode links an Op into the watcher list of one key.
type watchNode struct {
	prev, next *watchNode
	op         *Op
	stripe     unlinker // fixed before the Op is visible to others
	list       any      // *watchList[K]; guarded by the stripe's lock
}

type unlinker interface {
	unlink(n *watchNode)
}

// Config configures a Purgatory.
type Config struct {
	// Timer configures the purgatory's own timing wheel.
	Timer TimerConfig
	// Stripes is the number of watcher-list stripes, a power of two.
	// Default 64.
	Stripes int
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
	// TimerEntries is the number of entries in the timing wheel.
	TimerEntries int
}

// Purgatory holds delayed operations watched under keys of type K.
type Purgatory[K comparable] struct {
	timer   *Timer
	clock   Clock
	seed    maphash.Seed
	mask    uint64
	stripes []stripe[K]
	closed  atomic.Bool
	pending atomic.Int64
	expired atomic.Uint64
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
	}
	_ [64]byte // keep stripes on separate cache lines
}

type watchList[K comparable] struct {
	key  K
	root watchNode
	n    int
}

var _ unlinker = (*stripe[int])(nil)
var _ releaser = (*Purgatory[int])(nil)
var _ Expirer = (*opTask)(nil)

// New makes a purgatory and starts its timer.
func New[K comparable](cfg Config) (*Purgatory[K], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t, err := NewTimer(cfg.Timer)
	if err != nil {
		return nil, err
	}
	p := &Purgatory[K]{
		timer:   t,
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
// clock, and for inspection).
func (p *Purgatory[K]) Timer() *Timer { return p.timer }

// Poll advances the timer; see Timer.Poll.
func (p *Purgatory[K]) Poll() int { return p.timer.Poll() }

func (p *Purgatory[K]) stripe(key K) *stripe[K] {
	return &p.stripes[maphash.Comparable(p.seed, key)&p.mask]
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
		n := o.node(i)
		n.op, n.stripe = o, p.stripe(k)
	}
	p.pending.Add(1)
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
		p.watch(o.node(i), k)
	}
	if p.try(o) {
		return true
	}
	deadline := p.clock.Now() + int64(o.Timeout)
	if err := p.timer.Schedule(&o.entry, deadline, (*opTask)(o)); err != nil {
		// Closed: Shutdown came first.
		o.finish(ShutDown)
		return true
	}
	// A completion racing with Schedule may have missed the entry.
	if o.IsCompleted() {
		p.timer.Cancel(&o.entry)
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

func (p *Purgatory[K]) watch(n *watchNode, key K) {
	s := n.stripe.(*stripe[K])
	s.mu.Lock()
	// Checked under the stripe lock: release unlinks under it too, after
	// the outcome is set, so a completed op is never left linked.
	if !n.op.IsCompleted() {
		l := s.mu.lists[key]
		if l == nil {
			l = &watchList[K]{key: key}
			l.root.prev, l.root.next = &l.root, &l.root
			s.mu.lists[key] = l
		}
		last := l.root.prev
		n.prev, n.next = last, &l.root
		last.next, l.root.prev = n, n
		n.list = l
		l.n++
		s.mu.watchers++
	}
	s.mu.Unlock()
}

func (s *stripe[K]) unlink(n *watchNode) {
	s.mu.Lock()
	if n.list != nil {
		l := n.list.(*watchList[K])
		n.prev.next, n.next.prev = n.next, n.prev
		n.prev, n.next, n.list = nil, nil, nil
		l.n--
		s.mu.watchers--
		if l.n == 0 {
			delete(s.mu.lists, l.key)
		}
	}
	s.mu.Unlock()
}

// release runs once per op, right after its outcome is set.
func (p *Purgatory[K]) release(o *Op) {
	p.timer.Cancel(&o.entry)
	for i := 0; i < o.nkeys; i++ {
		n := o.node(i)
		n.stripe.unlink(n)
	}
	if Outcome(o.outcome.Load()) == Expired {
		p.expired.Add(1)
	}
	p.pending.Add(-1)
}

// CheckAndComplete retries the operations watching key and returns how many
// it completed. Kafka: checkAndComplete.
func (p *Purgatory[K]) CheckAndComplete(key K) int {
	s := p.stripe(key)
	s.mu.Lock()
	l := s.mu.lists[key]
	if l == nil {
		s.mu.Unlock()
		return 0
	}
	bp := p.pool.Get().(*[]*Op)
	ops := (*bp)[:0]
	for n := l.root.next; n != &l.root; n = n.next {
		ops = append(ops, n.op)
	}
	s.mu.Unlock()
	done := 0
	for _, o := range ops {
		if o.IsCompleted() {
			continue
		}
		o.mu.Lock()
		if !o.IsCompleted() && o.self.TryComplete() && o.finish(Completed) {
			done++
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
	for _, t := range p.timer.Close() {
		(*Op)(t.(*opTask)).finish(ShutDown)
	}
}

// Metrics returns a snapshot.
func (p *Purgatory[K]) Metrics() Metrics {
	m := Metrics{
		Pending:      p.pending.Load(),
		Expired:      p.expired.Load(),
		TimerEntries: p.timer.Len(),
	}
	for i := range p.stripes {
		s := &p.stripes[i]
		s.mu.Lock()
		m.Watchers += s.mu.watchers
		m.Keys += len(s.mu.lists)
		s.mu.Unlock()
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

package purgbench

import (
	"sync"
	"sync/atomic"
	"time"
)

// pOp is a delayed request of workload P and I: the purgatory's Op shape
// (outcome CAS, per-op lock, embedded watch nodes) over an interface timer.
type pOp struct {
	op
	layer *layer
	done  atomic.Uint32 // 0 pending, 1 completed, 2 expired, 3 shut down
	ready atomic.Bool
	mu    sync.Mutex
	keys  [3]int
	nodes [3]wnode
}

type wnode struct {
	prev, next *wnode
	o          *pOp
	list       *wlist
}

type wlist struct {
	key  int
	root wnode
	n    int
}

// layer is the watcher layer every contestant shares: striped maps of
// intrusive lists, unlink on completion, snapshot-then-try in
// checkAndComplete. It mirrors purgatory.Purgatory.
type layer struct {
	sys     timerSys
	clock   func() int64
	stripes [64]struct {
		mu    sync.Mutex
		lists map[int]*wlist
		_     [48]byte
	}
	completed, expired atomic.Int64
	snap               sync.Pool
}

func newLayer(sys timerSys, clock func() int64) *layer {
	l := &layer{sys: sys, clock: clock}
	for i := range l.stripes {
		l.stripes[i].lists = map[int]*wlist{}
	}
	l.snap.New = func() any { s := make([]*pOp, 0, 64); return &s }
	return l
}

func (l *layer) stripe(k int) int { return int(uint(k*0x9E3779B1) >> 7 & 63) }

func (l *layer) finish(o *pOp, how uint32) bool {
	if !o.done.CompareAndSwap(0, how) {
		return false
	}
	l.sys.cancel(&o.op)
	for i := range o.nodes {
		n := &o.nodes[i]
		s := &l.stripes[l.stripe(o.keys[i])]
		s.mu.Lock()
		if w := n.list; w != nil {
			n.prev.next, n.next.prev = n.next, n.prev
			n.prev, n.next, n.list = nil, nil, nil
			if w.n--; w.n == 0 {
				delete(s.lists, w.key)
			}
		}
		s.mu.Unlock()
	}
	if how == 2 {
		l.expired.Add(1)
	} else {
		l.completed.Add(1)
	}
	return true
}

func (l *layer) try(o *pOp) bool {
	o.mu.Lock()
	if o.done.Load() == 0 && o.ready.Load() {
		l.finish(o, 1)
	}
	o.mu.Unlock()
	return o.done.Load() != 0
}

func (l *layer) expire(o *op) {
	p := o.owner()
	o.late = l.clock() - o.deadline
	l.finish(p, 2)
}

// owner recovers the pOp from its embedded op (op is the first field).
func (o *op) owner() *pOp { return o.pOp }

func (l *layer) tryCompleteElseWatch(o *pOp, timeout time.Duration) bool {
	o.layer = l
	o.pOp = o
	if l.try(o) {
		return true
	}
	for i := range o.keys {
		n := &o.nodes[i]
		n.o = o
		s := &l.stripes[l.stripe(o.keys[i])]
		s.mu.Lock()
		if o.done.Load() == 0 {
			w := s.lists[o.keys[i]]
			if w == nil {
				w = &wlist{key: o.keys[i]}
				w.root.prev, w.root.next = &w.root, &w.root
				s.lists[o.keys[i]] = w
			}
			last := w.root.prev
			n.prev, n.next = last, &w.root
			last.next, w.root.prev = n, n
			n.list = w
			w.n++
		}
		s.mu.Unlock()
	}
	if l.try(o) {
		return true
	}
	o.deadline = l.clock() + int64(timeout)
	l.sys.schedule(&o.op, timeout)
	if o.done.Load() != 0 {
		l.sys.cancel(&o.op)
		return true
	}
	return false
}

func (l *layer) checkAndComplete(key int) int {
	s := &l.stripes[l.stripe(key)]
	s.mu.Lock()
	w := s.lists[key]
	if w == nil {
		s.mu.Unlock()
		return 0
	}
	bp := l.snap.Get().(*[]*pOp)
	ops := (*bp)[:0]
	for n := w.root.next; n != &w.root; n = n.next {
		ops = append(ops, n.o)
	}
	s.mu.Unlock()
	done := 0
	for _, o := range ops {
		if o.done.Load() == 0 && l.try(o) && o.done.Load() == 1 {
			done++
		}
	}
	clear(ops)
	*bp = ops[:0]
	l.snap.Put(bp)
	return done
}

// shutdown completes what is left.
func (l *layer) shutdown(ops []*pOp) {
	for _, o := range ops {
		l.finish(o, 3)
	}
}

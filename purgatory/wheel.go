package purgatory

import (
	"math"
	"sync/atomic"
)

// Expirer is what a Timer runs when an entry's deadline passes.
type Expirer interface {
	Expire()
}

// Entry states. An entry is scheduled at most once at a time.
const (
	entryIdle      uint32 = iota // free to Schedule
	entryScheduled               // in a bucket of the wheel
	entryDue                     // taken out of the wheel, waiting to run
)

// TimerEntry is one timer. Embed it in the struct it times so scheduling
// allocates nothing. The zero value is ready to use. An entry may be
// scheduled again once Cancel returned true or its Expirer has started.
type TimerEntry struct {
	prev, next *TimerEntry // bucket list, then the due queue (next only)
	bucket     *bucket
	deadline   int64
	task       Expirer
	state      atomic.Uint32
}

// Deadline returns the deadline the entry was last scheduled with.
func (e *TimerEntry) Deadline() int64 { return e.deadline }

// bucket is a circular doubly linked list with a sentinel root.
type bucket struct {
	root    TimerEntry
	expiry  int64 // when the bucket is due; -1 when not in the heap
	heapIdx int
	level   int
}

func (b *bucket) init(level int) {
	b.root.prev, b.root.next = &b.root, &b.root
	b.expiry, b.heapIdx, b.level = -1, -1, level
}

func (b *bucket) push(e *TimerEntry) {
	last := b.root.prev
	e.prev, e.next = last, &b.root
	last.next, b.root.prev = e, e
	e.bucket = b
}

func unlink(e *TimerEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next, e.bucket = nil, nil, nil
}

type level struct {
	tick, span, current int64
	buckets             []bucket
}

// wheel is the pure hierarchical timing wheel: no locks, no clock, no
// goroutines. Times are nanoseconds; level 0's current time only moves
// forward through advance.
type wheel struct {
	tick   int64
	size   int64
	levels []*level
	heap   []*bucket // min-heap of non-empty (or once non-empty) buckets
	count  int       // scheduled entries
}

func newWheel(tick, size, start int64) wheel {
	w := wheel{tick: tick, size: size}
	w.addLevel(tick, start)
	return w
}

func (w *wheel) addLevel(tick, start int64) *level {
	l := &level{tick: tick, current: start - start%tick, buckets: make([]bucket, w.size)}
	if tick > math.MaxInt64/w.size {
		l.span = math.MaxInt64
	} else {
		l.span = tick * w.size
	}
	for i := range l.buckets {
		l.buckets[i].init(len(w.levels))
	}
	w.levels = append(w.levels, l)
	return l
}

// slotKey maps a deadline to the time the wheel files it under: level 0
// expires a bucket at the start of its range, so filing d at d+tick-1 makes
// it fire at ceil(d/tick)*tick, never before d.
func (w *wheel) slotKey(deadline int64) int64 {
	if deadline > math.MaxInt64-w.tick {
		return math.MaxInt64 - w.tick
	}
	return deadline + w.tick - 1
}

// add files e. It returns false, leaving e untouched, when e is already due
// at the wheel's current time. armed reports the expiry of e's bucket when
// that bucket just entered the heap (0 otherwise), which may make it the
// earliest.
func (w *wheel) add(e *TimerEntry) (ok bool, armed int64) {
	key := w.slotKey(e.deadline)
	if key < w.levels[0].current+w.tick {
		return false, 0
	}
	for i := 0; ; i++ {
		if i == len(w.levels) {
			below := w.levels[i-1]
			w.addLevel(below.span, below.current)
		}
		l := w.levels[i]
		if key-l.current >= l.span {
			continue
		}
		vid := key / l.tick
		b := &l.buckets[vid%w.size]
		b.push(e)
		w.count++
		exp := vid * l.tick
		if b.expiry != exp {
			b.expiry = exp
			if b.heapIdx < 0 {
				w.heapPush(b)
				return true, exp
			}
			w.heapFix(b.heapIdx)
			return true, exp
		}
		return true, 0
	}
}

// remove cancels e if it is in the wheel.
func (w *wheel) remove(e *TimerEntry) bool {
	if e.bucket == nil {
		return false
	}
	unlink(e)
	w.count--
	return true
}

// advance moves every level's current time to t, truncated to its tick.
// Callers guarantee every bucket due at or before t has been flushed.
func (w *wheel) advance(t int64) {
	for _, l := range w.levels {
		if t >= l.current+l.tick {
			l.current = t - t%l.tick
		}
	}
}

// next returns the earliest bucket expiry.
func (w *wheel) next() (int64, bool) {
	if len(w.heap) == 0 {
		return 0, false
	}
	return w.heap[0].expiry, true
}

// poll flushes every bucket due at now, cascading entries of higher levels
// down and appending due entries to the list (head, tail) through their next
// pointers. It returns the new list and how many entries it appended.
func (w *wheel) poll(now int64, head, tail *TimerEntry) (*TimerEntry, *TimerEntry, int) {
	n := 0
	for len(w.heap) > 0 && w.heap[0].expiry <= now {
		b := w.heap[0]
		w.heapPop()
		w.advance(b.expiry)
		b.expiry = -1
		// Detach the whole list, then re-file each entry.
		first, sentinel := b.root.next, &b.root
		b.root.prev, b.root.next = sentinel, sentinel
		for e := first; e != sentinel; {
			nx := e.next
			e.prev, e.next, e.bucket = nil, nil, nil
			w.count--
			if ok, _ := w.add(e); !ok {
				e.state.Store(entryDue)
				if tail == nil {
					head = e
				} else {
					tail.next = e
				}
				tail = e
				n++
			}
			e = nx
		}
	}
	w.advance(now)
	return head, tail, n
}

// drain removes every scheduled entry and returns them as a list.
func (w *wheel) drain() []*TimerEntry {
	var out []*TimerEntry
	for _, b := range w.heap {
		sentinel := &b.root
		for e := b.root.next; e != sentinel; {
			nx := e.next
			e.prev, e.next, e.bucket = nil, nil, nil
			out = append(out, e)
			e = nx
		}
		b.root.prev, b.root.next = sentinel, sentinel
		b.expiry, b.heapIdx = -1, -1
	}
	w.heap = w.heap[:0]
	w.count = 0
	return out
}

func (w *wheel) heapLess(i, j int) bool { return w.heap[i].expiry < w.heap[j].expiry }

func (w *wheel) heapSwap(i, j int) {
	h := w.heap
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}

func (w *wheel) heapPush(b *bucket) {
	b.heapIdx = len(w.heap)
	w.heap = append(w.heap, b)
	w.heapUp(b.heapIdx)
}

func (w *wheel) heapPop() {
	last := len(w.heap) - 1
	w.heapSwap(0, last)
	w.heap[last].heapIdx = -1
	w.heap[last] = nil
	w.heap = w.heap[:last]
	if last > 0 {
		w.heapDown(0)
	}
}

func (w *wheel) heapFix(i int) {
	if !w.heapDown(i) {
		w.heapUp(i)
	}
}

func (w *wheel) heapUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !w.heapLess(i, p) {
			return
		}
		w.heapSwap(i, p)
		i = p
	}
}

func (w *wheel) heapDown(i0 int) bool {
	i, n := i0, len(w.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && w.heapLess(r, l) {
			m = r
		}
		if !w.heapLess(m, i) {
			break
		}
		w.heapSwap(i, m)
		i = m
	}
	return i > i0
}

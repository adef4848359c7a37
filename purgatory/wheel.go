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
	entryScheduled               // in a bucket, live or handed to the executor
)

// TimerEntry is one timer. Embed it in the struct it times so scheduling
// allocates nothing. The zero value is ready to use. An entry may be
// scheduled again once Cancel returned true or its Expirer has started.
type TimerEntry struct {
	prev, next *TimerEntry // bucket list
	// bucket is the entry's bucket while scheduled. Once the bucket is due
	// it keeps pointing at it (the executor never writes it), so Cancel,
	// under the timer lock, can tell a due entry from a live one.
	bucket   *bucket
	deadline int64
	task     Expirer
	state    atomic.Uint32
}

// Deadline returns the deadline the entry was last scheduled with.
func (e *TimerEntry) Deadline() int64 { return e.deadline }

// bucket is a circular doubly linked list with a sentinel root. A level-0
// bucket that comes due is handed whole to the executor and a fresh one
// takes its slot, so expiring a bucket costs O(1) under the timer lock
// whatever its size; the executor then owns the list (root, cursor, the
// entries' prev, next and task).
type bucket struct {
	root    TimerEntry
	n       int   // entries linked; guarded by the timer lock while live
	expiry  int64 // when the bucket is due; -1 when not in the heap
	heapIdx int
	level   int
	// due is set, under the timer lock, when the bucket leaves the wheel;
	// it is never cleared.
	due bool
	// Executor state, guarded by the executor's lock.
	nextDue *bucket
	cursor  *TimerEntry // next entry to run
}

func newBucket(level int) *bucket {
	b := &bucket{expiry: -1, heapIdx: -1, level: level}
	b.root.prev, b.root.next = &b.root, &b.root
	return b
}

func (b *bucket) push(e *TimerEntry) {
	last := b.root.prev
	e.prev, e.next = last, &b.root
	last.next, b.root.prev = e, e
	e.bucket = b
	b.n++
}

func unlink(e *TimerEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.bucket.n--
	e.prev, e.next, e.bucket = nil, nil, nil
}

type level struct {
	tick, span, current int64
	buckets             []*bucket
}

// wheel is the pure hierarchical timing wheel: no locks, no clock, no
// goroutines. Times are nanoseconds; level 0's current time only moves
// forward through advance.
type wheel struct {
	tick   int64
	size   int64
	levels []*level
	heap   []*bucket // min-heap of non-empty (or once non-empty) buckets
	count  int       // entries in live buckets
}

func newWheel(tick, size, start int64) wheel {
	w := wheel{tick: tick, size: size}
	w.addLevel(tick, start)
	return w
}

func (w *wheel) addLevel(tick, start int64) *level {
	l := &level{tick: tick, current: start - start%tick, buckets: make([]*bucket, w.size)}
	if tick > math.MaxInt64/w.size {
		l.span = math.MaxInt64
	} else {
		l.span = tick * w.size
	}
	for i := range l.buckets {
		l.buckets[i] = newBucket(len(w.levels))
	}
	w.levels = append(w.levels, l)
	return l
}

// slotKey maps a deadline to the time the wheel files it under: level 0
// expires a bucket at the start of its range, so filing d at d+tick-1 makes
// it fire at ceil(d/tick)*tick, never before d. A deadline already passed
// is filed at level 0's current time, in the bucket due now.
func (w *wheel) slotKey(deadline int64) int64 {
	key := deadline
	if key > math.MaxInt64-w.tick {
		key = math.MaxInt64 - w.tick
	} else {
		key += w.tick - 1
	}
	return max(key, w.levels[0].current)
}

// add files e. When e's bucket gets a new expiry (it entered the heap, or
// moved in it), add returns that expiry and true: it may be the earliest.
// An entry already due goes to the level-0 bucket due now, so the next poll
// hands it over.
func (w *wheel) add(e *TimerEntry) (expiry int64, moved bool) {
	key := w.slotKey(e.deadline)
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
		b := l.buckets[vid%w.size]
		b.push(e)
		w.count++
		exp := vid * l.tick
		if b.expiry == exp {
			return exp, false
		}
		b.expiry = exp
		if b.heapIdx < 0 {
			w.heapPush(b)
		} else {
			w.heapFix(b.heapIdx)
		}
		return exp, true
	}
}

// remove cancels e if it is in a live bucket.
func (w *wheel) remove(e *TimerEntry) bool {
	if e.bucket == nil || e.bucket.due {
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

// poll flushes every bucket due at now: a higher level's entries cascade
// down, a non-empty level-0 bucket is swapped out of its slot and appended
// whole to the due list (head, tail), linked through nextDue, with its
// cursor at its first entry. It returns the list and how many entries it
// holds in total.
func (w *wheel) poll(now int64, head, tail *bucket) (*bucket, *bucket, int) {
	n := 0
	for len(w.heap) > 0 && w.heap[0].expiry <= now {
		b := w.heap[0]
		w.heapPop()
		w.advance(b.expiry)
		if b.level == 0 {
			exp := b.expiry
			b.expiry = -1
			if b.n == 0 {
				continue
			}
			w.levels[0].buckets[(exp/w.tick)%w.size] = newBucket(0)
			b.due = true
			b.cursor = b.root.next
			w.count -= b.n
			n += b.n
			if tail == nil {
				head = b
			} else {
				tail.nextDue = b
			}
			tail = b
			continue
		}
		b.expiry = -1
		// Detach the whole list, then re-file each entry lower; one due
		// now lands in a level-0 bucket due now, flushed by this loop.
		first, sentinel := b.root.next, &b.root
		b.root.prev, b.root.next, b.n = sentinel, sentinel, 0
		for e := first; e != sentinel; {
			nx := e.next
			e.prev, e.next, e.bucket = nil, nil, nil
			w.count--
			w.add(e)
			e = nx
		}
	}
	w.advance(now)
	return head, tail, n
}

// drain removes every entry of the live buckets and returns them.
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
		b.root.prev, b.root.next, b.n = sentinel, sentinel, 0
		b.expiry, b.heapIdx = -1, -1
	}
	w.heap = w.heap[:0]
	w.count = 0
	return out
}

// runBucket runs up to max entries of a due bucket from its cursor and
// reports whether entries are left. Each entry is made idle before its task
// runs, so the task may schedule it again; the entry's links are read and
// cleared first, and its bucket pointer is left alone (see TimerEntry).
func runBucket(b *bucket, max int) (more bool) {
	sentinel := &b.root
	e := b.cursor
	for i := 0; e != sentinel; i++ {
		if i == max {
			b.cursor = e
			return true
		}
		nx, task := e.next, e.task
		e.prev, e.next, e.task = nil, nil, nil
		e.state.Store(entryIdle)
		task.Expire()
		e = nx
	}
	// Nothing may reach the entries through the bucket any more.
	b.cursor, b.root.prev, b.root.next = nil, sentinel, sentinel
	return false
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

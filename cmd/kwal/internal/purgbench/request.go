package purgbench

import (
	"math"
	"sync/atomic"

	"github.com/kwal/kwal/purgatory"
)

// request is a delayed request of workloads P and I: Kafka's FakeOperation.
// It can complete once its completion time has passed.
type request struct {
	purgatory.Op
	clock       *purgatory.RealClock
	completesAt int64
	tally       *tally
	id          int32
	keys        [3]int
	h           handles
}

// TryComplete is FakeOperation.tryComplete: now >= completesAt.
func (r *request) TryComplete() bool { return r.clock.Now() >= r.completesAt }

// OnComplete counts completions; an expiry counts in OnExpiration, which
// runs after it, so the lateness is written before the count moves.
func (r *request) OnComplete() {
	if r.Outcome() != purgatory.Expired {
		r.tally.count()
	}
}

func (r *request) OnExpiration() {
	r.tally.late[r.id] = r.clock.Now() - r.Deadline()
	r.tally.expired.Add(1)
	r.tally.count()
}

// tally is what a run of P or I counts. late holds each request's expiry
// lateness, notExpired for the others; it has no pointers, so the garbage
// collector does not scan it, and requests die as soon as they complete.
type tally struct {
	done, expired atomic.Int64
	late          []int64
	all           chan struct{} // closed when done reaches len(late)
}

// count records one request done, and closes all with the last one.
func (t *tally) count() {
	if t.done.Add(1) == int64(len(t.late)) {
		close(t.all)
	}
}

const notExpired = math.MinInt64

func newTally(n int) *tally {
	t := &tally{late: make([]int64, n), all: make(chan struct{})}
	for i := range t.late {
		t.late[i] = notExpired
	}
	return t
}

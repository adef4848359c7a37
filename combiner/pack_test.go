package combiner

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/kwal/kwal/combiner/objformat"
)

func TestPack(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ov := int64(objformat.Overhead(0))
	// Ticks at t0-15ms, t0-5ms, t0+5ms: now (t0) is halfway to the next.
	p := Policy{UploadBytes: ov + 100, MaxObjectBytes: ov + 150, Interval: 10 * time.Millisecond, Origin: t0.Add(-5 * time.Millisecond)}
	q := func(size int64, ageMs int) Queued {
		return Queued{Size: size, AppendedAt: t0.Add(-time.Duration(ageMs) * time.Millisecond)}
	}
	cases := []struct {
		name  string
		queue []Queued
		flush bool
		want  Plan
	}{
		{"empty", nil, false, Plan{}},
		{"empty flush", nil, true, Plan{}},
		{"young and small waits for the next tick", []Queued{q(10, 3), q(10, 1)}, false, Plan{Wait: 5 * time.Millisecond}},
		{"appended at a tick waits for the next", []Queued{q(10, 5)}, false, Plan{Wait: 5 * time.Millisecond}},
		{"oldest is not first", []Queued{q(10, 1), q(10, 6)}, false, Plan{Cuts: []int{2}}},
		{"tick passed", []Queued{q(10, 10), q(10, 0)}, false, Plan{Cuts: []int{2}}},
		{"flush cuts young", []Queued{q(10, 0)}, true, Plan{Cuts: []int{1}}},
		{"upload bytes reached exactly", []Queued{q(50, 0), q(50, 0)}, false, Plan{Cuts: []int{2}}},
		{"upload bytes then remainder waits", []Queued{q(60, 2), q(60, 2), q(10, 1)}, false, Plan{Cuts: []int{2}, Wait: 5 * time.Millisecond}},
		{"max size splits", []Queued{q(90, 0), q(70, 0), q(5, 0)}, false, Plan{Cuts: []int{1}, Wait: 5 * time.Millisecond}},
		{"oversized slice alone", []Queued{q(10, 0), q(500, 0), q(10, 0)}, false, Plan{Cuts: []int{1, 1}, Wait: 5 * time.Millisecond}},
		{"oversized first", []Queued{q(500, 0)}, false, Plan{Cuts: []int{1}}},
		{"many objects", []Queued{q(100, 0), q(100, 0), q(100, 0), q(1, 0)}, false, Plan{Cuts: []int{1, 1, 1}, Wait: 5 * time.Millisecond}},
		{"flush splits at max", []Queued{q(80, 0), q(80, 0)}, true, Plan{Cuts: []int{1, 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Pack(c.queue, t0, p, c.flush)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Pack = %+v, want %+v", got, c.want)
			}
			n := 0
			for _, k := range got.Cuts {
				var size int64 = ov
				for _, s := range c.queue[n : n+k] {
					size += s.Size
				}
				if k > 1 && size > p.MaxObjectBytes {
					t.Errorf("object of %d slices is %d bytes > max %d", k, size, p.MaxObjectBytes)
				}
				n += k
			}
		})
	}
}

func TestPlaceFollowsPack(t *testing.T) {
	// Submit walks Policy.place as slices arrive and trusts that what Pack
	// leaves queued is exactly its open object. Check that against Pack
	// under random arrivals, size cuts and interval (or flush) cuts.
	rng := rand.New(rand.NewPCG(5, 6))
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := range 300 {
		up := emptyObject + 1 + rng.Int64N(400)
		p := Policy{UploadBytes: up, MaxObjectBytes: up + rng.Int64N(300), Interval: time.Second}
		var queue []Queued
		open := emptyObject
		for step := range 400 {
			switch k := rng.IntN(10); {
			case k < 7:
				size := 1 + rng.Int64N(250) // sometimes bigger than an object
				_, _, open = p.place(open, size)
				queue = append(queue, Queued{Size: size, AppendedAt: t0})
				continue
			case k < 9:
				plan := Pack(queue, t0, p, false)
				n := 0
				for _, c := range plan.Cuts {
					n += c
				}
				queue = queue[n:]
			default:
				Pack(queue, t0, p, true) // cuts everything, as the interval does
				queue, open = nil, emptyObject
			}
			want := emptyObject
			for _, q := range queue {
				want += q.Size
			}
			if open != want {
				t.Fatalf("round %d step %d: Submit's open object is %d bytes, Pack left %d", round, step, open, want)
			}
		}
	}
}

// TestPackWithPending: announced bytes count toward the interval as if
// queued; when they are due the announced tasks are called, and what is
// queued waits for their answers so it goes out in one object with them.
func TestPackWithPending(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ov := int64(objformat.Overhead(0))
	// Ticks at t0-15ms, t0-5ms, t0+5ms.
	p := Policy{UploadBytes: ov + 100, MaxObjectBytes: ov + 150, Interval: 10 * time.Millisecond, Origin: t0.Add(-5 * time.Millisecond)}
	q := func(size int64, ageMs int) Queued {
		return Queued{Size: size, AppendedAt: t0.Add(-time.Duration(ageMs) * time.Millisecond)}
	}
	ann := func(n, ageMs int) Pending {
		return Pending{Announced: n, Oldest: t0.Add(-time.Duration(ageMs) * time.Millisecond)}
	}
	cases := []struct {
		name  string
		queue []Queued
		pend  Pending
		flush bool
		want  Plan
	}{
		{"nothing", nil, Pending{}, false, Plan{}},
		{"young announcement arms the timer", nil, ann(3, 4), false, Plan{Wait: 5 * time.Millisecond}},
		{"due announcement is called", nil, ann(3, 10), false, Plan{Call: true}},
		{"due announcement is called before the due queue is cut", []Queued{q(10, 12)}, ann(1, 10), false, Plan{Call: true}},
		{"due queue goes without a young announcement, the next tick's", []Queued{q(10, 12)}, ann(1, 2), false, Plan{Cuts: []int{1}, Wait: 5 * time.Millisecond}},
		{"an announcement past its tick makes a young queue due", []Queued{q(10, 3)}, ann(1, 6), false, Plan{Call: true}},
		{"young queue and announcement wait for the next tick", []Queued{q(10, 3)}, ann(1, 1), false, Plan{Wait: 5 * time.Millisecond}},
		{"called tasks are waited for", []Queued{q(10, 15)}, Pending{Called: 2, CalledFor: time.Millisecond}, false, Plan{Wait: 4 * time.Millisecond}},
		{"called tasks: complete objects still go", []Queued{q(100, 0), q(10, 15)}, Pending{Called: 1}, false, Plan{Cuts: []int{1}, Wait: 5 * time.Millisecond}},
		{"late called tasks are not waited for past half the interval", []Queued{q(10, 15)}, Pending{Called: 2, CalledFor: 5 * time.Millisecond}, false, Plan{Cuts: []int{1}}},
		{"called tasks answered: the rest goes", []Queued{q(10, 15), q(10, 0)}, Pending{}, false, Plan{Cuts: []int{2}}},
		{"flush ignores announcements", []Queued{q(10, 0)}, Pending{Announced: 2, Oldest: t0.Add(-time.Hour), Called: 1}, true, Plan{Cuts: []int{1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := PackWith(c.queue, c.pend, t0, p, c.flush); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("PackWith = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestPackLeavesNothingPastInterval: over random queues and announcements,
// whatever Pack leaves queued comes due within one interval, and a call
// happens only for announced bytes that are due.
func TestPackLeavesNothingPastInterval(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(3, 4))
	p := Policy{UploadBytes: 400, MaxObjectBytes: 900, Interval: 10 * time.Millisecond}
	for i := 0; i < 2000; i++ {
		queue := make([]Queued, rng.IntN(12))
		for j := range queue {
			queue[j] = Queued{Size: 1 + rng.Int64N(500), AppendedAt: t0.Add(-time.Duration(rng.IntN(15)) * time.Millisecond)}
		}
		flush := rng.IntN(4) == 0
		var pend Pending
		if rng.IntN(2) == 0 {
			pend = Pending{Announced: 1 + rng.IntN(3), Oldest: t0.Add(-time.Duration(rng.IntN(15)) * time.Millisecond)}
		}
		got := PackWith(queue, pend, t0, p, flush)
		if got.Call {
			if flush || pend.Announced == 0 {
				t.Fatalf("queue %+v, %+v: called", queue, pend)
			}
			continue
		}
		if pend.Announced > 0 && !flush && (got.Wait <= 0 || got.Wait > p.Interval) {
			t.Fatalf("announced %+v: wait %v", pend, got.Wait)
		}
		// Every slice is cut at once or within one interval.
		n := 0
		for _, k := range got.Cuts {
			n += k
		}
		if n < len(queue) && (got.Wait <= 0 || got.Wait > p.Interval) {
			t.Fatalf("queue %+v: %d of %d cut, wait %v", queue, n, len(queue), got.Wait)
		}
	}
}

// TestPackCutsAtTheTickAfterTheOldestByte: over random origins, queues
// and announcements, what is not cut for size goes (or its tasks are
// called) exactly at the first tick after its oldest byte: never before
// it, and a timer is armed to exactly the next such tick otherwise. The
// queue waits while announced bytes are being called, and announced bytes
// are not called before their own tick.
func TestPackCutsAtTheTickAfterTheOldestByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const iv = 10 * time.Millisecond
	for i := 0; i < 5000; i++ {
		now := t0.Add(time.Duration(rng.Int64N(int64(time.Second))))
		p := Policy{UploadBytes: 1 << 20, MaxObjectBytes: 4 << 20, Interval: iv,
			Origin: t0.Add(time.Duration(rng.Int64N(int64(2*time.Second))) - time.Second)}
		back := func() time.Time { return now.Add(-time.Duration(rng.Int64N(int64(3 * iv)))) }
		queue := make([]Queued, rng.IntN(4))
		var oldest time.Time // of the queue
		for j := range queue {
			queue[j] = Queued{Size: 10, AppendedAt: back()}
			if oldest.IsZero() || queue[j].AppendedAt.Before(oldest) {
				oldest = queue[j].AppendedAt
			}
		}
		var pend Pending
		if rng.IntN(2) == 0 {
			pend = Pending{Announced: 1 + rng.IntN(3), Oldest: back()}
		}
		got := PackWith(queue, pend, now, p, false)
		if oldest.IsZero() && pend.Announced == 0 {
			if !reflect.DeepEqual(got, Plan{}) {
				t.Fatalf("nothing queued or announced: %+v", got)
			}
			continue
		}
		// The ticks: on the grid, after the oldest byte, at most one
		// interval after it.
		tick := func(at time.Time) time.Time {
			tk := p.tickAfter(at)
			if off := tk.Sub(p.Origin) % iv; off != 0 || !tk.After(at) || tk.Sub(at) > iv {
				t.Fatalf("tick after %v (origin %v) is %v", at, p.Origin, tk)
			}
			return tk
		}
		var qTick, aTick time.Time
		if !oldest.IsZero() {
			qTick = tick(oldest)
		}
		if pend.Announced > 0 {
			aTick = tick(pend.Oldest)
		}
		aDue := !aTick.IsZero() && !now.Before(aTick)
		qDue := !qTick.IsZero() && !now.Before(qTick)
		switch {
		case aDue != got.Call:
			t.Fatalf("now %v, announced tick %v: %+v", now, aTick, got)
		case got.Call && len(got.Cuts) > 0:
			t.Fatalf("cut while calling: %+v", got)
		case !aDue && qDue != (len(got.Cuts) > 0):
			t.Fatalf("now %v, queue tick %v: %+v", now, qTick, got)
		case !aDue && qDue && !aTick.IsZero() && !now.Add(got.Wait).Equal(aTick):
			t.Fatalf("now %v: queue cut, armed for %v, the announced tick is %v", now, now.Add(got.Wait), aTick)
		case !aDue && !qDue:
			next := qTick
			if next.IsZero() || (!aTick.IsZero() && aTick.Before(next)) {
				next = aTick
			}
			if !now.Add(got.Wait).Equal(next) {
				t.Fatalf("now %v: armed for %v, the next tick is %v", now, now.Add(got.Wait), next)
			}
		}
	}
}

// TestLoneBatchWaitsHalfAnIntervalOnAverage: a batch waits for the next
// tick, wherever it falls between ticks, not a whole interval from its
// own append: appended at every millisecond of an interval, the waits are
// 10, 9, ..., 1 ms, 5.5 ms on average (I/2 plus half the step).
func TestLoneBatchWaitsHalfAnIntervalOnAverage(t *testing.T) {
	p := Policy{UploadBytes: 1 << 20, MaxObjectBytes: 4 << 20, Interval: 10 * time.Millisecond, Origin: t0}
	var sum time.Duration
	for ms := range 10 {
		at := t0.Add(time.Duration(30+ms) * time.Millisecond)
		for _, pend := range []Pending{{}, {Announced: 1, Oldest: at}} {
			var queue []Queued
			if pend.Announced == 0 {
				queue = []Queued{{Size: 10, AppendedAt: at}}
			}
			got := PackWith(queue, pend, at, p, false)
			if want := time.Duration(10-ms) * time.Millisecond; got.Wait != want {
				t.Fatalf("appended %dms into the interval (%+v): waits %v, want %v", ms, pend, got.Wait, want)
			}
			if pend.Announced == 0 {
				sum += got.Wait
			}
		}
	}
	if avg := sum / 10; avg != 5500*time.Microsecond {
		t.Fatalf("average wait %v", avg)
	}
}

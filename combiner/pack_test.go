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
	// The last object for the interval went at t0-5ms: now (t0) is halfway
	// to the next.
	p := Policy{UploadBytes: ov + 100, MaxObjectBytes: ov + 150, Interval: 10 * time.Millisecond}
	last := Pending{Last: t0.Add(-5 * time.Millisecond), Next: t0.Add(15 * time.Millisecond)}
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
		{"young and small waits for Last + Interval", []Queued{q(10, 3), q(10, 1)}, false, Plan{Wait: 5 * time.Millisecond}},
		{"appended at Last waits for Last + Interval", []Queued{q(10, 5)}, false, Plan{Wait: 5 * time.Millisecond}},
		{"oldest is not first", []Queued{q(10, 1), q(10, 6)}, false, Plan{Cuts: []int{2}}},
		{"older than Last: missed the last object", []Queued{q(10, 10), q(10, 0)}, false, Plan{Cuts: []int{2}}},
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
			got := PackWith(c.queue, last, t0, p, c.flush)
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
				plan := PackWith(queue, Pending{Last: t0, Next: t0.Add(2 * time.Second)}, t0, p, false) // size cuts only
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
	// The last object for the interval went at t0-5ms.
	p := Policy{UploadBytes: ov + 100, MaxObjectBytes: ov + 150, Interval: 10 * time.Millisecond}
	last, next := t0.Add(-5*time.Millisecond), t0.Add(15*time.Millisecond)
	q := func(size int64, ageMs int) Queued {
		return Queued{Size: size, AppendedAt: t0.Add(-time.Duration(ageMs) * time.Millisecond)}
	}
	ann := func(n, ageMs int) Pending {
		return Pending{Announced: n, Oldest: t0.Add(-time.Duration(ageMs) * time.Millisecond), Last: last, Next: next}
	}
	cases := []struct {
		name  string
		queue []Queued
		pend  Pending
		flush bool
		want  Plan
	}{
		{"nothing", nil, Pending{Last: last, Next: next}, false, Plan{}},
		{"young announcement arms the timer", nil, ann(3, 4), false, Plan{Wait: 5 * time.Millisecond}},
		{"due announcement is called", nil, ann(3, 10), false, Plan{Call: true, Mark: true}},
		{"due announcement is called before the due queue is cut", []Queued{q(10, 12)}, ann(1, 10), false, Plan{Call: true, Mark: true}},
		{"due queue goes without a young announcement, the next tick's", []Queued{q(10, 12)}, ann(1, 2), false, Plan{Cuts: []int{1}, Wait: 5 * time.Millisecond}},
		{"an announcement past its tick makes a young queue due", []Queued{q(10, 3)}, ann(1, 6), false, Plan{Call: true, Mark: true}},
		{"young queue and announcement wait for the next tick", []Queued{q(10, 3)}, ann(1, 1), false, Plan{Wait: 5 * time.Millisecond}},
		{"called tasks are waited for", []Queued{q(10, 15)}, Pending{Called: 2, CalledFor: time.Millisecond, Last: last, Next: next}, false, Plan{Wait: 4 * time.Millisecond}},
		{"called tasks: complete objects still go", []Queued{q(100, 0), q(10, 15)}, Pending{Called: 1, Last: last, Next: next}, false, Plan{Cuts: []int{1}, Wait: 5 * time.Millisecond}},
		{"late called tasks are not waited for past half the interval", []Queued{q(10, 15)}, Pending{Called: 2, CalledFor: 5 * time.Millisecond, Last: last, Next: next}, false, Plan{Cuts: []int{1}}},
		{"called tasks answered: the rest goes", []Queued{q(10, 15), q(10, 0)}, Pending{Last: last, Next: next}, false, Plan{Cuts: []int{2}}},
		{"budget allows: cut and marked", []Queued{q(10, 3)}, Pending{Last: t0.Add(-13 * time.Millisecond), Next: t0.Add(7 * time.Millisecond)}, false, Plan{Cuts: []int{1}, Mark: true}},
		{"a batch after a quiet interval goes at once", []Queued{q(10, 0)}, Pending{Last: t0.Add(-time.Second), Next: t0.Add(-980 * time.Millisecond)}, false, Plan{Cuts: []int{1}, Mark: true}},
		{"an announcement after a quiet interval is called at once", nil, Pending{Announced: 1, Oldest: t0, Last: t0.Add(-time.Second), Next: t0.Add(-980 * time.Millisecond)}, false, Plan{Call: true, Mark: true}},
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

// TestPackSpacesObjectsByInterval: over random queues, announcements and
// last marks, objects not cut for size are spaced by Interval (a mark
// before Last + Interval only for bytes older than Last, which missed the
// last object), nothing due waits, and a timer is armed for exactly when
// the next thing is due. The queue waits while called tasks answer, and
// announced bytes are not called before they are due.
func TestPackSpacesObjectsByInterval(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const iv = 10 * time.Millisecond
	p := Policy{UploadBytes: 1 << 20, MaxObjectBytes: 4 << 20, Interval: iv}
	for i := 0; i < 5000; i++ {
		now := t0.Add(time.Duration(rng.Int64N(int64(time.Second))))
		back := func() time.Time { return now.Add(-time.Duration(rng.Int64N(int64(3 * iv)))) }
		last := back()
		// After a mark at last, Next is in [last+I, last+2I].
		next := last.Add(iv + time.Duration(rng.Int64N(int64(iv)+1)))
		queue := make([]Queued, rng.IntN(4))
		var oldest time.Time // of the queue
		for j := range queue {
			queue[j] = Queued{Size: 10, AppendedAt: back()}
			if oldest.IsZero() || queue[j].AppendedAt.Before(oldest) {
				oldest = queue[j].AppendedAt
			}
		}
		pend := Pending{Last: last, Next: next}
		if rng.IntN(2) == 0 {
			pend.Announced, pend.Oldest = 1+rng.IntN(3), back()
		}
		got := PackWith(queue, pend, now, p, false)
		if len(queue) == 0 && pend.Announced == 0 {
			if !reflect.DeepEqual(got, Plan{}) {
				t.Fatalf("nothing queued or announced: %+v", got)
			}
			continue
		}
		// When each is due, from the rule's two halves: missed the last
		// object, or when the budget allows (not before the bytes exist).
		allowed := next.Add(-iv)
		due := func(at time.Time) time.Time {
			switch {
			case at.Before(last):
				return at
			case at.After(allowed):
				return at
			}
			return allowed
		}
		var qDue, aDue time.Time
		if len(queue) > 0 {
			qDue = due(oldest)
		}
		if pend.Announced > 0 {
			aDue = due(pend.Oldest)
		}
		aNow := !aDue.IsZero() && !now.Before(aDue)
		qNow := !qDue.IsZero() && !now.Before(qDue)
		missed := (len(queue) > 0 && oldest.Before(last)) || (pend.Announced > 0 && pend.Oldest.Before(last))
		switch {
		case got.Mark && now.Before(allowed) && !missed:
			t.Fatalf("marked %v before the budget allows: %+v", allowed.Sub(now), got)
		case aNow != got.Call:
			t.Fatalf("now %v, announced due %v: %+v", now, aDue, got)
		case got.Call && len(got.Cuts) > 0:
			t.Fatalf("cut while calling: %+v", got)
		case !aNow && qNow != (len(got.Cuts) > 0):
			t.Fatalf("now %v, queue due %v: %+v", now, qDue, got)
		case !aNow && qNow && got.Mark == oldest.Before(last):
			t.Fatalf("queue from %v cut, last %v: mark %v", oldest, last, got.Mark)
		case !aNow && qNow && !aDue.IsZero() && !now.Add(got.Wait).Equal(aDue):
			t.Fatalf("now %v: queue cut, armed for %v, the announced bytes are due %v", now, now.Add(got.Wait), aDue)
		case !aNow && !qNow:
			next := qDue
			if next.IsZero() || (!aDue.IsZero() && aDue.Before(next)) {
				next = aDue
			}
			if !now.Add(got.Wait).Equal(next) || got.Wait > iv {
				t.Fatalf("now %v: armed for %v, the next is due %v", now, now.Add(got.Wait), next)
			}
		}
	}
}

// TestLoneBatchWaitsHalfAnIntervalOnAverage: a batch appended after the
// last object waits only for Last + Interval, not a whole interval from
// its own append: appended at every millisecond of the interval after
// Last, the waits are 10, 9, ..., 1 ms, 5.5 ms on average (I/2 plus half
// the step); after a quiet interval it goes at once.
func TestLoneBatchWaitsHalfAnIntervalOnAverage(t *testing.T) {
	p := Policy{UploadBytes: 1 << 20, MaxObjectBytes: 4 << 20, Interval: 10 * time.Millisecond}
	var sum time.Duration
	for ms := range 15 {
		at := t0.Add(time.Duration(ms) * time.Millisecond)
		want := max(0, time.Duration(10-ms)*time.Millisecond)
		for _, pend := range []Pending{{Last: t0, Next: t0.Add(20 * time.Millisecond)}, {Announced: 1, Oldest: at, Last: t0, Next: t0.Add(20 * time.Millisecond)}} {
			var queue []Queued
			if pend.Announced == 0 {
				queue = []Queued{{Size: 10, AppendedAt: at}}
			}
			got := PackWith(queue, pend, at, p, false)
			acted := got.Call || len(got.Cuts) > 0
			if got.Wait != want || acted != (want == 0) || got.Mark != acted {
				t.Fatalf("appended %dms after the last object (%+v): %+v, want a wait of %v", ms, pend, got, want)
			}
			if pend.Announced == 0 && ms < 10 {
				sum += got.Wait
			}
		}
	}
	if avg := sum / 10; avg != 5500*time.Microsecond {
		t.Fatalf("average wait %v", avg)
	}
}

// TestBudgetSpacesObjects drives PackWith as the cutter does (a mark
// moves Last and Next by Policy.Marked) with one batch at a time from a
// producer whose spacing varies around Interval, and checks the budget's
// two promises: objects not cut for size never go more than two within
// an Interval (k+1 consecutive marks span at least (k-1)·Interval), and a
// producer about once per Interval, alternately early and late by less
// than Interval, is never made to wait.
func TestBudgetSpacesObjects(t *testing.T) {
	const iv = 10 * time.Millisecond
	p := Policy{UploadBytes: 1 << 20, MaxObjectBytes: 4 << 20, Interval: iv}
	run := func(gaps []time.Duration) (marks []time.Time, waits []time.Duration) {
		pend := Pending{Last: t0, Next: t0.Add(2 * iv)}
		at := t0
		for _, g := range gaps {
			at = at.Add(g)
			now := at
			queue := []Queued{{Size: 10, AppendedAt: at}}
			for len(queue) > 0 {
				plan := PackWith(queue, pend, now, p, false)
				if len(plan.Cuts) > 0 {
					if plan.Mark {
						pend.Last, pend.Next = p.Marked(pend, now)
						marks = append(marks, now)
					}
					waits = append(waits, now.Sub(at))
					queue = nil
					continue
				}
				if plan.Wait <= 0 {
					t.Fatalf("at %v: neither cut nor wait: %+v", now.Sub(t0), plan)
				}
				now = now.Add(plan.Wait)
			}
			at = later(at, now) // the next batch comes after this one's cut
		}
		return marks, waits
	}
	rng := rand.New(rand.NewPCG(9, 10))
	gaps := make([]time.Duration, 2000)
	for i := range gaps {
		gaps[i] = time.Duration(rng.Int64N(int64(3 * iv)))
	}
	marks, _ := run(gaps)
	for i := range marks {
		for k := 2; i+k < len(marks); k++ {
			if d := marks[i+k].Sub(marks[i]); d < time.Duration(k-1)*iv {
				t.Fatalf("marks %d..%d span %v < %v", i, i+k, d, time.Duration(k-1)*iv)
			}
		}
	}
	// About once per Interval: 3 ms early, then 3 ms late, after a quiet
	// spell.
	steady := []time.Duration{time.Second}
	for i := range 200 {
		steady = append(steady, iv+time.Duration(1-2*(i%2))*3*time.Millisecond)
	}
	_, waits := run(steady)
	for i, w := range waits {
		if w != 0 {
			t.Fatalf("batch %d waited %v", i, w)
		}
	}
}

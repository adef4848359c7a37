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
	p := Policy{UploadBytes: ov + 100, MaxObjectBytes: ov + 150, Interval: 10 * time.Millisecond}
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
		{"young and small waits", []Queued{q(10, 3), q(10, 1)}, false, Plan{Wait: 7 * time.Millisecond}},
		{"oldest is not first", []Queued{q(10, 1), q(10, 6)}, false, Plan{Wait: 4 * time.Millisecond}},
		{"interval reached", []Queued{q(10, 10), q(10, 0)}, false, Plan{Cuts: []int{2}}},
		{"flush cuts young", []Queued{q(10, 0)}, true, Plan{Cuts: []int{1}}},
		{"upload bytes reached exactly", []Queued{q(50, 0), q(50, 0)}, false, Plan{Cuts: []int{2}}},
		{"upload bytes then remainder waits", []Queued{q(60, 2), q(60, 2), q(10, 1)}, false, Plan{Cuts: []int{2}, Wait: 9 * time.Millisecond}},
		{"max size splits", []Queued{q(90, 0), q(70, 0), q(5, 0)}, false, Plan{Cuts: []int{1}, Wait: 10 * time.Millisecond}},
		{"oversized slice alone", []Queued{q(10, 0), q(500, 0), q(10, 0)}, false, Plan{Cuts: []int{1, 1}, Wait: 10 * time.Millisecond}},
		{"oversized first", []Queued{q(500, 0)}, false, Plan{Cuts: []int{1}}},
		{"many objects", []Queued{q(100, 0), q(100, 0), q(100, 0), q(1, 0)}, false, Plan{Cuts: []int{1, 1, 1}, Wait: 10 * time.Millisecond}},
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
	p := Policy{UploadBytes: ov + 100, MaxObjectBytes: ov + 150, Interval: 10 * time.Millisecond}
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
		{"young announcement arms the timer", nil, ann(3, 4), false, Plan{Wait: 6 * time.Millisecond}},
		{"due announcement is called", nil, ann(3, 10), false, Plan{Call: true}},
		{"due announcement is called before the due queue is cut", []Queued{q(10, 12)}, ann(1, 10), false, Plan{Call: true}},
		{"due queue calls a young announcement into its object", []Queued{q(10, 12)}, ann(1, 2), false, Plan{Call: true}},
		{"the earlier of queue and announcement sets the wait", []Queued{q(10, 3)}, ann(1, 7), false, Plan{Wait: 3 * time.Millisecond}},
		{"queue older than announcement", []Queued{q(10, 8)}, ann(1, 1), false, Plan{Wait: 2 * time.Millisecond}},
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

// TestPackCallsLeadEarly: announced tasks are called Lead before the
// interval is up (at most half of it), a queue alone still waits the
// whole interval.
func TestPackCallsLeadEarly(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Policy{UploadBytes: 1 << 20, MaxObjectBytes: 4 << 20, Interval: 10 * time.Millisecond}
	at := func(ms int) time.Time { return t0.Add(-time.Duration(ms) * time.Millisecond) }
	queue := []Queued{{Size: 10, AppendedAt: at(7)}}
	cases := []struct {
		name  string
		queue []Queued
		pend  Pending
		want  Plan
	}{
		{"lead 3ms calls at 7ms", nil, Pending{Announced: 1, Oldest: at(7), Lead: 3 * time.Millisecond}, Plan{Call: true}},
		{"lead 2ms waits 1ms more", nil, Pending{Announced: 1, Oldest: at(7), Lead: 2 * time.Millisecond}, Plan{Wait: time.Millisecond}},
		{"lead capped at half the interval", nil, Pending{Announced: 1, Oldest: at(4), Lead: time.Hour}, Plan{Wait: time.Millisecond}},
		{"queue alone ignores the lead", queue, Pending{Lead: 3 * time.Millisecond}, Plan{Wait: 3 * time.Millisecond}},
		{"queue and announcement: call early", queue, Pending{Announced: 1, Oldest: at(1), Lead: 3 * time.Millisecond}, Plan{Call: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := PackWith(c.queue, c.pend, t0, p, false); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("PackWith = %+v, want %+v", got, c.want)
			}
		})
	}
}

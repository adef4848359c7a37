package retry

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoffDoublesToItsCapWithJitterBelow(t *testing.T) {
	b := Backoff{Base: 20 * time.Millisecond, Max: time.Second, Jitter: 0.5}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{20, 40, 80, 160, 320, 640, 1000, 1000, 1000}
	for i, w := range want {
		if got := b.Delay(i+1, 0); got != w*time.Millisecond {
			t.Fatalf("failure %d: delay %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := b.Delay(0, 0); got != 20*time.Millisecond {
		t.Fatalf("failures 0: %v", got)
	}
	if got := b.Delay(1<<30, 0); got != time.Second {
		t.Fatalf("huge failure count: %v, want the cap", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 10_000 {
		n := 1 + i%12
		full := b.Delay(n, 0)
		d := b.Delay(n, r.Float64())
		if d <= full/2 || d > full {
			t.Fatalf("failure %d: jittered %v outside (%v, %v]", n, d, full/2, full)
		}
	}
	for _, bad := range []Backoff{{}, {Base: time.Second, Max: time.Millisecond}, {Base: 1, Max: 1, Jitter: 2}, {Base: 1, Max: 1, Jitter: -1}} {
		if bad.Validate() == nil {
			t.Fatalf("%+v accepted", bad)
		}
	}
}

// TestEpisodeLinesOverAnOutage simulates a 25 s outage with a failure
// every 20 ms (the follower's retry in issue 12) and counts what would be
// logged: one "entered", one "still" per Every with the counts adding up,
// one "left" with the total.
func TestEpisodeLinesOverAnOutage(t *testing.T) {
	e := Episode{Every: 10 * time.Second}
	now := time.Unix(1_700_000_000, 0)
	lines := map[Report]int{}
	var counted int64
	const failures = 1250 // 25 s / 20 ms
	for range failures {
		r, n := e.Fail(now)
		if r != Quiet {
			lines[r]++
			counted += n
		}
		now = now.Add(20 * time.Millisecond)
	}
	if !e.Active() || e.Total() != failures {
		t.Fatalf("active %v total %d", e.Active(), e.Total())
	}
	r, total, d := e.OK(now)
	if r != Left || total != failures || d != 25*time.Second {
		t.Fatalf("OK: %v %d %v", r, total, d)
	}
	lines[r]++
	if lines[Entered] != 1 || lines[Still] != 2 || lines[Left] != 1 {
		t.Fatalf("lines %v, want 1 entered, 2 still (at 10 s and 20 s), 1 left", lines)
	}
	if counted > failures || counted < failures-int64(10*time.Second/(20*time.Millisecond)) {
		t.Fatalf("counts reported %d of %d failures", counted, failures)
	}
	if r, _, _ := e.OK(now); r != Quiet {
		t.Fatal("a second success reported again")
	}
	// A new episode within Every of the last report is quiet, and its
	// failure is counted in the next report.
	if r, _ := e.Fail(now); r != Quiet {
		t.Fatalf("a new episode right after a report: %v", r)
	}
	if r, _, _ := e.OK(now); r != Quiet {
		t.Fatalf("the end of a quiet episode: %v", r)
	}
	if r, n := e.Fail(now.Add(10 * time.Second)); r != Entered || n != 2 {
		t.Fatalf("a new episode after Every: %v %d, want Entered with the carried failure", r, n)
	}
}

// TestEpisodeFlapping: a failure every other attempt (a store answering
// some requests with 503) for 25 s logs at most one start or count per
// Every and one end per logged start, and every failure is counted.
func TestEpisodeFlapping(t *testing.T) {
	e := Episode{Every: 10 * time.Second}
	now := time.Unix(1_700_000_000, 0)
	lines := map[Report]int{}
	var counted, failures int64
	for i := range 1250 {
		if i%2 == 0 {
			failures++
			if r, n := e.Fail(now); r != Quiet {
				lines[r]++
				counted += n
			}
		} else if r, _, _ := e.OK(now); r != Quiet {
			lines[r]++
		}
		now = now.Add(20 * time.Millisecond)
	}
	if lines[Entered]+lines[Still] > 3 || lines[Left] > lines[Entered] {
		t.Fatalf("lines %v over 25 s of flapping, want at most one start or count per 10 s", lines)
	}
	// The failures after the last report are carried to the next one.
	e.Every = 0
	r, n := e.Fail(now)
	if r != Entered || counted+n != failures+1 {
		t.Fatalf("reported %d + %d of %d failures (%v)", counted, n, failures+1, r)
	}
}

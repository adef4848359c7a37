package purgatory

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type recTask struct {
	id    int
	fired *[]int
}

func (r *recTask) Expire() { *r.fired = append(*r.fired, r.id) }

func manualTimer(t *testing.T, tick time.Duration, size int) (*Timer, *ManualClock) {
	t.Helper()
	c := &ManualClock{}
	tm, err := NewTimer(TimerConfig{Tick: tick, WheelSize: size, Clock: c, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	return tm, c
}

func TestTimerFiresAtFirstTickAfterDeadline(t *testing.T) {
	tm, c := manualTimer(t, time.Millisecond, 20)
	var fired []int
	e := &TimerEntry{}
	if err := tm.Schedule(e, int64(1500*time.Microsecond), &recTask{1, &fired}); err != nil {
		t.Fatal(err)
	}
	c.Set(int64(1499 * time.Microsecond))
	tm.Poll()
	if len(fired) != 0 {
		t.Fatalf("fired before deadline: %v", fired)
	}
	c.Set(int64(1999 * time.Microsecond))
	tm.Poll()
	if len(fired) != 0 {
		t.Fatalf("fired before the tick after the deadline: %v", fired)
	}
	c.Set(int64(2 * time.Millisecond))
	tm.Poll()
	if len(fired) != 1 {
		t.Fatalf("not fired at the tick after the deadline: %v", fired)
	}
}

func TestTimerOverflowLevelsOnDemandAndCancel(t *testing.T) {
	tm, c := manualTimer(t, time.Millisecond, 20)
	if tm.Levels() != 1 {
		t.Fatalf("levels = %d, want 1 before any far deadline", tm.Levels())
	}
	var fired []int
	near, far := &TimerEntry{}, &TimerEntry{}
	_ = tm.Schedule(near, int64(5*time.Millisecond), &recTask{1, &fired})
	_ = tm.Schedule(far, int64(time.Hour), &recTask{2, &fired})
	if tm.Levels() < 4 {
		t.Fatalf("levels = %d, want overflow levels for a 1h deadline", tm.Levels())
	}
	if !tm.Cancel(near) || tm.Cancel(near) {
		t.Fatal("cancel must succeed once")
	}
	if tm.Len() != 1 {
		t.Fatalf("len = %d, want 1", tm.Len())
	}
	c.Set(int64(time.Hour) - 1)
	tm.Poll()
	if len(fired) != 0 {
		t.Fatalf("fired early: %v", fired)
	}
	c.Set(int64(time.Hour))
	tm.Poll()
	if len(fired) != 1 || fired[0] != 2 {
		t.Fatalf("fired = %v, want [2]", fired)
	}
	if err := tm.Schedule(near, 0, &recTask{3, &fired}); err != nil {
		t.Fatal(err)
	}
	if err := tm.Schedule(near, 0, &recTask{3, &fired}); err != ErrBusy {
		t.Fatalf("double schedule err = %v, want ErrBusy", err)
	}
	tm.Poll()
	if len(fired) != 2 || fired[1] != 3 {
		t.Fatalf("past deadline should run at the next poll: %v", fired)
	}
	if left := tm.Close(); len(left) != 0 {
		t.Fatalf("close returned %d tasks", len(left))
	}
	if err := tm.Schedule(near, 0, &recTask{4, &fired}); err != ErrClosed {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

// TestTimerPropertyMatchesModel drives random schedules, cancels and clock
// moves and checks, at every Poll, that exactly the live entries with
// ceil(deadline/tick)*tick <= now fire: never early, never more than one
// tick late.
func TestTimerPropertyMatchesModel(t *testing.T) {
	for seed := uint64(0); seed < 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		tick := int64(1+rng.IntN(5)) * int64(time.Millisecond)
		size := 2 + rng.IntN(30)
		tm, c := manualTimer(t, time.Duration(tick), size)
		const n = 300
		entries := make([]TimerEntry, n)
		live := map[int]int64{} // id -> deadline
		var fired []int
		tasks := make([]recTask, n)
		for i := range tasks {
			tasks[i] = recTask{i, &fired}
		}
		for step := 0; step < 3000; step++ {
			switch r := rng.IntN(10); {
			case r < 5:
				id := rng.IntN(n)
				if _, ok := live[id]; ok {
					continue
				}
				var d int64
				if rng.IntN(4) == 0 {
					d = rng.Int64N(int64(time.Hour))
				} else {
					d = rng.Int64N(int64(300 * time.Millisecond))
				}
				d += c.Now() - int64(time.Millisecond) // some already due
				if err := tm.Schedule(&entries[id], d, &tasks[id]); err != nil {
					t.Fatalf("seed %d: schedule: %v", seed, err)
				}
				live[id] = d
			case r < 7:
				id := rng.IntN(n)
				_, want := live[id]
				if got := tm.Cancel(&entries[id]); got != want {
					// A due-but-unpolled entry is out of the wheel already
					// only if its deadline passed the wheel's time; the
					// model keeps it live until Poll, so only check one way.
					if got {
						t.Fatalf("seed %d: cancel of non-live %d succeeded", seed, id)
					}
					if live[id] > c.Now() {
						t.Fatalf("seed %d: cancel of live %d failed", seed, id)
					}
					continue
				}
				delete(live, id)
			default:
				if rng.IntN(3) == 0 {
					c.Advance(time.Duration(rng.Int64N(int64(2 * time.Second))))
				} else {
					c.Advance(time.Duration(rng.Int64N(3 * tick)))
				}
				fired = fired[:0]
				tm.Poll()
				now := c.Now()
				want := map[int]bool{}
				for id, d := range live {
					if (d+tick-1)/tick*tick <= now {
						want[id] = true
					}
				}
				if len(fired) != len(want) {
					t.Fatalf("seed %d step %d: fired %d, want %d", seed, step, len(fired), len(want))
				}
				for _, id := range fired {
					if !want[id] {
						t.Fatalf("seed %d: %d fired at %d, deadline %d", seed, id, now, live[id])
					}
					delete(live, id)
				}
			}
		}
	}
}

func TestTimerRealClockFiresAndCloses(t *testing.T) {
	tm, err := NewTimer(TimerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int64, 1)
	e := &TimerEntry{}
	start := tm.Now()
	if err := tm.Schedule(e, start+int64(3*time.Millisecond), chanTask{tm, done}); err != nil {
		t.Fatal(err)
	}
	at := <-done
	if at < start+int64(3*time.Millisecond) {
		t.Fatalf("fired %v before deadline", time.Duration(start+int64(3*time.Millisecond)-at))
	}
	far := &TimerEntry{}
	_ = tm.Schedule(far, tm.Now()+int64(time.Hour), chanTask{tm, done})
	if left := tm.Close(); len(left) != 1 {
		t.Fatalf("close returned %d, want 1", len(left))
	}
}

type chanTask struct {
	tm *Timer
	c  chan int64
}

func (c chanTask) Expire() { c.c <- c.tm.Now() }

func TestConfigValidate(t *testing.T) {
	bad := []TimerConfig{
		{Tick: -1},
		{WheelSize: 1},
		{Workers: -1},
		{Clock: &ManualClock{}},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("case %d: %+v accepted", i, c)
		}
	}
	pc := Config{Stripes: 3}
	if err := pc.Validate(); err == nil {
		t.Error("stripes 3 accepted")
	}
}

// funcTask runs a function.
type funcTask func()

func (f funcTask) Expire() { f() }

// TestTimerDueBucketBelongsToExecutor: once a bucket is due, its entries
// are out of the wheel: Cancel fails and Schedule says ErrBusy until the
// entry's own task starts, after which it may be scheduled again.
func TestTimerDueBucketBelongsToExecutor(t *testing.T) {
	tm, c := manualTimer(t, time.Millisecond, 8)
	var a, b TimerEntry
	var fired []string
	var cancelB bool
	var scheduleB, rescheduleA error
	_ = tm.Schedule(&a, int64(time.Millisecond), funcTask(func() {
		fired = append(fired, "a")
		cancelB = tm.Cancel(&b)
		scheduleB = tm.Schedule(&b, int64(time.Hour), funcTask(func() {}))
		rescheduleA = tm.Schedule(&a, int64(3*time.Millisecond), funcTask(func() { fired = append(fired, "a again") }))
	}))
	_ = tm.Schedule(&b, int64(time.Millisecond), funcTask(func() { fired = append(fired, "b") }))
	c.Set(int64(time.Millisecond))
	if n := tm.Poll(); n != 2 {
		t.Fatalf("poll = %d, want 2", n)
	}
	if cancelB || scheduleB != ErrBusy || rescheduleA != nil {
		t.Fatalf("inside a due bucket: cancel %v, schedule %v, reschedule own entry %v", cancelB, scheduleB, rescheduleA)
	}
	if len(fired) != 2 || fired[0] != "a" || fired[1] != "b" {
		t.Fatalf("fired %v, want [a b]", fired)
	}
	if tm.Len() != 1 {
		t.Fatalf("len = %d, want the rescheduled a", tm.Len())
	}
	c.Set(int64(3 * time.Millisecond))
	tm.Poll()
	if len(fired) != 3 {
		t.Fatalf("fired %v, want a again", fired)
	}
	// b ran and is idle; its stale bucket must not confuse Cancel.
	if tm.Cancel(&b) || tm.Cancel(&a) {
		t.Fatal("cancel of idle entries succeeded")
	}
}

// TestTimerPastDeadlineCancellableUntilPoll: a deadline already passed is
// filed in the bucket due now, so it can still be cancelled before it is
// handed over.
func TestTimerPastDeadlineCancellableUntilPoll(t *testing.T) {
	tm, c := manualTimer(t, time.Millisecond, 8)
	c.Set(int64(time.Second))
	var e TimerEntry
	ran := false
	if err := tm.Schedule(&e, 0, funcTask(func() { ran = true })); err != nil {
		t.Fatal(err)
	}
	if !tm.Cancel(&e) {
		t.Fatal("cancel of a past deadline before Poll failed")
	}
	tm.Poll()
	if ran {
		t.Fatal("cancelled entry ran")
	}
}

// TestTimerCloseRunsDueReturnsRest: Close runs what is due and hands back
// the rest.
func TestTimerCloseRunsDueReturnsRest(t *testing.T) {
	tm, c := manualTimer(t, time.Millisecond, 8)
	var due, far TimerEntry
	ran := false
	_ = tm.Schedule(&due, int64(time.Millisecond), funcTask(func() { ran = true }))
	_ = tm.Schedule(&far, int64(time.Hour), funcTask(func() { t.Error("far entry ran") }))
	c.Set(int64(2 * time.Millisecond))
	if left := tm.Close(); len(left) != 1 || !ran {
		t.Fatalf("close returned %d tasks, due ran %v", len(left), ran)
	}
}

// TestTimerExecutorRaceCancelWithBigBucket: many entries share one bucket,
// so the workers split it, while another goroutine cancels half of them.
// Every entry either fired once or was cancelled, never both.
func TestTimerExecutorRaceCancelWithBigBucket(t *testing.T) {
	tm, err := NewTimer(TimerConfig{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	const n = 20_000
	entries := make([]TimerEntry, n)
	fired := make([]atomic.Int32, n)
	var total, want atomic.Int32
	want.Store(-1) // known once the cancels are done
	allFired := make(chan struct{})
	var once sync.Once
	check := func() {
		if w := want.Load(); w >= 0 && total.Load() >= w {
			once.Do(func() { close(allFired) })
		}
	}
	deadline := tm.Now() + int64(2*time.Millisecond)
	for i := range entries {
		_ = tm.Schedule(&entries[i], deadline, funcTask(func() {
			fired[i].Add(1)
			total.Add(1)
			check()
		}))
	}
	cancelled := make([]bool, n)
	ncancel := 0
	for i := 0; i < n; i += 2 {
		cancelled[i] = tm.Cancel(&entries[i])
		if cancelled[i] {
			ncancel++
		}
	}
	// Entries whose Cancel lost the race fire; wait for all of them, then
	// close the timer, after which nothing fires: a second firing of any
	// entry, or one of a cancelled entry, has happened by then.
	want.Store(int32(n - ncancel))
	check()
	select {
	case <-allFired:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d fired, want %d", total.Load(), n-ncancel)
	}
	if left := tm.Close(); len(left) != 0 {
		t.Fatalf("%d entries still scheduled after all fired", len(left))
	}
	for i := range entries {
		f := fired[i].Load()
		if cancelled[i] && f != 0 || !cancelled[i] && f != 1 {
			t.Fatalf("entry %d: cancelled %v, fired %d times", i, cancelled[i], f)
		}
	}
	if tm.Len() != 0 {
		t.Fatalf("len %d", tm.Len())
	}
}

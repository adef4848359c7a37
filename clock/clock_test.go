package clock

import (
	"sync"
	"testing"
	"time"
)

func TestManualFiresInDeadlineOrderAndOnlyWhenDue(t *testing.T) {
	m := NewManual(time.Unix(0, 0))
	a, b := m.NewTimer(20*time.Millisecond), m.NewTimer(10*time.Millisecond)
	m.Advance(5 * time.Millisecond)
	select {
	case <-a.C():
		t.Fatal("fired early")
	case <-b.C():
		t.Fatal("fired early")
	default:
	}
	m.Advance(15 * time.Millisecond)
	<-a.C()
	<-b.C()
	if m.Pending() != 0 {
		t.Fatalf("%d pending after firing", m.Pending())
	}
	if !(!a.Stop()) {
		t.Fatal("Stop of a fired timer reported pending")
	}
	a.Reset(time.Millisecond)
	if m.Pending() != 1 {
		t.Fatal("Reset did not re-arm")
	}
	if !a.Stop() || m.Pending() != 0 {
		t.Fatal("Stop did not disarm")
	}
}

// Reset racing with Advance must be safe (run with -race).
func TestManualResetRacesAdvance(t *testing.T) {
	m := NewManual(time.Unix(0, 0))
	tm := m.NewTimer(time.Millisecond)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 2000; i++ {
			m.Advance(time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 2000; i++ {
			tm.Reset(time.Millisecond)
			select {
			case <-tm.C():
			default:
			}
		}
	}()
	wg.Wait()
}

// TestManualArmedSignalsEachArming: Armed's channel closes when a timer is
// made or reset, not before, and a channel taken after an arming waits for
// the next one.
func TestManualArmedSignalsEachArming(t *testing.T) {
	m := NewManual(time.Unix(0, 0))
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	a := m.Armed()
	if closed(a) {
		t.Fatal("armed before any timer")
	}
	tm := m.NewTimer(time.Second)
	if !closed(a) {
		t.Fatal("NewTimer did not signal Armed")
	}
	b := m.Armed()
	if closed(b) {
		t.Fatal("a channel taken after the arming is already closed")
	}
	m.Advance(time.Second) // fires; firing is not arming
	if closed(b) {
		t.Fatal("a firing signalled Armed")
	}
	tm.Reset(time.Second)
	if !closed(b) {
		t.Fatal("Reset did not signal Armed")
	}
}

// TestManualStopAndResetDropStaleFirings: a firing not received before
// Stop or Reset is gone after it, as with Go's timers since 1.23, so an
// owner that re-arms is woken by the new arming only, never early by the
// old one's value.
func TestManualStopAndResetDropStaleFirings(t *testing.T) {
	m := NewManual(time.Unix(0, 0))
	empty := func(tm Timer) bool {
		select {
		case <-tm.C():
			return false
		default:
			return true
		}
	}
	a := m.NewTimer(time.Second)
	m.Advance(time.Second) // fires; nobody receives
	a.Reset(time.Second)
	if !empty(a) {
		t.Fatal("a firing from before Reset was received after it")
	}
	m.Advance(999 * time.Millisecond)
	if !empty(a) {
		t.Fatal("fired before the reset deadline")
	}
	m.Advance(time.Millisecond)
	if empty(a) {
		t.Fatal("not fired at the reset deadline")
	}
	b := m.NewTimer(time.Second)
	m.Advance(time.Second)
	if b.Stop() {
		t.Fatal("Stop of a fired timer reported pending")
	}
	if !empty(b) {
		t.Fatal("a firing from before Stop was received after it")
	}
}

// ResetAt arms for a time on the clock: a clock that moved since the
// caller read it does not push the firing later (Reset(at.Sub(reading))
// would fire at the new time plus the whole duration), and a time already
// passed fires at once.
func TestManualResetAtIsAbsolute(t *testing.T) {
	start := time.Unix(0, 0)
	m := NewManual(start)
	tm := m.NewTimer(time.Hour)
	at := start.Add(100 * time.Millisecond) // decided at start
	m.Advance(60 * time.Millisecond)        // the clock moves before the arming
	tm.(interface{ ResetAt(time.Time) }).ResetAt(at)
	m.Advance(39 * time.Millisecond)
	select {
	case <-tm.C():
		t.Fatal("fired before at")
	default:
	}
	m.Advance(time.Millisecond)
	if got := <-tm.C(); !got.Equal(at) {
		t.Fatalf("fired at %v, want %v", got, at)
	}
	tm.(interface{ ResetAt(time.Time) }).ResetAt(start) // passed already
	select {
	case <-tm.C():
	default:
		t.Fatal("a time already passed did not fire at once")
	}
	if m.Pending() != 0 {
		t.Fatalf("%d pending", m.Pending())
	}
}

// TestManualNext: Next is the earliest deadline of the armed timers only,
// and follows Stop, Reset and firing.
func TestManualNext(t *testing.T) {
	start := time.Unix(0, 0)
	m := NewManual(start)
	if _, ok := m.Next(); ok {
		t.Fatal("Next with no timer")
	}
	a, b := m.NewTimer(30*time.Millisecond), m.NewTimer(10*time.Millisecond)
	want := func(d time.Duration) {
		t.Helper()
		if next, ok := m.Next(); !ok || !next.Equal(start.Add(d)) {
			t.Fatalf("Next %v (%v), want %v", next.Sub(start), ok, d)
		}
	}
	want(10 * time.Millisecond)
	b.Stop()
	want(30 * time.Millisecond)
	b.Reset(40 * time.Millisecond)
	want(30 * time.Millisecond)
	m.Advance(30 * time.Millisecond)
	<-a.C()
	want(40 * time.Millisecond)
	m.Advance(10 * time.Millisecond)
	<-b.C()
	if _, ok := m.Next(); ok {
		t.Fatal("Next after every timer fired")
	}
}

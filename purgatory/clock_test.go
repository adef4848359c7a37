package purgatory

import (
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
)

type expiryOp struct {
	Op
	expired chan struct{}
}

func (o *expiryOp) TryComplete() bool { return false }
func (o *expiryOp) OnComplete()       {}
func (o *expiryOp) OnExpiration()     { close(o.expired) }

// TestOfManualExpiresOnAdvance: a purgatory on a module clock.Manual (not
// Manual mode: its driver runs) expires an operation when, and only when,
// the clock passes its deadline.
func TestOfManualExpiresOnAdvance(t *testing.T) {
	m := clock.NewManual(time.Unix(100, 0))
	p, err := New[string](Config{Timer: TimerConfig{Clock: Of(m)}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	o := &expiryOp{expired: make(chan struct{})}
	o.Timeout = 100 * time.Millisecond
	if p.TryCompleteElseWatch(o, []string{"k"}) {
		t.Fatal("completed at once")
	}
	m.Advance(99 * time.Millisecond)
	select {
	case <-o.expired:
		t.Fatal("expired before its deadline")
	default:
	}
	m.Advance(2 * time.Millisecond)
	select {
	case <-o.expired:
	case <-time.After(10 * time.Second):
		t.Fatal("not expired 101 ms (manual) after a 100 ms timeout")
	}
	if o.Outcome() != Expired {
		t.Fatalf("outcome %v", o.Outcome())
	}
}

func TestOfRealIsRealClock(t *testing.T) {
	if _, ok := Of(clock.Real{}).(*RealClock); !ok {
		t.Fatal("Of(clock.Real{}) is not a RealClock")
	}
	if _, ok := Of(nil).(*RealClock); !ok {
		t.Fatal("Of(nil) is not a RealClock")
	}
}

// TestManualClockFollows: the clock.Manual under a ManualClock shows the
// same instant after Advance and Set.
func TestManualClockFollows(t *testing.T) {
	var c ManualClock
	c.Set(int64(time.Second))
	c.Advance(time.Millisecond)
	if got, want := c.Manual().Now().Sub(manualEpoch), time.Second+time.Millisecond; got != want || c.Now() != int64(want) {
		t.Fatalf("manual %v, now %v; want %v", got, c.Now(), want)
	}
}

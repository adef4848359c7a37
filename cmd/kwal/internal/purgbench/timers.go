package purgbench

import (
	"sync/atomic"
	"time"

	"github.com/RussellLuo/timingwheel"
	"github.com/kwal/kwal/purgatory"
)

// op is the timed thing every contestant arms in T1 and T2, on the bare
// timer. The kwal entry is embedded, the others keep their handle.
type op struct {
	kw       purgatory.TimerEntry
	rt       *time.Timer
	tw       *timingwheel.Timer
	fireFn   func()
	onFire   func(*op)
	deadline int64 // harness clock
	late     int64
}

func (o *op) fire() { o.onFire(o) }

// timerSys is one contestant's timer.
type timerSys interface {
	// schedule arms o to fire after d; o.fireFn must be set. It returns
	// false when o cannot be armed yet (a kwal entry whose expiry is still
	// queued); the caller then uses a fresh op.
	schedule(o *op, d time.Duration) bool
	// cancel disarms o and reports whether it was armed.
	cancel(o *op) bool
	close()
}

// Contestant names.
const (
	Kwal    = "kwal"
	Runtime = "runtime"
	Russell = "russellluo"
	Null    = "null"
)

func newTimer(name string) timerSys {
	switch name {
	case Kwal:
		t, err := purgatory.NewTimer(purgatory.TimerConfig{})
		if err != nil {
			panic(err) // defaults are valid
		}
		return &kwalSys{t: t}
	case Runtime:
		return runtimeSys{}
	case Russell:
		tw := timingwheel.NewTimingWheel(time.Millisecond, 20)
		tw.Start()
		return &russellSys{tw: tw}
	case Null:
		return nullSys{}
	}
	panic("purgbench: unknown contestant " + name)
}

type kwalSys struct{ t *purgatory.Timer }

type kwalTask op

func (k *kwalTask) Expire() { (*op)(k).fire() }

func (s *kwalSys) schedule(o *op, d time.Duration) bool {
	return s.t.After(&o.kw, d, (*kwalTask)(o)) == nil
}
func (s *kwalSys) cancel(o *op) bool { return s.t.Cancel(&o.kw) }
func (s *kwalSys) close()            { s.t.Close() }

var _ timerSys = (*kwalSys)(nil)
var _ timerSys = runtimeSys{}
var _ timerSys = (*russellSys)(nil)
var _ timerSys = nullSys{}

type runtimeSys struct{}

func (runtimeSys) schedule(o *op, d time.Duration) bool {
	o.rt = time.AfterFunc(d, o.fireFn)
	return true
}
func (runtimeSys) cancel(o *op) bool { return o.rt != nil && o.rt.Stop() }
func (runtimeSys) close()            {}

type russellSys struct{ tw *timingwheel.TimingWheel }

func (s *russellSys) schedule(o *op, d time.Duration) bool {
	o.tw = s.tw.AfterFunc(d, o.fireFn)
	return true
}
func (s *russellSys) cancel(o *op) bool { return o.tw != nil && o.tw.Stop() }
func (s *russellSys) close()            { s.tw.Stop() }

// nullSys arms nothing and never fires: the harness floor.
type nullSys struct{}

func (nullSys) schedule(*op, time.Duration) bool { return true }
func (nullSys) cancel(*op) bool                  { return true }
func (nullSys) close()                           {}

// newPurgatory makes the purgatory of workloads P and I for a contestant:
// kwal's is the purgatory with its own Timer; the others are the same
// purgatory with their timer plugged in through purgatory.Timeouts, so the
// watcher layer is the same code for all.
func newPurgatory(name string, clock *purgatory.RealClock) *purgatory.Purgatory[int] {
	cfg := purgatory.Config{Timer: purgatory.TimerConfig{Clock: clock}}
	switch name {
	case Kwal:
	case Runtime:
		cfg.Timeouts = runtimeTimeouts{clock}
	case Russell:
		tw := timingwheel.NewTimingWheel(time.Millisecond, 20)
		tw.Start()
		cfg.Timeouts = &russellTimeouts{clock: clock, tw: tw}
	default:
		panic("purgbench: no purgatory for contestant " + name)
	}
	p, err := purgatory.New[int](cfg)
	if err != nil {
		panic(err) // defaults are valid
	}
	return p
}

// handles is where a request keeps another contestant's timer handle. The
// purgatory may disarm on the completer's goroutine while arming on the
// generator's, hence atomics.
type handles struct {
	rt atomic.Pointer[time.Timer]
	tw atomic.Pointer[timingwheel.Timer]
}

// runtimeTimeouts arms each timeout with time.AfterFunc. Close cannot list
// the armed timers; the workloads complete what is left themselves.
type runtimeTimeouts struct{ clock *purgatory.RealClock }

func (t runtimeTimeouts) Arm(op purgatory.Operation, deadline int64, x purgatory.Expirer) error {
	op.(*request).h.rt.Store(time.AfterFunc(time.Duration(deadline-t.clock.Now()), x.Expire))
	return nil
}

func (runtimeTimeouts) Disarm(op purgatory.Operation) bool {
	if t := op.(*request).h.rt.Load(); t != nil {
		return t.Stop()
	}
	return false
}

func (runtimeTimeouts) Close() []purgatory.Expirer { return nil }

// russellTimeouts arms each timeout on RussellLuo/timingwheel (1 ms × 20,
// Kafka's shape).
type russellTimeouts struct {
	clock *purgatory.RealClock
	tw    *timingwheel.TimingWheel
}

func (t *russellTimeouts) Arm(op purgatory.Operation, deadline int64, x purgatory.Expirer) error {
	op.(*request).h.tw.Store(t.tw.AfterFunc(time.Duration(deadline-t.clock.Now()), x.Expire))
	return nil
}

func (*russellTimeouts) Disarm(op purgatory.Operation) bool {
	if t := op.(*request).h.tw.Load(); t != nil {
		return t.Stop()
	}
	return false
}

func (t *russellTimeouts) Close() []purgatory.Expirer {
	t.tw.Stop()
	return nil
}

var _ purgatory.Timeouts = runtimeTimeouts{}
var _ purgatory.Timeouts = (*russellTimeouts)(nil)

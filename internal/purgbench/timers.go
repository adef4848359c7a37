package purgbench

import (
	"time"

	"github.com/RussellLuo/timingwheel"
	"github.com/kwal/kwal/purgatory"
)

// op is the timed thing every contestant arms. The kwal entry is embedded,
// the others keep their handle.
type op struct {
	kw       purgatory.TimerEntry
	rt       *time.Timer
	tw       *timingwheel.Timer
	fireFn   func()
	onFire   func(*op)
	deadline int64 // harness clock
	late     int64
	id       int32
	pOp      *pOp // owner in workloads P and I
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

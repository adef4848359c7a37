// Package feedtest waits in tests for a condition to hold, on change
// sources (changefeed.Source) rather than by polling.
package feedtest

import (
	"reflect"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/changefeed"
)

// WaitFor waits until cond holds: it evaluates cond now and again after
// each change of any of srcs (taking their channels before each check, so
// no change is missed), never polling. d is wall-clock time and only
// bounds a hung test, which fails naming what.
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool, srcs ...changefeed.Source) {
	t.Helper()
	if len(srcs) == 0 {
		t.Fatalf("waitFor %s: nothing to wait on", what)
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	cases := make([]reflect.SelectCase, len(srcs)+1)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)}
	for {
		for i, s := range srcs {
			cases[i+1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.Changed())}
		}
		if cond() {
			return
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Armed is a manual clock as a change source: it changes when a timer is
// armed, that is when a goroutine under test goes back to waiting on the
// clock (clock.Manual.Armed).
func Armed(c *clock.Manual) changefeed.Source { return armed{c} }

type armed struct{ c *clock.Manual }

func (a armed) Changed() <-chan struct{} { return a.c.Armed() }

//go:build linux

package latbench

import (
	"testing"
	"time"
)

// mustEnd fails the test unless ch closes within limit (a bound far
// above any due time here, so only a lost wakeup can reach it).
func mustEnd(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s: never woken", what)
	}
}

// A wait ends no sooner than wireCoalesce before its due time; one due already ends at once;
// an earlier wait added while the wire sleeps towards a later one is woken
// at its own time, not the later one's; close ends the waits still
// pending.
func TestWireWakesAtDueTimes(t *testing.T) {
	w := newWire()
	defer w.close()

	past := w.after(time.Now().Add(-time.Second))
	select {
	case <-past:
	default:
		t.Fatal("a wait already due did not end at once")
	}

	late := w.after(time.Now().Add(time.Hour)) // the wire now sleeps towards it
	for _, d := range []time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		due := time.Now().Add(d)
		ch := w.after(due)
		mustEnd(t, ch, d.String())
		if now := time.Now(); now.Before(due.Add(-wireCoalesce)) {
			t.Fatalf("%v wait ended %v early", d, due.Sub(now))
		}
		select {
		case <-late:
			t.Fatal("the hour-long wait ended with a short one")
		default:
		}
	}

	// Several at once end in due order.
	base := time.Now().Add(5 * time.Millisecond)
	var chs []<-chan struct{}
	for i := 4; i >= 0; i-- {
		chs = append(chs, w.after(base.Add(time.Duration(i)*3*time.Millisecond)))
	}
	for i := len(chs) - 1; i >= 0; i-- {
		mustEnd(t, chs[i], "batch")
		for j := 0; j < i; j++ {
			select {
			case <-chs[j]:
				// Allowed only if its due time has passed too.
				if due := base.Add(time.Duration(4-j) * 3 * time.Millisecond); time.Now().Before(due.Add(-wireCoalesce)) {
					t.Fatalf("wait %d ended before its due time", j)
				}
			default:
			}
		}
	}

	w.close()
	mustEnd(t, late, "pending at close")
	if after := w.after(time.Now().Add(time.Hour)); after == nil {
		t.Fatal("nil channel after close")
	} else {
		mustEnd(t, after, "after close")
	}
}

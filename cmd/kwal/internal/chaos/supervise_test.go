package chaos

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/kwal/kwal/internal/retry"
)

// TestSuperviseBacksOffAndLogsOnce: a broker that refuses to start 40
// times (its metadata Kafka down: it exits at once) is started 41 times,
// with a pause between attempts, and the refusals are one state change in
// the log, not a line each (process seeds 23 and 30 logged 116 and 128
// "refused to start" lines in 14 s and failed the flood check). The bound
// on the lines follows from the episode's two-second period and the
// elapsed time, not from the schedule.
func TestSuperviseBacksOffAndLogsOnce(t *testing.T) {
	h := newLogCounter(slog.DiscardHandler)
	const refusals = 40
	calls := 0
	start := time.Now()
	supervise(slog.New(h), 1, time.Minute, retry.Backoff{Base: time.Millisecond, Max: 2 * time.Millisecond}, func() error {
		calls++
		if calls <= refusals {
			return errors.New("controller: create topic __kwal_cluster_state: broker closed the connection")
		}
		return nil
	})
	elapsed := time.Since(start)
	if calls != refusals+1 {
		t.Fatalf("start called %d times, want %d", calls, refusals+1)
	}
	// Each pause is at least the base: the attempts cannot be closer.
	if min := refusals * time.Millisecond; elapsed < min {
		t.Fatalf("%d refusals in %v: no pause between attempts (want >= %v)", refusals, elapsed, min)
	}
	_, warns := h.floods(elapsed)
	if most := 1 + int(elapsed/(2*time.Second)); warns > most {
		t.Fatalf("%d WARN lines for %d refusals in %v, want at most %d", warns, refusals, elapsed, most)
	}
}

// TestSuperviseGivesUpAfterSettle: a broker that never starts is tried
// until settle has passed, then reported once at ERROR.
func TestSuperviseGivesUpAfterSettle(t *testing.T) {
	h := newLogCounter(slog.DiscardHandler)
	calls := 0
	supervise(slog.New(h), 2, 20*time.Millisecond, retry.Backoff{Base: time.Millisecond, Max: time.Millisecond}, func() error {
		calls++
		return errors.New("refused")
	})
	if calls < 2 {
		t.Fatalf("start called %d times in a 20 ms settle, want several", calls)
	}
	h.state.mu.Lock()
	defer h.state.mu.Unlock()
	if n := h.state.mu.byMsg["chaos: broker does not start again"]; n != 1 {
		t.Fatalf("%d 'does not start again' lines, want 1: %v", n, h.state.mu.byMsg)
	}
}

package chaos

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestFloodCheckFlagsTheHandFoundRates: the floods issue 12 found by hand
// (a follower's WARN every 20 ms, 1,232 lines in 25 s; a full disk, 450
// lines in 25 s) fail a run, as they would have in a 3 s schedule at the
// same rates; a message logged once per partition and broker at a few
// state changes does not.
func TestFloodCheckFlagsTheHandFoundRates(t *testing.T) {
	cases := []struct {
		name    string
		lines   int
		elapsed time.Duration
		flood   bool
	}{
		{"follower fallback retries, 25 s", 1232, 25 * time.Second, true},
		{"the same rate in a 3 s schedule", 1232 * 3 / 25, 3 * time.Second, true},
		{"full disk, 25 s", 450, 25 * time.Second, true},
		{"the same rate in a 3 s schedule", 450 * 3 / 25, 3 * time.Second, false},
		{"state changes: 3 brokers × 8 partitions × 2", 48, 3 * time.Second, false},
	}
	for _, c := range cases {
		h := newLogCounter(slog.DiscardHandler)
		l := slog.New(h)
		for range c.lines {
			l.Warn("follower: fetch from the leader failed", "partition", "t-0")
		}
		l.Info("not counted")
		floods, total := h.floods(c.elapsed)
		if total != c.lines {
			t.Fatalf("%s: counted %d WARN lines of %d", c.name, total, c.lines)
		}
		if got := len(floods) > 0; got != c.flood {
			t.Errorf("%s: %d lines in %v: flood %v, want %v (%v)", c.name, c.lines, c.elapsed, got, c.flood, floods)
		}
		if c.flood && !strings.Contains(floods[0], "fetch from the leader failed") {
			t.Errorf("%s: %q does not name the message", c.name, floods[0])
		}
	}
}

package combiner

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// warnCounter counts WARN-or-worse records by message.
type warnCounter struct {
	mu    sync.Mutex
	lines map[string]int
	// after is the "after" of the last "succeed again" line: how long
	// the outage lasted on the combiner's clock.
	after time.Duration
}

func (c *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (c *warnCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lines == nil {
		c.lines = map[string]int{}
	}
	c.lines[r.Level.String()+" "+r.Message]++
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "after" {
			c.after = a.Value.Duration()
		}
		return true
	})
	return nil
}
func (c *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *warnCounter) WithGroup(string) slog.Handler      { return c }

// TestStoreOutageLogsStateChanges: the store refuses every PUT for a
// minute of the combiner's clock while objects of several partitions
// retry with backoff. The log holds one line when uploads start failing,
// one per 10 s with the count, and one when they succeed again: not one
// WARN per attempt of every object (issue 12's log floods).
func TestStoreOutageLogsStateChanges(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var refused atomic.Int64
	faults := func(int) fault {
		if down.Load() {
			refused.Add(1)
			return fault{before: httpErr{503}}
		}
		return fault{}
	}
	lines := &warnCounter{}
	r := newRig(t, Config{UploadBytes: 64, Logger: slog.New(lines), BackoffMax: 500 * time.Millisecond, UploadTimeout: 10 * time.Minute}, faults, nil)
	var acked atomic.Int64
	want := submitAll(t, r.c, 4, 5, 40, func(_ UploadedObject, err error) {
		if err == nil {
			acked.Add(1)
		}
	})
	waitFor(t, "a minute of outage", func() bool { return r.clk.Now().Sub(t0) >= time.Minute })
	down.Store(false)
	waitFor(t, "every slice uploaded", func() bool { return acked.Load() == 20 })
	r.close(t)
	checkOrder(t, r.pub.published(), want)
	lines.mu.Lock()
	defer lines.mu.Unlock()
	warns := 0
	for k, n := range lines.lines {
		if strings.HasPrefix(k, "WARN") || strings.HasPrefix(k, "ERROR") {
			warns += n
		}
	}
	t.Logf("%d refused PUTs, %d retries; lines %v", refused.Load(), r.c.Metrics().UploadRetries, lines.lines)
	if refused.Load() < 50 {
		t.Fatalf("only %d refused PUTs: the outage did not make objects retry", refused.Load())
	}
	// One "failing" line, then one per failureLogEvery of the outage (at
	// least a minute; the pumped clock may run past it before the test
	// heals the store), and one when it ends.
	if lines.after < time.Minute {
		t.Fatalf("the outage lasted %v on the clock, want at least a minute", lines.after)
	}
	if stills := int(lines.after / failureLogEvery); warns > 1+stills || lines.lines["WARN combiner: upload failing; retrying with backoff"] != 1 ||
		lines.lines["INFO combiner: uploads succeed again"] != 1 {
		t.Fatalf("log lines over %v of outage: %v", lines.after, lines.lines)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/retry"
)

// errStartWait: kwal broker gave up waiting at start for a part it
// cannot run without (remote.wal.metadata.start.wait.ms passed).
var errStartWait = errors.New("gave up waiting at start")

// startWait is how kwal broker waits at start for its metadata Kafka, as
// a Kafka broker waits for its controller quorum rather than exiting:
// attempts with a growing pause between them (Backoff, on Clock) until one
// succeeds or Bound has passed. The wait is one state change in the log:
// one WARN when the first attempt fails (naming what, where, the error
// and the bound), one INFO when an attempt succeeds after failures, and
// on giving up an error that says what to do; never a line per attempt.
// The chaos harness's supervisor (cmd/kwal/internal/chaos/supervise.go)
// sees such a broker as starting, and restarts it with its own pause only
// once the bound has passed and the broker exited.
type startWait struct {
	Bound   time.Duration
	Backoff retry.Backoff
	Clock   clock.Clock
	Logger  *slog.Logger
}

// permanent marks an attempt's error that waiting does not mend: run
// returns it (unmarked) at once.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// startWaitBackoff is the pause between attempts: 100 ms, doubling to 2 s.
var startWaitBackoff = retry.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}

// run calls attempt until it returns nil or Bound has passed (counted
// from the first attempt; the pause that would end past it is not
// taken). what names the part, where its address and key, fix what an
// operator should do; they go into the log and the error, which wraps
// errStartWait and the last attempt's error.
func (w startWait) run(ctx context.Context, what, where, fix string, attempt func(context.Context) error) error {
	start := w.Clock.Now()
	deadline := start.Add(w.Bound)
	var ep retry.Episode // Every 0: Entered and Left only, one of each per wait
	for n := 1; ; n++ {
		err := attempt(ctx)
		now := w.Clock.Now()
		if p, ok := err.(permanent); ok {
			return p.error
		}
		if err == nil {
			if r, _, d := ep.OK(now); r == retry.Left {
				w.Logger.Info("reached "+what+" at start", "where", where, "attempts", n, "waited", d.Round(time.Millisecond))
			}
			return nil
		}
		if r, _ := ep.Fail(now); r == retry.Entered {
			w.Logger.Warn("cannot reach "+what+" at start; retrying", "where", where, "err", err, "wait_up_to", w.Bound)
		}
		pause := w.Backoff.Delay(n, 0)
		if ctx.Err() != nil || !now.Add(pause).Before(deadline) {
			return fmt.Errorf("%w: %s (%s) not reachable within remote.wal.metadata.start.wait.ms=%d (%d attempts over %s): %w; %s",
				errStartWait, what, where, w.Bound.Milliseconds(), n, now.Sub(start).Round(time.Millisecond), err, fix)
		}
		t := w.Clock.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
	}
}

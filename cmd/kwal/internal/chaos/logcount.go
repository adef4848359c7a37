package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// A schedule fails for a log flood when one message is logged at WARN or
// worse more than FloodBase + FloodPerSecond × the run's seconds times: a
// component that retries must back off and log a state change once, with
// a count (issue 12). The bound is a rate because the floods found by hand
// were rates (a follower's WARN every 20 ms, 1,232 lines in 25 s; a full
// disk, 450 in 25 s) that a schedule of a few seconds never summed to a
// fixed bound of 2,000. FloodBase leaves room for one line per partition
// and broker at each of a schedule's state changes.
const (
	FloodBase      = 60
	FloodPerSecond = 4
)

// floodBound is the bound of a run that took elapsed.
func floodBound(elapsed time.Duration) int {
	return FloodBase + int(FloodPerSecond*elapsed.Seconds())
}

// logCounter is a slog.Handler that counts WARN-or-worse records by
// message and passes every record to next.
type logCounter struct {
	next  slog.Handler
	state *counts
}

type counts struct {
	mu struct {
		sync.Mutex
		byMsg map[string]int
	}
}

var _ slog.Handler = logCounter{}

func newLogCounter(next slog.Handler) logCounter {
	c := &counts{}
	c.mu.byMsg = map[string]int{}
	return logCounter{next: next, state: c}
}

func (h logCounter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h logCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.state.mu.Lock()
		h.state.mu.byMsg[r.Message]++
		h.state.mu.Unlock()
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h logCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return logCounter{next: h.next.WithAttrs(as), state: h.state}
}

func (h logCounter) WithGroup(name string) slog.Handler {
	return logCounter{next: h.next.WithGroup(name), state: h.state}
}

// floods returns the messages logged more than floodBound(elapsed)
// times, most first, and the total of WARN-or-worse lines.
func (h logCounter) floods(elapsed time.Duration) ([]string, int) {
	bound := floodBound(elapsed)
	h.state.mu.Lock()
	defer h.state.mu.Unlock()
	var out []string
	total := 0
	type mc struct {
		msg string
		n   int
	}
	var all []mc
	for m, n := range h.state.mu.byMsg {
		total += n
		all = append(all, mc{m, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].msg < all[j].msg })
	for _, x := range all {
		if x.n > bound {
			out = append(out, fmt.Sprintf("log flood: %q logged %d times at WARN or worse in %v (bound %d + %d/s = %d)",
				x.msg, x.n, elapsed.Round(time.Millisecond), FloodBase, FloodPerSecond, bound))
		}
	}
	return out, total
}

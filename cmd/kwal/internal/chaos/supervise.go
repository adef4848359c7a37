package chaos

import (
	"log/slog"
	"time"

	"github.com/kwal/kwal/internal/retry"
)

// supervise starts broker id with start until it succeeds or settle has
// passed, as a supervisor would (systemd's Restart= with a RestartSec that
// grows): a broker checks its store and metadata Kafka before it listens.
// A `kwal broker` process waits for an unreachable metadata Kafka up to
// remote.wal.metadata.start.wait.ms (cmd/kwal startwait.go) and exits
// past it; an in-process broker, or one whose store is down, refuses at
// once. Without a pause between attempts such a broker is started
// hundreds of times a second. A run of refusals is logged as one state change: when it
// starts, at most every two seconds with a count, and when the broker
// starts again.
func supervise(log *slog.Logger, id int32, settle time.Duration, backoff retry.Backoff, start func() error) {
	deadline := time.Now().Add(settle)
	refusals := retry.Episode{Every: 2 * time.Second}
	for attempt := 1; ; attempt++ {
		err := start()
		now := time.Now()
		if err == nil {
			if r, n, d := refusals.OK(now); r == retry.Left {
				log.Info("chaos: broker started again", "broker", id, "refusals", n, "after", d.Round(time.Millisecond))
			}
			return
		}
		if now.After(deadline) {
			log.Error("chaos: broker does not start again", "broker", id, "attempts", attempt, "err", err)
			return
		}
		switch r, n := refusals.Fail(now); r {
		case retry.Entered:
			log.Warn("chaos: broker refused to start; starting it again", "broker", id, "err", err)
		case retry.Still:
			log.Warn("chaos: broker still refuses to start", "broker", id, "attempts", attempt, "refusals", n, "err", err)
		}
		// A supervisor's restart pause, on the real clock the brokers run on.
		time.Sleep(backoff.Delay(attempt, 0))
	}
}

package metadata

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Embedded is the in-process Kafka the metadata topic lives on when
// remote.wal.metadata.bootstrap.servers is empty: franz-go's kfake with its
// state persisted under a data directory, so a restarted broker finds its
// metadata again.
type Embedded struct {
	c *kfake.Cluster
}

// StartEmbedded starts a one-broker kfake cluster on a free loopback port,
// persisting to dir (created if needed; an existing state is reloaded).
// kfake compacts cleanup.policy=compact topics every log.cleaner.backoff.ms,
// set here to 30 s. Close it when done.
func StartEmbedded(dir string, logger *slog.Logger) (*Embedded, error) {
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.DataDir(dir),
		kfake.WithLogger(kfakeLogger{logger}),
		kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": "30000"}),
	)
	if err != nil {
		return nil, fmt.Errorf("metadata: start embedded kfake in %s: %w", dir, err)
	}
	logger.Info("embedded metadata cluster started", "dir", dir, "bootstrap", c.ListenAddrs())
	return &Embedded{c: c}, nil
}

// Bootstrap returns the addresses to give TopicConfig.Bootstrap.
func (e *Embedded) Bootstrap() []string { return e.c.ListenAddrs() }

// Compact compacts every compacted topic now (tests and tools).
func (e *Embedded) Compact() { e.c.Compact() }

// Cluster exposes the kfake cluster (fault hooks in tests).
func (e *Embedded) Cluster() *kfake.Cluster { return e.c }

// Close stops the cluster and flushes its state to the data directory.
func (e *Embedded) Close() { e.c.Close() }

type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, msg string, args ...any) {
	var lv slog.Level
	switch level {
	case kfake.LogLevelError:
		lv = slog.LevelError
	case kfake.LogLevelWarn:
		lv = slog.LevelWarn
	case kfake.LogLevelInfo, kfake.LogLevelDebug:
		return // kfake logs every request at info
	default:
		return
	}
	k.l.Log(context.Background(), lv, "kfake: "+fmt.Sprintf(msg, args...))
}

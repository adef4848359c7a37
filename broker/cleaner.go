package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/kafkalog"
)

// The log cleaner: every log.cleaner.backoff.ms each replica (leader or
// follower) compacts its own logs of topics whose cleanup.policy includes
// compact, up to its high watermark, when the dirty ratio reaches the
// topic's min.cleanable.dirty.ratio (kafkalog.Log.Compact). Replicas clean
// independently; because the cleaner decides from the data alone (the
// tombstone horizon is in the data's time), replicas that clean the same
// range keep the same bytes.

// Kafka's defaults for the cleaner's topic configs.
const (
	DefaultMinCleanableDirtyRatio = 0.5
	DefaultDeleteRetentionMs      = 86_400_000 // delete.retention.ms: one day
	DefaultLogCleanerBackoff      = 15 * time.Second
)

// cleanupPolicy parses cleanup.policy: "delete", "compact" or both,
// comma-separated in any order.
func cleanupPolicy(v string) (compact, del bool, err error) {
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "compact":
			compact = true
		case "delete":
			del = true
		default:
			return false, false, fmt.Errorf("unknown policy %q (want delete, compact or compact,delete)", p)
		}
	}
	return compact, del, nil
}

// deletesByRetention says whether retention.ms/bytes delete segments of a
// topic: its cleanup.policy includes delete (the default).
func deletesByRetention(configs map[string]string) bool {
	v, ok := configs["cleanup.policy"]
	if !ok {
		return true
	}
	_, del, err := cleanupPolicy(v)
	return err != nil || del
}

// compactConfigOf reads the cleaner's topic configs (checked at creation).
func compactConfigOf(configs map[string]string) (kafkalog.CompactConfig, bool) {
	compact, _, err := cleanupPolicy(configs["cleanup.policy"])
	if err != nil || !compact {
		return kafkalog.CompactConfig{}, false
	}
	cc := kafkalog.CompactConfig{MinCleanableDirtyRatio: DefaultMinCleanableDirtyRatio, DeleteRetentionMs: DefaultDeleteRetentionMs}
	if v, ok := configs["min.cleanable.dirty.ratio"]; ok {
		cc.MinCleanableDirtyRatio, _ = strconv.ParseFloat(v, 64)
	}
	if v, ok := configs["delete.retention.ms"]; ok {
		cc.DeleteRetentionMs, _ = strconv.ParseInt(v, 10, 64)
	}
	if v, ok := configs["min.compaction.lag.ms"]; ok {
		cc.MinCompactionLagMs, _ = strconv.ParseInt(v, 10, 64)
	}
	return cc, true
}

// CleanResult is what one cleaner pass did to one partition.
type CleanResult struct {
	Partition TopicPartition
	Stats     kafkalog.CompactStats
	Err       error
}

// CleanLogs runs one cleaner pass over this broker's compacted
// partitions and returns what it did. The cleaner loop calls it every
// log.cleaner.backoff.ms; tests call it directly.
func (b *Broker) CleanLogs() []CleanResult {
	var out []CleanResult
	for _, p := range b.partitionsSnapshot() {
		ts, ok := b.ctrl.Topic(p.tp.Topic)
		if !ok {
			continue
		}
		cc, ok := compactConfigOf(ts.Configs)
		if !ok {
			continue
		}
		cc.UpTo = p.log.HighWatermark()
		st, err := p.log.Compact(cc)
		if errors.Is(err, kafkalog.ErrClosed) {
			continue // the partition was dropped meanwhile
		}
		if err != nil {
			b.logger.Warn("log cleaner: pass failed; retrying after the backoff", "partition", p.tp, "err", err)
		}
		if st.Cleaned || err != nil {
			out = append(out, CleanResult{Partition: p.tp, Stats: st, Err: err})
		}
	}
	return out
}

func (b *Broker) cleanerLoop(t clock.Timer) {
	defer b.wg.Done()
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C():
		}
		b.CleanLogs()
		t.Reset(b.cfg.LogCleanerBackoff)
	}
}

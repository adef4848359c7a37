package broker

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/kwal/kwal/kafkalog"
)

var errInvalidConfig = errors.New("broker: invalid topic config")

// Topic configs the broker accepts, with how to check a value. Every one
// is applied by each replica (topiclifecycle.go, also to open partitions
// when AlterConfigs changes them): segment.bytes and segment.ms roll
// segments, retention.ms and retention.bytes delete old segments (the
// broker's retention check, every log.retention.check.interval.ms),
// max.message.bytes refuses larger batches (MESSAGE_TOO_LARGE),
// min.insync.replicas gates acks=all, message.timestamp.type=LogAppendTime
// has the leader stamp batches. compression.type accepts only "producer":
// kwal stores batches as the producer compressed them and does not
// recompress. cleanup.policy is delete, compact or both (compact runs the
// log cleaner, cleaner.go).
var topicConfigCheck = map[string]func(v string) error{
	TopicConfigRemoteWAL: func(v string) error {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("must be true or false")
		}
		return nil
	},
	// Read by the controller when it fences the leader (liveness.go).
	"unclean.leader.election.enable": func(v string) error {
		if v != "true" && v != "false" {
			return fmt.Errorf("must be true or false")
		}
		return nil
	},
	"min.insync.replicas":   intInRange(1, math.MaxInt16, "at most the topic's replication factor"),
	"segment.bytes":         intInRange(14, math.MaxInt32, "Kafka's minimum is 14 bytes"),
	"retention.ms":          intInRange(-1, math.MaxInt64, "-1 keeps records forever"),
	"retention.bytes":       intInRange(-1, math.MaxInt64, "-1 is unlimited"),
	"delete.retention.ms":   intInRange(0, math.MaxInt64, "how long tombstones stay after compaction"),
	"min.compaction.lag.ms": intInRange(0, math.MaxInt64, "how long a record stays uncompacted"),
	// Topic administration: the other keys clients set at creation.
	"segment.ms":        intInRange(1, math.MaxInt64, "how long before a segment rolls"),
	"max.message.bytes": intInRange(1, math.MaxInt32, "the largest batch a producer may send"),
	"compression.type": func(v string) error {
		switch v {
		case "producer":
			return nil
		case "uncompressed", "gzip", "snappy", "lz4", "zstd":
			return fmt.Errorf("kwal does not recompress batches: only producer (keep the producer's compression) is accepted")
		}
		return fmt.Errorf("must be producer (uncompressed, gzip, snappy, lz4 and zstd need recompression, which kwal does not do)")
	},
	"message.timestamp.type": func(v string) error {
		if v != "CreateTime" && v != "LogAppendTime" {
			return fmt.Errorf("must be CreateTime or LogAppendTime")
		}
		return nil
	},
	"cleanup.policy": func(v string) error {
		_, _, err := cleanupPolicy(v)
		return err
	},
	"min.cleanable.dirty.ratio": func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return fmt.Errorf("must be a number in [0, 1]")
		}
		return nil
	},
}

// intInRange checks an integer topic config against [lo, hi].
func intInRange(lo, hi int64, hint string) func(v string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer in [%d, %d] (%s)", lo, hi, hint)
		}
		return nil
	}
}

// topicConfigDefaults are the values reported for unset keys.
func (b *Broker) topicConfigDefaults() map[string]string {
	seg := b.cfg.SegmentBytes
	if seg == 0 {
		seg = 1 << 30
	}
	return map[string]string{
		TopicConfigRemoteWAL:             "false",
		"min.insync.replicas":            strconv.Itoa(b.cfg.MinInsyncReplicas),
		"segment.bytes":                  strconv.FormatInt(seg, 10),
		"retention.ms":                   strconv.FormatInt(b.cfg.RetentionMs, 10),
		"retention.bytes":                strconv.FormatInt(b.cfg.RetentionBytes, 10),
		"cleanup.policy":                 "delete",
		"min.cleanable.dirty.ratio":      "0.5",
		"delete.retention.ms":            "86400000",
		"min.compaction.lag.ms":          "0",
		"unclean.leader.election.enable": strconv.FormatBool(b.cfg.UncleanLeaderElection),
		// Topic administration: the other keys clients set at creation.
		"segment.ms":             strconv.Itoa(kafkalog.DefaultSegmentMs),
		"max.message.bytes":      strconv.Itoa(int(b.cfg.MessageMaxBytes)),
		"compression.type":       "producer",
		"message.timestamp.type": "CreateTime",
	}
}

// checkTopicConfigs validates a CreateTopics or AlterConfigs config set
// for a topic of replicationFactor replicas (AlterConfigs gives
// math.MaxInt16: min.insync.replicas is held to it at creation only).
func (b *Broker) checkTopicConfigs(configs map[string]string, replicationFactor int16) error {
	for k, v := range configs {
		check, ok := topicConfigCheck[k]
		if !ok {
			return fmt.Errorf("%w: unknown topic config %q", errInvalidConfig, k)
		}
		if err := check(v); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", errInvalidConfig, k, v, err)
		}
	}
	if v, ok := configs["min.insync.replicas"]; ok {
		if n, _ := strconv.Atoi(v); n > int(replicationFactor) {
			return fmt.Errorf("%w: min.insync.replicas=%q is above the replication factor %d: every acks=all produce would fail with NOT_ENOUGH_REPLICAS", errInvalidConfig, v, replicationFactor)
		}
	}
	if mode, _ := replicationModeOf(configs); mode == RemoteWAL {
		if !b.cfg.RemoteWAL.SystemEnable {
			return fmt.Errorf("%w: %s=true needs remote.log.wal.storage.system.enable=true on the broker", errInvalidConfig, TopicConfigRemoteWAL)
		}
		if b.cfg.Replicator == nil {
			return fmt.Errorf("%w: %s=true but this broker has no remote WAL replicator", errInvalidConfig, TopicConfigRemoteWAL)
		}
	}
	return nil
}

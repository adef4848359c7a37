package broker

import (
	"errors"
	"fmt"
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
	TopicConfigRemoteWAL: func(v string) error { _, err := strconv.ParseBool(v); return err },
	"min.insync.replicas": func(v string) error {
		n, err := strconv.Atoi(v)
		if err == nil && n < 1 {
			err = fmt.Errorf("must be at least 1")
		}
		return err
	},
	"segment.bytes": func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err == nil && n < 14 {
			err = fmt.Errorf("must be at least 14")
		}
		return err
	},
	"retention.ms": func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n < -1 {
			err = fmt.Errorf("must be -1 or more")
		}
		return err
	},
	"retention.bytes": func(v string) error { return atLeast(v, -1) },
	"segment.ms":      func(v string) error { return atLeast(v, 1) },
	"max.message.bytes": func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err == nil && n < 1 {
			err = fmt.Errorf("must be at least 1")
		}
		return err
	},
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
		if err == nil && !(f >= 0 && f <= 1) {
			err = fmt.Errorf("must be in [0, 1]")
		}
		return err
	},
	"delete.retention.ms": func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n < 0 {
			err = fmt.Errorf("must be 0 or more")
		}
		return err
	},
	"min.compaction.lag.ms": func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n < 0 {
			err = fmt.Errorf("must be 0 or more")
		}
		return err
	},
}

// topicConfigDefaults are the values reported for unset keys.
func (b *Broker) topicConfigDefaults() map[string]string {
	seg := b.cfg.SegmentBytes
	if seg == 0 {
		seg = 1 << 30
	}
	return map[string]string{
		TopicConfigRemoteWAL:        "false",
		"min.insync.replicas":       strconv.Itoa(b.cfg.MinInsyncReplicas),
		"segment.bytes":             strconv.FormatInt(seg, 10),
		"retention.ms":              strconv.FormatInt(b.cfg.RetentionMs, 10),
		"retention.bytes":           strconv.FormatInt(b.cfg.RetentionBytes, 10),
		"cleanup.policy":            "delete",
		"min.cleanable.dirty.ratio": "0.5",
		"delete.retention.ms":       "86400000",
		"min.compaction.lag.ms":     "0",
		// Topic administration: the other keys clients set at creation.
		"segment.ms":             strconv.Itoa(kafkalog.DefaultSegmentMs),
		"max.message.bytes":      strconv.Itoa(kafkalog.DefaultMaxBatchBytes),
		"compression.type":       "producer",
		"message.timestamp.type": "CreateTime",
	}
}

func atLeast(v string, least int64) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err == nil && n < least {
		err = fmt.Errorf("must be at least %d", least)
	}
	return err
}

// checkTopicConfigs validates a CreateTopics config set.
func (b *Broker) checkTopicConfigs(configs map[string]string) error {
	for k, v := range configs {
		check, ok := topicConfigCheck[k]
		if !ok {
			return fmt.Errorf("%w: unknown topic config %q", errInvalidConfig, k)
		}
		if err := check(v); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", errInvalidConfig, k, v, err)
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

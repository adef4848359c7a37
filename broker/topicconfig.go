package broker

import (
	"errors"
	"fmt"
	"strconv"
)

var errInvalidConfig = errors.New("broker: invalid topic config")

// Topic configs the broker accepts, with how to check a value.
// segment.bytes, min.insync.replicas, retention.ms and retention.bytes
// are applied per partition (retention by the broker's retention check,
// every log.retention.check.interval.ms); cleanup.policy is delete,
// compact or both (compact runs the log cleaner, cleaner.go).
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
	// Read by the controller when it fences the leader (liveness.go).
	"unclean.leader.election.enable": func(v string) error {
		if v != "true" && v != "false" {
			return fmt.Errorf("must be true or false")
		}
		return nil
	},
	"retention.bytes": func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n < -1 {
			err = fmt.Errorf("must be -1 or more")
		}
		return err
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
	}
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

package broker

import (
	"errors"
	"fmt"
	"strconv"
)

var errInvalidConfig = errors.New("broker: invalid topic config")

// Topic configs the broker accepts, with how to check a value.
// segment.bytes and min.insync.replicas are applied per partition;
// retention.ms is stored and reported (retention is not enforced yet);
// cleanup.policy accepts only "delete".
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
	"cleanup.policy": func(v string) error {
		if v != "delete" {
			return fmt.Errorf("only delete is supported")
		}
		return nil
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
		"retention.ms":                   "604800000",
		"cleanup.policy":                 "delete",
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

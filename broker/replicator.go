package broker

import (
	"fmt"
	"strconv"

	"github.com/kwal/kwal/kafkalog"
)

// ReplicationMode says how a partition's followers get the leader's bytes.
type ReplicationMode int

const (
	// Classic: followers fetch records from the leader (Kafka today).
	Classic ReplicationMode = iota
	// RemoteWAL: the leader's FollowerFetch responses carry offsets, the
	// high watermark and the leader epoch with empty records; a
	// Replicator feeds the follower's log from object storage.
	RemoteWAL
)

func (m ReplicationMode) String() string {
	if m == RemoteWAL {
		return "remotewal"
	}
	return "classic"
}

// TopicConfigRemoteWAL is the KIP-1176 topic config selecting RemoteWAL.
const TopicConfigRemoteWAL = "remote.wal.storage.enable"

// replicationModeOf reads a topic's mode from its configs.
func replicationModeOf(configs map[string]string) (ReplicationMode, error) {
	v, ok := configs[TopicConfigRemoteWAL]
	if !ok {
		return Classic, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return Classic, fmt.Errorf("%s=%q: %v", TopicConfigRemoteWAL, v, err)
	}
	if b {
		return RemoteWAL, nil
	}
	return Classic, nil
}

// Replicator is the seam for the remotewal replication mode. The broker
// calls it on leadership changes of RemoteWAL partitions; it never calls
// it for Classic ones. Implementations own their goroutines.
//
// Leader side (remotewal.Manager): StartLeader when this broker becomes
// leader at leaderEpoch (fromOffset is the log end at that moment),
// StopLeader when it stops leading.
//
// Follower side (follower package): StartFollower when this broker
// becomes a follower of leader at leaderEpoch, after the broker truncated
// log by leader epoch (KIP-101); the Replicator then appends the leader's
// batches with log.AppendAsFollower, in order and exactly once, and calls
// notify after each append so the broker reports the new log end to the
// leader at once and wakes waiting consumers. StopFollower before the
// broker truncates again or leads.
//
// The broker keeps running its fetcher for RemoteWAL followers: the
// fetch reports the follower's log end (its acks=all vote) and brings back
// the high watermark and leader epoch, with no records.
type Replicator interface {
	StartLeader(tp TopicPartition, log *kafkalog.Log, leaderEpoch int32, fromOffset int64) error
	StopLeader(tp TopicPartition)
	StartFollower(tp TopicPartition, log *kafkalog.Log, leader int32, leaderEpoch int32, notify func()) error
	StopFollower(tp TopicPartition)
}

// LeaderLogEndObserver is implemented by a Replicator that wants the
// leader's log end offset, which remotewal FollowerFetch responses carry in
// the TagLeaderLogEnd tagged field (the high watermark cannot show bytes
// this follower is still missing).
type LeaderLogEndObserver interface {
	ObserveLeaderLogEnd(tp TopicPartition, leaderLogEnd int64)
}

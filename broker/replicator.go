package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/replica"
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
// it for Classic ones. Implementations own their goroutines. A Replicator
// holds no pointer to the broker: what it may do to a replica it does
// through the FollowerReplica handle it is given (rwnode implements it).
//
// Leader side (remotewal.Manager): StartLeader when this broker becomes
// leader at leaderEpoch (fromOffset is the log end at that moment),
// StopLeader when it stops leading. Between the two, log is the leader's
// log; its high watermark is the offset every in-sync replica holds.
//
// Follower side (follower package): StartFollower when this broker
// becomes a follower of a leader at a leader epoch, after the broker
// truncated the log by leader epoch (KIP-101); the Replicator then appends
// the leader's batches through r.AppendAsFollower, in order and exactly
// once, and calls r.Notify after each append so the broker reports the new
// log end to the leader at once and wakes waiting consumers. StopFollower
// before the broker truncates again or leads; the handle must not be used
// after it.
//
// The broker keeps running its fetcher for RemoteWAL followers: the
// fetch reports the follower's log end (its acks=all vote) and brings back
// the high watermark and leader epoch, with no records.
type Replicator interface {
	StartLeader(tp TopicPartition, log *kafkalog.Log, leaderEpoch int32, fromOffset int64) error
	StopLeader(tp TopicPartition)
	StartFollower(r FollowerReplica) error
	StopFollower(tp TopicPartition)
}

// FollowerReplica is the broker's handle on one of its follower replicas
// for one follow: one leader at one leader epoch. It is all a Replicator
// may touch of the broker. Safe for concurrent use.
type FollowerReplica interface {
	// TopicPartition is the replica's partition.
	TopicPartition() TopicPartition
	// LeaderEpoch is the leader epoch this follow runs at.
	LeaderEpoch() int32
	// LogEndOffset, LatestEpoch and EpochEntries read the replica's log
	// and its leader-epoch cache (the history KIP-101 truncates by).
	LogEndOffset() int64
	LatestEpoch() (int32, bool)
	EpochEntries() []kafkalog.EpochEntry
	// AppendAsFollower appends whole RecordBatch v2 batches the leader
	// wrote, keeping their offsets and epochs, and learns their producer
	// state. It fails with ErrStaleFollow once the replica has moved past
	// this follow (a newer leader epoch, or it leads), and with the log's
	// own errors (kafkalog) on a gap or bad batch; nothing is appended
	// then.
	AppendAsFollower(batches []byte) (kafkalog.AppendInfo, error)
	// AppendVerifiedAsFollower is AppendAsFollower for batches the caller
	// validated with kafkalog.ValidateBatchesCRC32C (see
	// kafkalog.Log.AppendVerifiedAsFollower).
	AppendVerifiedAsFollower(batches []byte) (kafkalog.AppendInfo, error)
	// AppendVerifiedRunAsFollower is AppendVerifiedAsFollower of the
	// concatenation of parts, written without concatenating them (see
	// kafkalog.Log.AppendVerifiedRunAsFollower).
	AppendVerifiedRunAsFollower(parts [][]byte) (kafkalog.AppendInfo, error)
	// Truncate cuts the log and the producer state to end at offset to.
	Truncate(to int64) error
	// Leader is the follow's leader as the controller knows it now.
	Leader() ReplicaLeader
	// Dial opens a Kafka wire connection to addr through the broker's
	// DialFunc (so fault tests see it), giving clientID in its requests.
	Dial(addr, clientID string, timeout time.Duration) (*WireConn, error)
	// Notify reports the replica's new log end to the leader at once and
	// wakes consumers waiting on it.
	Notify()
}

// ReplicaLeader names a follow's leader broker. Addr is empty and Rack is
// "" when the controller does not know the broker.
type ReplicaLeader struct {
	ID   int32
	Addr string
	Rack string
}

// ErrStaleFollow: the replica is no longer following at the handle's
// leader epoch, so an append through the handle is refused.
var ErrStaleFollow = errFetchStale

// Versions and bounds a Replicator's requests to a leader use: the same as
// the broker's replica fetcher.
const (
	ReplicaFetchVersion          = replicaFetchVersion
	ReplicaOffsetForEpochVersion = replicaOffsetForEpochVers
	ReplicaFetchResponseMax      = replicaFetchResponseMax
)

// LeaderLogEndObserver is implemented by a Replicator that wants the
// leader's log end offset, which remotewal FollowerFetch responses carry in
// the TagLeaderLogEnd tagged field (the high watermark cannot show bytes
// this follower is still missing).
type LeaderLogEndObserver interface {
	ObserveLeaderLogEnd(tp TopicPartition, leaderLogEnd int64)
}

// Protocol extensions of the remotewal mode (the KIP leaves the follower
// fetch's shape open). Both ride on Fetch v12, which Kafka brokers and
// clients accept unchanged:
//
//   - TagLeaderLogEnd: a tagged field of a remotewal partition in a replica
//     Fetch response carrying the leader's log end offset (uvarint). The
//     follower needs it to see that bytes exist that the metadata has not
//     shown it yet, so that it can fall back to the leader instead of
//     waiting forever; the high watermark cannot tell, since this follower
//     holds it back.
//   - FallbackRack: a replica Fetch whose rack_id is this value asks the
//     leader of a remotewal partition for record bytes (the follower's
//     "recovery stream"); every other replica fetch of a remotewal
//     partition gets offsets only. Those bytes are recorded in the ledger
//     as component "fallback".
//   - TagFetchStamp: a tagged field of a replica Fetch request (top level)
//     carrying the fetcher's replica.FetchStamp: incarnation, sequence and
//     broker epoch (three uvarints; a stamp of two, from a broker that
//     sends no epoch, has epoch 0). A remote-WAL follower's log end reports travel on a
//     connection of their own, so a report may overtake the long poll sent
//     before it; the leader takes a fetch's offset as the follower's log
//     end only if its stamp is newer than the one it has. Requests without
//     it (every other client) count as they do in Kafka; a malformed one
//     is refused with INVALID_REQUEST.
const (
	TagLeaderLogEnd uint32 = 0x6b77 // "kw"
	TagFetchStamp   uint32 = 0x6b78
	FallbackRack           = "kwal:fallback"
)

// setFetchStamp writes s into a replica fetch request (TagFetchStamp).
func setFetchStamp(req *kmsg.FetchRequest, s replica.FetchStamp) {
	v := binary.AppendUvarint(binary.AppendUvarint(nil, s.Incarnation), s.Seq)
	req.UnknownTags.Set(TagFetchStamp, binary.AppendUvarint(v, uint64(max(s.BrokerEpoch, 0))))
}

// errBadFetchStamp: a TagFetchStamp that does not hold two or three
// uvarints (the third a broker epoch that fits an int64).
var errBadFetchStamp = errors.New("broker: malformed fetch stamp tag")

// fetchStampOf reads a request's TagFetchStamp (the zero stamp when it has
// none; errBadFetchStamp when it is malformed).
func fetchStampOf(tags *kmsg.Tags) (replica.FetchStamp, error) {
	var (
		s   replica.FetchStamp
		err error
	)
	tags.Each(func(k uint32, v []byte) {
		if k != TagFetchStamp {
			return
		}
		inc, n := binary.Uvarint(v)
		if n <= 0 {
			err = errBadFetchStamp
			return
		}
		seq, m := binary.Uvarint(v[n:])
		if m <= 0 {
			err = errBadFetchStamp
			return
		}
		var epoch uint64
		if rest := v[n+m:]; len(rest) > 0 {
			var k int
			if epoch, k = binary.Uvarint(rest); k <= 0 || k != len(rest) || epoch > math.MaxInt64 {
				err = errBadFetchStamp
				return
			}
		}
		s = replica.FetchStamp{Incarnation: inc, Seq: seq, BrokerEpoch: int64(epoch)}
	})
	return s, err
}

func leaderLogEndTag(rp *kmsg.FetchResponseTopicPartition) (int64, bool) {
	var (
		leo   int64
		found bool
	)
	rp.UnknownTags.Each(func(k uint32, v []byte) {
		if k != TagLeaderLogEnd {
			return
		}
		if x, n := binary.Uvarint(v); n > 0 {
			leo, found = int64(x), true
		}
	})
	return leo, found
}

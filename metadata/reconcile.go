package metadata

// Events of a leader change (KIP-1176's reconciliation) and of retention
// after leadership moved. Both are about a user partition, not an object,
// so they go to the metadata partition of that user partition.

// DeadRange is the KIP's "B2 publishes DELETE for 6–10": the leader elected
// at LeaderEpoch continues the partition at StartOffset (its log end when it
// became leader, the start of LeaderEpoch in its leader-epoch cache), so
// every slice of an older leader epoch at or past StartOffset is dead: it is
// never applied by a follower, never served, and needs no replica.
//
// One event stands for every entry it kills, those already published and
// those a deposed leader still uploads later, so it is published once per
// leader epoch, whether or not dead entries exist yet. Several events
// combine: an entry of epoch e is dead from
//
//	DeadFrom(e) = min { StartOffset of a DeadRange with LeaderEpoch > e }
//
// A minimum over a set, so events may arrive duplicated or in any order and
// a compacted topic (one record per partition and epoch, see
// DeadRangeRecordKey) gives the same answer as the full history.
type DeadRange struct {
	TopicPartition
	LeaderEpoch      int32 // the new leader's epoch; fences every older one
	StartOffset      int64 // the new leader's log end when elected
	BrokerID         int32 // the new leader
	EventTimestampMs int64
}

func (*DeadRange) Type() EventType { return TypeDeadRange }

func (d *DeadRange) Validate() error {
	return validatePartitionOffset("dead range", d.TopicPartition, d.LeaderEpoch, d.StartOffset)
}

// validatePartitionOffset checks the fields DeadRange and ReplicatedOffset
// share.
func validatePartitionOffset(what string, tp TopicPartition, epoch int32, offset int64) error {
	if tp.Topic == "" || tp.Partition < 0 {
		return malformed("%s: bad partition %s", what, tp)
	}
	if epoch < 0 || offset < 0 {
		return malformed("%s %s: leader epoch %d offset %d", what, tp, epoch, offset)
	}
	return nil
}

// ReplicatedOffset is a leader's vouch, for retention: at LeaderEpoch,
// every in-sync replica of the partition holds every offset below Offset
// (the leader's high watermark). Any broker may then delete an object whose
// entries are all below the vouched offsets of their partitions (or dead),
// whoever uploaded it. A vouch stays true after a leader change: a clean
// election keeps everything below the high watermark, and a follower never
// truncates below it. State keeps the highest (LeaderEpoch, Offset) per
// partition, so duplicates and reordering change nothing; the record key is
// per partition, so compaction keeps the latest.
type ReplicatedOffset struct {
	TopicPartition
	LeaderEpoch      int32
	Offset           int64
	BrokerID         int32
	EventTimestampMs int64
}

func (*ReplicatedOffset) Type() EventType { return TypeReplicatedOffset }

func (v *ReplicatedOffset) Validate() error {
	return validatePartitionOffset("replicated offset", v.TopicPartition, v.LeaderEpoch, v.Offset)
}

// deadFrom is DeadFrom over one partition's dead ranges (epoch → start).
func deadFrom(ranges map[int32]int64, epoch int32) (int64, bool) {
	var (
		from  int64
		found bool
	)
	for e, s := range ranges {
		if e > epoch && (!found || s < from) {
			from, found = s, true
		}
	}
	return from, found
}

// LiveEnd returns the last live offset of e given where its epoch is dead
// from (DeadFrom), and false when none of e is live.
func LiveEnd(e *SliceEntry, from int64, dead bool) (int64, bool) {
	if !dead || e.LastOffset < from {
		return e.LastOffset, true
	}
	if e.BaseOffset >= from {
		return 0, false
	}
	return from - 1, true
}

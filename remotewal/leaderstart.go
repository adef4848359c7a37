package remotewal

import "github.com/kwal/kwal/metadata"

// LeaderStart is what UploadStart knows of a partition whose leadership
// this broker takes at Epoch.
type LeaderStart struct {
	Epoch            int32
	LogStart, LogEnd int64
	// EndOfEpoch is the leader's own log's answer to OffsetsForLeaderEpoch
	// (kafkalog.Log.EndOffsetForEpoch): the largest epoch ≤ e it holds and
	// where that epoch ends.
	EndOfEpoch func(e int32) (epoch int32, end int64)
	// DeadFrom is metadata.State.DeadFrom for the partition.
	DeadFrom func(e int32) (from int64, dead bool)
	// Vouched is the highest offset a leader vouched every in-sync replica
	// holds (metadata.ReplicatedOffset), if HasVouch.
	Vouched  int64
	HasVouch bool
}

// Why UploadStart chose its offset.
const (
	StartAtLogEnd   = "log-end"   // the store holds everything below the log end
	StartAtGap      = "gap"       // the store's live entries end below the log end
	StartEmptyStore = "empty"     // the store holds nothing of the partition
	StartAtVouched  = "vouched"   // the store holds nothing; every in-sync replica holds the log up to a vouched offset
	StartAtLogStart = "log-start" // the store's entries end below the local log start
)

// UploadStart decides where a new leader's slice task starts cutting: at
// the end of the partition's published entries (published, from a
// metadata state caught up with the topic) that are live and agree with
// the leader's own log, when that is below its log end. The range between,
// which an older leader appended and never uploaded, is then uploaded by
// this leader in its own epoch (Manager tags every slice with the task's
// epoch), instead of staying out of the store, where followers could only
// get it from the leader (cross-AZ). Pure.
//
// An entry agrees with the leader's log when it is of the leader's epoch
// (an earlier life of this leadership), or the leader's log holds its
// epoch past the entry's last offset (the follower's fencing rule,
// replica.JudgeSlice: a follower of this leader can append it). Dead entries, and the dead part of one straddling
// its dead range, do not count. When the store holds nothing of the
// partition, the task starts at the highest vouched offset (below it
// every in-sync replica has the log, and retention may have deleted the
// objects) or, with no vouch, at the log start. Never below the log start
// nor above the log end.
//
// Ordering (invariant 4): entries are checked per partition and leader
// epoch. The catch-up entries are of this leader's epoch and come before
// everything it cuts later; a deposed leader's late entries are of its own
// epoch, so they never fall behind another uploader's in one epoch. For an
// earlier life of this epoch, the start is past its entries (they agree
// with the log, so they count), and Manager.StartPartition keeps a task
// restarted in the same epoch past its predecessor's slices.
func UploadStart(published []metadata.IndexedSlice, ls LeaderStart) (int64, string) {
	end := int64(-1)
	for i := range published {
		e := &published[i].SliceEntry
		if published[i].State != metadata.CopySegmentFinished {
			continue
		}
		last := e.LastOffset
		if ls.DeadFrom != nil {
			from, dead := ls.DeadFrom(e.LeaderEpoch)
			var live bool
			if last, live = metadata.LiveEnd(e, from, dead); !live {
				continue
			}
		}
		if e.LeaderEpoch != ls.Epoch {
			// Judged on the whole entry, as a follower judges it: one
			// straddling the end of its epoch in the leader's log is
			// fenced whole, so its range must be uploaded again.
			ep, epEnd := ls.EndOfEpoch(e.LeaderEpoch)
			if ep != e.LeaderEpoch || e.LastOffset >= epEnd {
				continue // diverges from the leader's log: followers fence it
			}
		}
		end = max(end, last+1)
	}
	clamp := func(o int64) int64 { return min(max(o, ls.LogStart), ls.LogEnd) }
	switch {
	case end >= ls.LogEnd:
		return ls.LogEnd, StartAtLogEnd
	case end < 0 && ls.HasVouch:
		return clamp(ls.Vouched), StartAtVouched
	case end < 0:
		return clamp(ls.LogStart), StartEmptyStore
	case end < ls.LogStart:
		return ls.LogStart, StartAtLogStart
	}
	return end, StartAtGap
}

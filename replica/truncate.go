package replica

import "github.com/kwal/kwal/kafkalog"

// EpochAnswer is a leader's answer to OffsetForLeaderEpoch for one asked
// epoch: the largest epoch it has at or below the asked one and where that
// epoch ends in its log (kafkalog.Log.EndOffsetForEpoch on the leader).
type EpochAnswer struct {
	Epoch     int32
	EndOffset int64
}

// TruncationStep is one step of KIP-101/KIP-279 truncation: cut the log to
// To (To >= log end means keep it), then, unless Complete, ask the leader
// again about the latest epoch left in the cut log.
type TruncationStep struct {
	To       int64
	Complete bool
}

// Truncation decides one step of truncation by leader epoch: the follower
// asked the leader about asked (its latest local epoch) and got ans. local
// is the follower's leader-epoch cache and leo its log end. This is the one
// truncation rule of kwal; the classic fetcher and the remote-WAL follower
// both use it (directly, or through TruncationOffset).
//
// Kafka's rules (AbstractFetcherThread.getOffsetTruncationState, with
// LeaderEpochFileCache.endOffsetFor answering on both sides):
//   - the leader answers with the asked epoch: cut at the smaller of the
//     two ends of that epoch; done;
//   - the leader answers with an older epoch E' (KIP-279: it never had the
//     asked one): if the follower has E' too, cut at the smaller end of E';
//     done. If it does not, cut at its own end of the largest epoch below
//     E' and ask again about that epoch;
//   - the answer has no epoch but an end offset (a leader speaking the old
//     protocol): cut at that offset; done;
//   - the answer is UNDEFINED_EPOCH_OFFSET: the leader has no epoch at or
//     below the asked one. Kafka truncates to the high watermark there
//     because its leader always caches its own current epoch; a kwal
//     leader caches an epoch only when it first appends in it, so an
//     empty answer means only that the leader never had the asked epoch:
//     cut where that epoch starts locally and ask about the one before
//     (done when there is none: the whole known history diverges).
//
// To is never above leo.
func Truncation(local []kafkalog.EpochEntry, leo int64, asked int32, ans EpochAnswer) TruncationStep {
	switch {
	case ans.EndOffset == kafkalog.UndefinedEpochOffset:
		i := entryIndex(local, asked)
		if i < 0 {
			// Asked about an epoch we do not have (the cache moved
			// meanwhile): start over from the latest epoch.
			return TruncationStep{To: leo, Complete: len(local) == 0}
		}
		return TruncationStep{To: min(local[i].StartOffset, leo), Complete: i == 0}
	case ans.Epoch == kafkalog.UndefinedEpoch:
		return TruncationStep{To: min(ans.EndOffset, leo), Complete: true}
	}
	fe, fo := endOffsetFor(local, ans.Epoch, leo)
	switch {
	case fe == kafkalog.UndefinedEpoch:
		// No local epoch at or below the leader's: the leader's end bounds us.
		return TruncationStep{To: min(ans.EndOffset, leo), Complete: true}
	case fe != ans.Epoch:
		// We never had the leader's epoch: cut to our end of the largest
		// epoch below it and ask about that one.
		return TruncationStep{To: min(fo, leo), Complete: false}
	}
	return TruncationStep{To: min(fo, ans.EndOffset, leo), Complete: true}
}

// TruncationOffset runs Truncation to the end: it asks askLeader about the
// latest epoch of the (virtually) cut log until a step is complete, and
// returns the offset to truncate to (leo when nothing needs cutting). The
// remote-WAL follower uses it off its driver goroutine; askLeader's error
// is returned as is.
func TruncationOffset(local []kafkalog.EpochEntry, leo int64, askLeader func(epoch int32) (int32, int64, error)) (int64, error) {
	entries := local
	to := leo
	for len(entries) > 0 {
		asked := entries[len(entries)-1].Epoch
		found, end, err := askLeader(asked)
		if err != nil {
			return 0, err
		}
		st := Truncation(entries, to, asked, EpochAnswer{Epoch: found, EndOffset: end})
		to = min(to, st.To)
		if st.Complete {
			return to, nil
		}
		entries = cutEntries(entries, to)
	}
	return to, nil
}

// cutEntries is the cache after the log is truncated to end (Kafka's
// truncateFromEnd): entries starting at or after end are gone.
func cutEntries(entries []kafkalog.EpochEntry, end int64) []kafkalog.EpochEntry {
	n := len(entries)
	for n > 0 && entries[n-1].StartOffset >= end {
		n--
	}
	return entries[:n]
}

func entryIndex(entries []kafkalog.EpochEntry, epoch int32) int {
	for i, e := range entries {
		if e.Epoch == epoch {
			return i
		}
	}
	return -1
}

// endOffsetFor is LeaderEpochFileCache.endOffsetFor over entries: the
// largest epoch <= requested and the start of the first epoch above it
// (leo when requested is the latest); (requested, first start) when it is
// below every epoch; UNDEFINED when requested is undefined or above the
// latest.
func endOffsetFor(entries []kafkalog.EpochEntry, requested int32, leo int64) (int32, int64) {
	if requested == kafkalog.UndefinedEpoch || len(entries) == 0 {
		return kafkalog.UndefinedEpoch, kafkalog.UndefinedEpochOffset
	}
	if entries[len(entries)-1].Epoch == requested {
		return requested, leo
	}
	for i, e := range entries {
		if e.Epoch > requested {
			if i == 0 {
				return requested, e.StartOffset
			}
			return entries[i-1].Epoch, e.StartOffset
		}
	}
	return kafkalog.UndefinedEpoch, kafkalog.UndefinedEpochOffset
}

package follower

import (
	"fmt"
	"slices"
	"time"

	"github.com/kwal/kwal/kafkalog"
)

// This file holds the follower's decision logic. Nothing here does I/O or
// reads a clock: the driver passes the time and the state in and carries
// out what comes back.

// epochEnd is the leader's answer to EndOffsetForEpoch.
type epochEnd struct {
	found int32
	end   int64
}

// verdict is what fencing says about one slice.
type verdict int

const (
	usable verdict = iota // may be appended
	wait                  // from an epoch newer than the known leader epoch
	fenced                // from a cut-off part of an older epoch: never appended
	ask                   // the leader's end for the slice's epoch is not known yet
)

// judge fences a slice of epoch e.LeaderEpoch covering [base, last]:
// the current leader epoch is always usable; an older epoch is usable only
// when the leader's history has that very epoch ending after last; a newer
// one waits; one older than the local log's latest epoch can never be
// appended (AppendAsFollower would refuse the regression).
func judge(epoch int32, last int64, leaderEpoch, localEpoch int32, fence map[int32]epochEnd) verdict {
	switch {
	case epoch > leaderEpoch:
		return wait
	case epoch < localEpoch:
		return fenced
	case epoch == leaderEpoch:
		return usable
	}
	a, ok := fence[epoch]
	if !ok {
		return ask
	}
	if a.found == epoch && last < a.end {
		return usable
	}
	return fenced
}

// partView is the driver's state of one partition, as decide reads it.
type partView struct {
	LEO        int64
	Leader     LeaderInfo
	LocalEpoch int32 // latest epoch of the local log; -1 when none
	Slices     []Located
	Fence      map[int32]epochEnd
	// Busy: slices being read, or read and waiting their turn.
	Busy          map[sliceID]int64
	Failures      int
	RetryAt       time.Time
	StuckSince    time.Time
	FallbackUntil int64
}

// partDecision is what to do next for one partition.
type partDecision struct {
	Read          []Located // chain slices to read now, in offset order
	Ask           []int32   // slice epochs whose end to ask the leader
	StuckSince    time.Time // zero when not stuck
	Fallback      bool      // fetch from the leader at the log end
	FallbackUntil int64     // keep fetching from the leader below this
	GapCause      Cause     // set when the fallback starts because of a gap
	WakeAt        time.Time // zero: nothing timed
	Target        int64     // the highest end known (leader, index)
	Fenced        int       // slices at or above the log end fenced off
}

// decide is the follower's per-partition policy.
func decide(now time.Time, v partView, cfg *Config) partDecision {
	d := partDecision{FallbackUntil: v.FallbackUntil, Target: v.Leader.LogEnd}
	var use []Located
	var fencedAtLEO, waitAtLEO bool
	for _, l := range v.Slices {
		e := &l.Entry
		if e.LastOffset < v.LEO {
			continue
		}
		covers := e.BaseOffset <= v.LEO
		switch judge(e.LeaderEpoch, e.LastOffset, v.Leader.Epoch, v.LocalEpoch, v.Fence) {
		case usable:
			use = append(use, l)
			d.Target = max(d.Target, e.LastOffset+1)
		case wait:
			waitAtLEO = waitAtLEO || covers
			d.Target = max(d.Target, e.LastOffset+1)
		case fenced:
			fencedAtLEO = fencedAtLEO || covers
			d.Fenced++
		case ask:
			if !slices.Contains(d.Ask, e.LeaderEpoch) {
				d.Ask = append(d.Ask, e.LeaderEpoch)
			}
		}
	}
	slices.Sort(d.Ask)
	chain := Chain(v.LEO, use)

	wake := func(t time.Time) {
		if d.WakeAt.IsZero() || t.Before(d.WakeAt) {
			d.WakeAt = t
		}
	}
	switch {
	case v.FallbackUntil > v.LEO:
		d.Fallback = true
	case v.Failures >= cfg.MaxReadAttempts && len(chain) > 0:
		d.Fallback = true
		d.FallbackUntil = chain[0].Entry.LastOffset + 1
	case len(chain) == 0 && d.Target > v.LEO && len(d.Ask) == 0:
		d.StuckSince = v.StuckSince
		if d.StuckSince.IsZero() {
			d.StuckSince = now
		}
		if now.Sub(d.StuckSince) < cfg.GapTimeout {
			wake(d.StuckSince.Add(cfg.GapTimeout))
			break
		}
		d.Fallback = true
		d.FallbackUntil = d.Target
		for _, l := range use {
			if l.Entry.BaseOffset > v.LEO {
				d.FallbackUntil = min(d.FallbackUntil, l.Entry.BaseOffset)
			}
		}
		switch {
		case fencedAtLEO:
			d.GapCause = CauseFenced
		case waitAtLEO:
			d.GapCause = CauseFutureEpoch
		case d.FallbackUntil < d.Target:
			d.GapCause = CauseMetadataGap
		default:
			d.GapCause = CauseMetadataLag
		}
	}

	if now.Before(v.RetryAt) {
		wake(v.RetryAt)
		return d
	}
	// The read-ahead counts the chain from the log end, busy slices
	// included, so the slice at the log end is always read: slices waiting
	// above it can never starve it.
	var ahead int64
	for i, l := range chain {
		if d.Fallback && l.Entry.LastOffset < d.FallbackUntil {
			continue // the leader serves these
		}
		if i > 0 && ahead >= cfg.ReadAheadBytes {
			break
		}
		ahead += l.Entry.Length
		if _, ok := v.Busy[sliceID{l.Key, l.Entry.Position}]; ok {
			continue
		}
		d.Read = append(d.Read, l)
	}
	return d
}

// trimTo returns the whole batches of raw from the one whose base offset
// is from on, dropping the batches wholly below from; the batches it keeps
// are returned as they are (not validated: AppendAsFollower does that). It
// also returns the max timestamp of the last batch kept. A batch that
// straddles from, or a first kept batch that starts above it, is
// ErrMisaligned. A torn last batch is dropped when tornTailOK (a leader
// fetch may end in one) and is a *kafkalog.CorruptBatchError otherwise.
func trimTo(raw []byte, from int64, tornTailOK bool) (out []byte, lastMaxTs int64, err error) {
	start := -1
	pos := 0
	for pos < len(raw) {
		h, err := kafkalog.ParseBatchHeader(raw[pos:])
		if err == nil && pos+h.Size() > len(raw) {
			err = &kafkalog.CorruptBatchError{Position: int64(pos), Reason: fmt.Sprintf("torn: batch of %d bytes, %d left", h.Size(), len(raw)-pos)}
		}
		if err != nil {
			if tornTailOK && start >= 0 {
				break
			}
			if tornTailOK && start < 0 && len(raw)-pos < kafkalog.BatchHeaderSize {
				break
			}
			return nil, 0, err
		}
		if start < 0 {
			switch {
			case h.NextOffset() <= from:
				pos += h.Size()
				continue
			case h.BaseOffset != from:
				return nil, 0, fmt.Errorf("%w: batch [%d, %d], log end %d", ErrMisaligned, h.BaseOffset, h.LastOffset(), from)
			}
			start = pos
		}
		lastMaxTs = h.MaxTimestamp
		pos += h.Size()
	}
	if start < 0 {
		return nil, 0, nil
	}
	return raw[start:pos], lastMaxTs, nil
}

// cutBefore returns the leading batches of data (whole batches, as trimTo
// returns them) that start below end, and at least the first one.
func cutBefore(data []byte, end int64) []byte {
	pos := 0
	for pos < len(data) {
		h, err := kafkalog.ParseBatchHeader(data[pos:])
		if err != nil || (pos > 0 && h.BaseOffset >= end) {
			break
		}
		pos += h.Size()
	}
	return data[:pos]
}

// truncationOffset is the follower's half of KIP-101/KIP-279: walking the
// local leader-epoch cache from its latest entry down, it asks the leader
// for the end of each epoch; the first epoch the leader knows gives the
// offset to truncate to (bounded by the local end of the epoch the leader
// answered with, when that is older). It returns leo when nothing needs
// truncating.
func truncationOffset(entries []kafkalog.EpochEntry, leo int64, askLeader func(epoch int32) (int32, int64, error)) (int64, error) {
	for i := len(entries) - 1; i >= 0; i-- {
		found, end, err := askLeader(entries[i].Epoch)
		if err != nil {
			return 0, err
		}
		if found == kafkalog.UndefinedEpoch {
			continue // the leader never had this epoch: look further back
		}
		if found < entries[i].Epoch {
			end = min(end, localEnd(entries, found, leo))
		}
		return min(end, leo), nil
	}
	if len(entries) == 0 {
		return leo, nil
	}
	return min(entries[0].StartOffset, leo), nil
}

// localEnd is where epoch ends in the local cache: the start of the first
// later epoch, or leo.
func localEnd(entries []kafkalog.EpochEntry, epoch int32, leo int64) int64 {
	for _, e := range entries {
		if e.Epoch > epoch {
			return e.StartOffset
		}
	}
	return leo
}

// bucket is a token bucket of bytes on the caller's clock. A read may take
// more than is left (the bucket goes into debt) so a range larger than the
// burst is not starved; the next read waits until the debt is paid.
type bucket struct {
	rate, burst float64 // bytes per second; 0 rate means no limit
	tokens      float64
	last        time.Time
}

func newBucket(rate, burst int64, now time.Time) bucket {
	return bucket{rate: float64(rate), burst: float64(burst), tokens: float64(burst), last: now}
}

// take reports whether n bytes may be read at now, taking them if so, and
// otherwise how long until a read may start.
func (b *bucket) take(now time.Time, n int64) (bool, time.Duration) {
	if b.rate <= 0 {
		return true, 0
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(b.burst, b.tokens+b.rate*dt.Seconds())
		b.last = now
	}
	if b.tokens <= 0 {
		return false, time.Duration((-b.tokens/b.rate)*float64(time.Second)) + time.Millisecond
	}
	b.tokens -= float64(n)
	return true, 0
}

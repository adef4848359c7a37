package follower

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/replica"
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
// replica.JudgeSlice, the one model of remote-WAL fencing, with the
// leader's answer for that epoch looked up in fence.
func judge(epoch int32, last int64, leaderEpoch, localEpoch int32, fence map[int32]epochEnd) verdict {
	var a epochEnd
	ok := false
	if epoch < leaderEpoch { // only an older epoch's verdict reads the answer
		a, ok = fence[epoch]
	}
	switch replica.JudgeSlice(epoch, last, leaderEpoch, localEpoch, replica.EpochAnswer{Epoch: a.found, EndOffset: a.end}, ok) {
	case replica.Wait:
		return wait
	case replica.Fenced:
		return fenced
	case replica.Ask:
		return ask
	}
	return usable
}

// slotState is what the driver is doing with one slice.
type slotState uint8

const (
	idle    slotState = iota // not being read
	reading                  // in a read in flight
	ready                    // read and verified, waiting its turn to be appended
)

// slot is one slice of a partition the index listed at or above the log
// end, with what the driver is doing with it. The driver keeps a
// partition's slots sorted by chainCmp, so the chain from the log end is a
// walk from the front; the slots below the log end are dropped from the
// front as the log grows.
type slot struct {
	Located
	state slotState
	raw   []byte // the verified log bytes, when ready
	// batchesOK: raw's batches were validated with its CRC32C (one pass,
	// kafkalog.ValidateBatchesCRC32C), so the append need not again.
	batchesOK bool
	listed    bool   // in the partition's sorted slots (else kept only while reading)
	mark      uint64 // the refresh that last saw it in the index
}

// chainCmp orders slices the way a chain takes them: by base offset, the
// longest first among those starting at the same offset (so duplicates
// and shorter overlapping slices are skipped), then by object and
// position so the order does not depend on the index's.
func chainCmp(a, b *Located) int {
	switch {
	case a.Entry.BaseOffset != b.Entry.BaseOffset:
		return cmp.Compare(a.Entry.BaseOffset, b.Entry.BaseOffset)
	case a.Entry.LastOffset != b.Entry.LastOffset:
		return cmp.Compare(b.Entry.LastOffset, a.Entry.LastOffset)
	case a.Key != b.Key:
		return strings.Compare(a.Key, b.Key)
	}
	return cmp.Compare(a.Entry.Position, b.Entry.Position)
}

func slotCmp(a, b *slot) int { return chainCmp(&a.Located, &b.Located) }

// summary is what decide needs from every slot at or above the log end,
// not only from the chain it walks: the highest end the index knows and
// the epochs to ask the leader about. It depends on the slots, the leader
// epoch, the local epoch and the fence answers, so the driver keeps it
// until one of those changes. As the log end moves up the target stays
// right (a slot it counted that is now below the log end cannot raise it
// past the log end); the driver computes it again when there are epochs
// to ask about, so it does not ask about slots the log end passed.
type summary struct {
	Target int64   // the largest LastOffset+1 of a usable or waiting slot, 0 if none
	Ask    []int32 // slot epochs whose end to ask the leader, sorted
	Fenced int     // slots fenced off
}

// summarize computes the summary of slots at or above leo.
func summarize(slots []*slot, leo int64, leaderEpoch, localEpoch int32, fence map[int32]epochEnd) summary {
	var s summary
	for _, sl := range slots {
		e := &sl.Entry
		if e.LastOffset < leo {
			continue
		}
		switch judge(e.LeaderEpoch, e.LastOffset, leaderEpoch, localEpoch, fence) {
		case usable, wait:
			s.Target = max(s.Target, e.LastOffset+1)
		case fenced:
			s.Fenced++
		case ask:
			if !slices.Contains(s.Ask, e.LeaderEpoch) {
				s.Ask = append(s.Ask, e.LeaderEpoch)
			}
		}
	}
	slices.Sort(s.Ask)
	return s
}

// partView is the driver's state of one partition, as decide reads it.
type partView struct {
	LEO        int64
	Leader     LeaderInfo
	LocalEpoch int32 // latest epoch of the local log; -1 when none
	// Slots are the slices the index lists at or above the log end (some
	// below it may remain), sorted by chainCmp, each with its state: a
	// slot being read, or read and waiting its turn, is busy.
	Slots []*slot
	Sum   summary // of Slots, see summarize
	Fence map[int32]epochEnd
	// Scratch is reused for partDecision.Read.
	Scratch       []*slot
	Failures      int
	RetryAt       time.Time
	StuckSince    time.Time
	FallbackUntil int64
}

// partDecision is what to do next for one partition.
type partDecision struct {
	Read          []*slot   // chain slices to read now, in offset order
	Ask           []int32   // slice epochs whose end to ask the leader
	StuckSince    time.Time // zero when not stuck
	Fallback      bool      // fetch from the leader at the log end
	FallbackUntil int64     // keep fetching from the leader below this
	GapCause      Cause     // set when the fallback starts because of a gap
	WakeAt        time.Time // zero: nothing timed
	Target        int64     // the highest end known (leader, index)
	Fenced        int       // slices at or above the log end fenced off
}

// decide is the follower's per-partition policy. It walks the chain of
// usable slots from the log end only as far as the read-ahead reaches, so
// its cost does not grow with the backlog; only a partition stuck past the
// gap timeout looks further.
func decide(now time.Time, v partView, cfg *Config) partDecision {
	d := partDecision{FallbackUntil: v.FallbackUntil, Target: max(v.Leader.LogEnd, v.Sum.Target), Ask: v.Sum.Ask, Fenced: v.Sum.Fenced}
	wake := func(t time.Time) {
		if d.WakeAt.IsZero() || t.Before(d.WakeAt) {
			d.WakeAt = t
		}
	}
	retry := now.Before(v.RetryAt)
	if v.FallbackUntil > v.LEO {
		d.Fallback = true
	}
	// The chain: the usable slots that continue the log without a gap, as
	// Chain takes them. The read-ahead counts it from the log end, busy
	// slots included, so the slot at the log end is always read: slots
	// waiting above it can never starve it.
	need, n := v.LEO, 0
	var ahead int64
	read := v.Scratch[:0]
	for _, s := range v.Slots {
		e := &s.Entry
		if e.LastOffset < need {
			continue // in the log, or covered by the chain
		}
		if e.BaseOffset > need {
			break // a gap: everything above it waits
		}
		if judge(e.LeaderEpoch, e.LastOffset, v.Leader.Epoch, v.LocalEpoch, v.Fence) != usable {
			continue
		}
		n++
		need = e.LastOffset + 1
		if n == 1 {
			if !d.Fallback && v.Failures >= cfg.MaxReadAttempts {
				d.Fallback = true
				d.FallbackUntil = e.LastOffset + 1
			}
			if retry {
				break
			}
		}
		if d.Fallback && e.LastOffset < d.FallbackUntil {
			continue // the leader serves these
		}
		if n > 1 && ahead >= cfg.ReadAheadBytes {
			break
		}
		ahead += e.Length
		if s.state == idle {
			read = append(read, s)
		}
	}
	if n == 0 && !d.Fallback && d.Target > v.LEO && len(d.Ask) == 0 {
		d.StuckSince = v.StuckSince
		if d.StuckSince.IsZero() {
			d.StuckSince = now
		}
		if now.Sub(d.StuckSince) < cfg.GapTimeout {
			wake(d.StuckSince.Add(cfg.GapTimeout))
		} else {
			d.Fallback = true
			d.FallbackUntil, d.GapCause = gapFallback(v, d.Target)
		}
	}
	if retry {
		wake(v.RetryAt)
		return d
	}
	if len(read) > 0 {
		d.Read = read
	}
	return d
}

// gapFallback says, for a partition with nothing usable at its log end,
// up to where the leader must serve it (the first usable slot above the
// log end, else target) and why.
func gapFallback(v partView, target int64) (until int64, cause Cause) {
	until = target
	var fencedAtLEO, waitAtLEO bool
	for _, s := range v.Slots {
		e := &s.Entry
		if e.LastOffset < v.LEO {
			continue
		}
		switch judge(e.LeaderEpoch, e.LastOffset, v.Leader.Epoch, v.LocalEpoch, v.Fence) {
		case usable:
			if e.BaseOffset > v.LEO {
				until = min(until, e.BaseOffset)
			}
		case fenced:
			fencedAtLEO = fencedAtLEO || e.BaseOffset <= v.LEO
		case wait:
			waitAtLEO = waitAtLEO || e.BaseOffset <= v.LEO
		}
		if e.BaseOffset > v.LEO && until < target {
			break // sorted by base: the first usable slot above was found
		}
	}
	switch {
	case fencedAtLEO:
		return until, CauseFenced
	case waitAtLEO:
		return until, CauseFutureEpoch
	case until < target:
		return until, CauseMetadataGap
	}
	return until, CauseMetadataLag
}

// trimTo returns the whole batches of raw from the one whose base offset
// is from on, dropping the batches wholly below from; the batches it keeps
// are returned as they are (not validated: AppendAsFollower does that). A
// batch that straddles from, or a first kept batch that starts above it,
// is ErrMisaligned. A torn last batch is dropped when tornTailOK (a leader
// fetch may end in one) and is a *kafkalog.CorruptBatchError otherwise.
func trimTo(raw []byte, from int64, tornTailOK bool) ([]byte, error) {
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
			return nil, err
		}
		if start < 0 {
			switch {
			case h.NextOffset() <= from:
				pos += h.Size()
				continue
			case h.BaseOffset != from:
				return nil, fmt.Errorf("%w: batch [%d, %d], log end %d", ErrMisaligned, h.BaseOffset, h.LastOffset(), from)
			}
			start = pos
		}
		pos += h.Size()
	}
	if start < 0 {
		return nil, nil
	}
	return raw[start:pos], nil
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

// truncationOffset is the follower's half of KIP-101/KIP-279:
// replica.TruncationOffset, the one truncation rule the classic fetcher
// uses too. It returns leo when nothing needs truncating.
func truncationOffset(entries []kafkalog.EpochEntry, leo int64, askLeader func(epoch int32) (int32, int64, error)) (int64, error) {
	return replica.TruncationOffset(entries, leo, askLeader)
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

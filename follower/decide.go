package follower

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/replica"
)

// This file holds the follower's decision logic. Nothing here does I/O or
// reads a clock: the driver passes the time and the state in and carries
// out what comes back.

// epochEnd is the leader's answer to EndOffsetForEpoch.
type epochEnd = replica.EpochAnswer

// verdict is what fencing says about one slice (replica.Verdict).
type verdict = replica.Verdict

const (
	usable = replica.Usable // may be appended
	wait   = replica.Wait   // from an epoch newer than the known leader epoch
	fenced = replica.Fenced // from a cut-off part of an older epoch: never appended
	ask    = replica.Ask    // the leader's end for the slice's epoch is not known yet
)

// judge fences a slice of epoch e.LeaderEpoch covering [base, last]:
// replica.JudgeRemote, the one model of remote-WAL fencing.
func judge(epoch int32, last int64, leaderEpoch, localEpoch int32, fence map[int32]epochEnd) verdict {
	return replica.JudgeRemote(epoch, last, leaderEpoch, localEpoch, fence)
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
	raw   []byte         // the verified log bytes, when ready
	body  *objstore.Body // the GET body raw points into, if any (buffers.go)
	at    int            // where raw starts in body's bytes, when body is set
	// batchesOK: raw's batches' CRCs and headers were validated with its
	// CRC32C (one pass, kafkalog.ValidateBatchesCRC32C), so the append need
	// not again.
	batchesOK bool
	listed    bool                // in the partition's sorted slots (else kept only while reading)
	mark      uint64              // the refresh that last saw it in the index
	rs        replica.RemoteSlice // Entry as the planner reads it (newSlot)
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

// newSlot makes the slot of a listed slice.
func newSlot(l Located) *slot {
	s := makeSlot(l)
	return &s
}

// makeSlot is newSlot's slot, for a caller that allocates many at once.
func makeSlot(l Located) slot {
	return slot{Located: l, rs: replica.RemoteSlice{BaseOffset: l.Entry.BaseOffset, LastOffset: l.Entry.LastOffset,
		LeaderEpoch: l.Entry.LeaderEpoch, Length: l.Entry.Length, Object: objectID(l.Key)}}
}

// objectID names an object key for replica.RemoteSlice.Object: FNV-1a,
// never 0. Two keys that collide only make a bounded walk longer.
func objectID(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return max(h, 1)
}

// RemoteSlice and Busy make a slot a replica.RemoteSlot.
func (s *slot) RemoteSlice() *replica.RemoteSlice { return &s.rs }
func (s *slot) Busy() bool                        { return s.state != idle }

var _ replica.RemoteSlot = (*slot)(nil)

// summary is replica.RemoteSummary: what the plan needs from every slot
// at or above the log end (see there for when to compute it again).
type summary = replica.RemoteSummary

// summarize computes the summary of slots at or above leo.
func summarize(slots []*slot, leo int64, leaderEpoch, localEpoch int32, fence map[int32]epochEnd) summary {
	return replica.SummarizeRemote(slots, leo, leaderEpoch, localEpoch, fence)
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
	// Scratch and ReadIdx are reused for partDecision.Read.
	Scratch       []*slot
	ReadIdx       []int
	Failures      int
	RetryAt       time.Time
	StuckSince    time.Time
	FallbackUntil int64
	// WantedSince is when the slice at the log end was first wanted from
	// object storage (zero: not yet); Config.FallbackAfter runs from it.
	WantedSince time.Time
	// Degraded: object storage failed this partition and a probe has not
	// yet shown it answers again; the leader serves everything meanwhile.
	Degraded bool
}

// partDecision is what to do next for one partition (replica.RemotePlan
// with the slots to read and the fallback cause in this package's terms).
type partDecision struct {
	Read          []*slot   // chain slices to read now, in offset order
	Ask           []int32   // slice epochs whose end to ask the leader
	StuckSince    time.Time // zero when not stuck
	Fallback      bool      // fetch from the leader at the log end
	FallbackUntil int64     // keep fetching from the leader below this
	GapCause      Cause     // set when the fallback starts because of a gap, or CauseReadTimeout
	WakeAt        time.Time // zero: nothing timed
	WantedSince   time.Time // see partView; zero when nothing is wanted from object storage
	Target        int64     // the highest end known (leader, index)
	Fenced        int       // slices at or above the log end fenced off
	readIdx       []int     // the plan's Read, for the next ReadIdx
}

// gapCauses maps replica's gap causes to the reported ones.
var gapCauses = [...]Cause{replica.NoGap: "", replica.GapLag: CauseMetadataLag, replica.GapHole: CauseMetadataGap,
	replica.GapFenced: CauseFenced, replica.GapFutureEpoch: CauseFutureEpoch}

// decide is the follower's per-partition policy: replica.PlanRemote, the
// one model of what a remote-WAL follower does next; the driver carries
// out the decision. maxReadObjects > 0 bounds the slices to read to those
// of the first maxReadObjects objects the chain reads from (see
// replica.RemoteLimits.MaxReadObjects).
func decide(now time.Time, v partView, cfg *Config, maxReadObjects int) partDecision {
	p := replica.PlanRemote(now, replica.RemoteView{
		LEO: v.LEO, LeaderEpoch: v.Leader.Epoch, LeaderLogEnd: v.Leader.LogEnd, LocalEpoch: v.LocalEpoch,
		Summary: v.Sum, Fence: v.Fence, Failures: v.Failures, RetryAt: v.RetryAt, StuckSince: v.StuckSince, FallbackUntil: v.FallbackUntil,
		WantedSince: v.WantedSince, Degraded: v.Degraded,
	}, v.Slots, replica.RemoteLimits{ReadAheadBytes: cfg.ReadAheadBytes, GapTimeout: cfg.GapTimeout, MaxReadAttempts: cfg.MaxReadAttempts,
		FallbackAfter: cfg.FallbackAfter, MaxReadObjects: maxReadObjects}, v.ReadIdx)
	d := partDecision{Ask: p.Ask, StuckSince: p.StuckSince, Fallback: p.Fallback, FallbackUntil: p.FallbackUntil,
		GapCause: gapCauses[p.GapCause], WakeAt: p.WakeAt, Target: p.Target, Fenced: p.Fenced, WantedSince: p.WantedSince}
	if p.TimedOut {
		d.GapCause = CauseReadTimeout
	}
	if len(p.Read) > 0 {
		read := v.Scratch[:0]
		for _, i := range p.Read {
			read = append(read, v.Slots[i])
		}
		d.Read, d.readIdx = read, p.Read
	}
	return d
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

package follower

import (
	"slices"
	"time"

	"github.com/kwal/kwal/kafkalog"
)

// RunAppender is a Log that also appends a run of verified batches held
// in several buffers with one write (kafkalog.Log.AppendVerifiedRunAsFollower:
// pwritev); the follower then appends consecutive ready slices together.
// A Log without it gets one append per slice.
type RunAppender interface {
	AppendVerifiedRunAsFollower(parts [][]byte) (kafkalog.AppendInfo, error)
}

var _ RunAppender = (*kafkalog.Log)(nil)

// Bounds of one run: enough bytes that a longer run saves little per
// byte written (see BenchmarkRebuild's anchorWriteBytes), and parts well
// under IOV_MAX.
const (
	maxRunBytes = 1 << 20
	maxRunParts = 256
)

// adjacent reports whether b's bytes follow a's in the same GET body.
func adjacent(a, b *slot) bool {
	return a != nil && a.body != nil && a.body == b.body && a.at+len(a.raw) == b.at
}

// appendReady appends next, the ready slice that continues p's log, and
// with it the ready slices that continue it in turn (appendRun), then
// drops their bytes (releasing their bodies).
func (f *Follower) appendReady(p *part, next *slot, now time.Time) error {
	run := f.runAfter(p, next)
	if len(run) == 1 {
		err := f.appendSlice(p, next.Key, next.Entry, next.raw, next.batchesOK, now)
		next.drop() // the log has copied the bytes (or refused them)
		return err
	}
	err := f.appendRun(p, run, now)
	for _, s := range run {
		s.state = idle
		s.drop()
	}
	clear(run)
	return err
}

// runAfter returns next and the ready slots after it whose batches
// continue it without a gap, each verified with its CRC32C (batchesOK),
// of next's leader epoch and usable under fencing, up to maxRunBytes and
// maxRunParts; just next when p's log cannot append runs or next does not
// start at the log end.
func (f *Follower) runAfter(p *part, next *slot) []*slot {
	run := append(p.runBuf[:0], next)
	p.runBuf = run
	if _, ok := p.log.(RunAppender); !ok || !next.batchesOK || next.Entry.BaseOffset != p.leo {
		return run
	}
	i := slices.Index(p.slots, next)
	if i < 0 {
		return run
	}
	end, bytes := next.Entry.LastOffset, len(next.raw)
	for _, s := range p.slots[i+1:] {
		if s.Entry.BaseOffset <= end {
			continue // a shorter duplicate, or inside the run: dropped later
		}
		if s.Entry.BaseOffset != end+1 || s.state != ready || !s.batchesOK ||
			s.Entry.LeaderEpoch != next.Entry.LeaderEpoch || len(run) == maxRunParts || bytes+len(s.raw) > maxRunBytes ||
			judge(s.Entry.LeaderEpoch, s.Entry.LastOffset, p.leader.Epoch, p.localEpoch, p.fence) != usable {
			break
		}
		run = append(run, s)
		end, bytes = s.Entry.LastOffset, bytes+len(s.raw)
	}
	p.runBuf = run
	return run
}

// appendRun appends run (see runAfter) with one AppendVerifiedRunAsFollower.
// If the log refuses it, nothing was appended (the log's all-or-nothing
// rule), and the slices go one at a time (appendSlice), so that a refusal
// is reported, counted and retried for the slice it belongs to.
//
// Slices that lie back to back in one GET body (a partition's slices the
// combiner packed next to each other, read with one GET) go to the log as
// one part: the write then has fewer buffers to gather, and each costs
// the kernel a separate copy from user memory.
func (f *Follower) appendRun(p *part, run []*slot, now time.Time) error {
	parts := p.partsBuf[:0]
	size := 0
	var prev *slot
	for _, s := range run {
		size += len(s.raw)
		if n := len(parts); n > 0 && adjacent(prev, s) {
			start := s.at - len(parts[n-1])
			parts[n-1] = s.body.Bytes()[start : s.at+len(s.raw)]
		} else {
			parts = append(parts, s.raw)
		}
		prev = s
	}
	info, err := p.log.(RunAppender).AppendVerifiedRunAsFollower(parts)
	clear(parts)
	p.partsBuf = parts
	if err != nil {
		for _, s := range run {
			if s.Entry.LastOffset < p.leo {
				continue
			}
			if err := f.appendSlice(p, s.Key, s.Entry, s.raw, s.batchesOK, now); err != nil {
				return err
			}
		}
		return nil
	}
	f.appendsWork(p, now)
	f.c.appends.Add(1)
	f.c.slicesApplied.Add(int64(len(run)))
	f.c.bytesApplied.Add(int64(size))
	f.advanced(p, info, info.LastMaxTimestamp, now)
	f.backOnStorage(p, now)
	return nil
}

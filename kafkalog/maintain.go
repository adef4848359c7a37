package kafkalog

import (
	"fmt"
	"time"
)

// retentionInput is what the retention policy needs to know of a segment.
type retentionInput struct {
	next      int64 // offset after the segment's last batch
	size      int64
	largestMs int64 // newest timestamp: max batch timestamp, else last modified
}

// retentionVictims is Kafka's retention policy, pure: how many of the
// oldest segments to delete. The active (last) segment is never deleted,
// nor a segment with offsets at or above upTo (the high watermark, or
// less: what the remote-WAL task has uploaded). Time:
// delete from the oldest while now-largestMs > retentionMs. Size: delete
// from the oldest while the log stays at or above retentionBytes without
// the segment.
func retentionVictims(segs []retentionInput, upTo, nowMs, retentionMs, retentionBytes int64) int {
	limit := 0 // segments eligible at all
	for limit < len(segs)-1 && segs[limit].next <= upTo {
		limit++
	}
	byTime := 0
	if retentionMs >= 0 {
		for byTime < limit && nowMs-segs[byTime].largestMs > retentionMs {
			byTime++
		}
	}
	bySize := 0
	if retentionBytes >= 0 {
		var total int64
		for _, s := range segs {
			total += s.size
		}
		diff := total - retentionBytes
		for bySize < limit && diff-segs[bySize].size >= 0 {
			diff -= segs[bySize].size
			bySize++
		}
	}
	return max(byTime, bySize)
}

// DeleteRetentionExpired deletes the oldest segments that retention
// (RetentionMs, RetentionBytes, by the clock) allows, never the active
// one nor one holding an offset at or above the high watermark or upTo
// (math.MaxInt64: no bound beyond the high watermark), advances the log
// start offset and deletes the producer-state snapshots below it. It
// returns how many segments it deleted.
// Errors: ErrClosed, ErrFailed, I/O errors.
func (l *Log) DeleteRetentionExpired(upTo int64) (int, error) {
	defer l.changed() // after the unlock
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	in := make([]retentionInput, len(l.mu.segs))
	for i, s := range l.mu.segs {
		ts := s.maxTimestamp
		if ts < 0 {
			ts = s.lastModified.UnixMilli()
		}
		in[i] = retentionInput{next: s.next, size: s.size, largestMs: ts}
	}
	n := retentionVictims(in, min(l.mu.hw, upTo), l.clock.Now().UnixMilli(), l.cfg.RetentionMs, l.cfg.RetentionBytes)
	if n == 0 {
		return 0, nil
	}
	l.mu.Lock()
	victims := append([]*segment(nil), l.mu.segs[:n]...)
	l.mu.segs = append([]*segment(nil), l.mu.segs[n:]...)
	changed := l.mu.epochs.truncateFromStart(l.logStartOffset())
	l.mu.Unlock()
	if changed {
		if err := l.writeEpochCheckpoint(); err != nil {
			return n, fmt.Errorf("kafkalog: retention: %w", err)
		}
	}
	for _, s := range victims {
		s.file.Close()
		if err := l.fs.Remove(s.logPath); err != nil {
			return n, fmt.Errorf("kafkalog: retention: %w", err)
		}
		if err := l.fs.Remove(s.indexPath); err != nil {
			return n, fmt.Errorf("kafkalog: retention: %w", err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return n, fmt.Errorf("kafkalog: retention: %w", err)
	}
	start := victims[n-1].next
	if err := l.removeSnapshots(func(o int64) bool { return o >= start }); err != nil {
		return n, fmt.Errorf("kafkalog: retention: %w", err)
	}
	l.logger.Info("kafkalog: deleted segments by retention", "count", n, "logStartOffset", victims[n-1].next)
	return n, nil
}

// Truncate removes every batch at or after offset to, which must start a
// batch (Kafka's truncateTo): later segments are deleted, the segment
// holding to is cut and fsynced, the index and the leader-epoch cache are
// trimmed and the high watermark is lowered to to if above. to >=
// LogEndOffset is a no-op. AppendNotify waiters wake.
// Errors: ErrOffsetOutOfRange (to below LogStartOffset),
// ErrNotBatchBoundary, ErrClosed, ErrFailed, I/O errors (the log is then
// failed).
func (l *Log) Truncate(to int64) error {
	defer l.changed() // after the unlock
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if to >= l.mu.leo {
		return nil
	}
	if to < l.logStartOffset() {
		return fmt.Errorf("kafkalog: truncate to %d below log start %d: %w", to, l.logStartOffset(), ErrOffsetOutOfRange)
	}
	si := len(l.mu.segs) - 1
	for l.mu.segs[si].base > to {
		si--
	}
	s := l.mu.segs[si]
	r := &segReader{f: s.file, size: s.size, chunk: 8192}
	pos, h, err := locate(r, s, to)
	if err != nil {
		return fmt.Errorf("kafkalog: truncate to %d: %w", to, err)
	}
	if h.base != to {
		return fmt.Errorf("kafkalog: truncate to %d: batch starts at %d: %w", to, h.base, ErrNotBatchBoundary)
	}
	// Recompute what the cut segment keeps, before taking the lock.
	res, err := scanSegment(s.file, pos, s.base, l.cfg.IndexIntervalBytes, false, l.w.compacted)
	if err != nil {
		return fmt.Errorf("kafkalog: truncate to %d: %w", to, err)
	}
	l.mu.Lock()
	removed := l.mu.segs[si+1:]
	l.mu.segs = l.mu.segs[: si+1 : si+1]
	s.size, s.next, s.index, s.maxTimestamp = pos, to, res.index, res.maxTimestamp
	s.timeIndex, s.bytesSinceTimeIndex = res.timeIndex, res.bytesSinceTimeIndex
	s.bytesSinceIndex = res.bytesSinceIndex
	if pos == 0 {
		s.firstAppend = time.Time{}
	}
	l.mu.leo = to
	l.mu.hw = min(l.mu.hw, to)
	l.mu.epochs.truncateFromEnd(to)
	l.notifyLocked()
	l.mu.Unlock()

	fail := func(err error) error {
		l.w.failed = err
		return fmt.Errorf("kafkalog: truncate to %d: %w", to, err)
	}
	for i := len(removed) - 1; i >= 0; i-- {
		rs := removed[i]
		rs.file.Close()
		if err := l.fs.Remove(rs.logPath); err != nil {
			return fail(err)
		}
		if err := l.fs.Remove(rs.indexPath); err != nil {
			return fail(err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fail(err)
	}
	if err := s.file.Truncate(pos); err != nil {
		return fail(err)
	}
	if err := s.file.Sync(); err != nil {
		return fail(err)
	}
	s.dirty = false
	l.w.unflushed = 0
	if err := l.writeEpochCheckpoint(); err != nil {
		return fail(err)
	}
	if l.w.recoveryPoint > s.base {
		if err := writeOffsetCheckpoint(l.fs, l.dir, recoveryPointCheckpointFile, s.base); err != nil {
			return fail(err)
		}
		l.w.recoveryPoint = s.base
	}
	if err := l.checkpointHW(l.clock.Now()); err != nil {
		return fail(err)
	}
	// Kafka's truncateAndReload: snapshots above to go, and the table is
	// rebuilt from the newest one left plus the batches after it.
	if err := l.loadProducerState(); err != nil {
		return fail(err)
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at
// offset (Kafka's truncateFullyAndStartAt): log start, log end and high
// watermark become offset and the leader-epoch cache is cleared.
// Errors: ErrOffsetOutOfRange for a negative offset, ErrClosed, ErrFailed,
// I/O errors (the log is then failed).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("kafkalog: truncate fully and start at %d: %w", offset, ErrOffsetOutOfRange)
	}
	defer l.changed() // after the unlock
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	fail := func(err error) error {
		l.w.failed = err
		return fmt.Errorf("kafkalog: truncate fully and start at %d: %w", offset, err)
	}
	// Readers are kept out for the whole swap: a segment file at offset is
	// reused (Create truncates it) and may still be being read.
	l.mu.Lock()
	old := l.mu.segs
	for _, s := range old {
		s.file.Close()
	}
	ns, err := l.replaceSegments(old, offset)
	if err != nil {
		l.mu.closed = true // files are closed; nothing can be served
		l.notifyLocked()
		l.mu.Unlock()
		return fail(err)
	}
	l.mu.segs = []*segment{ns}
	l.mu.start = offset
	l.mu.leo, l.mu.hw = offset, offset
	l.mu.epochs.entries = nil
	l.notifyLocked()
	l.mu.Unlock()
	l.w.unflushed = 0
	if err := l.writeEpochCheckpoint(); err != nil {
		return fail(err)
	}
	if err := writeOffsetCheckpoint(l.fs, l.dir, recoveryPointCheckpointFile, offset); err != nil {
		return fail(err)
	}
	l.w.recoveryPoint = offset
	if err := l.checkpointHW(l.clock.Now()); err != nil {
		return fail(err)
	}
	if err := l.removeSnapshots(func(int64) bool { return false }); err != nil {
		return fail(err)
	}
	l.mu.Lock()
	l.mu.producers = newProducerState(offset)
	l.mu.Unlock()
	return nil
}

// replaceSegments deletes old's files, newest first, and creates an empty,
// fsynced segment at offset. Caller holds writeMu and mu.
func (l *Log) replaceSegments(old []*segment, offset int64) (*segment, error) {
	for i := len(old) - 1; i >= 0; i-- {
		if err := l.fs.Remove(old[i].logPath); err != nil {
			return nil, err
		}
		if err := l.fs.Remove(old[i].indexPath); err != nil {
			return nil, err
		}
	}
	ns, err := l.createSegment(offset)
	if err != nil {
		return nil, err
	}
	if err := ns.file.Sync(); err != nil {
		ns.file.Close()
		return nil, err
	}
	return ns, nil
}

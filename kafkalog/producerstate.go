package kafkalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"sort"
)

// ProducerBatchWindow is how many of its latest batches a producer's
// entry keeps for duplicate detection: Kafka's
// ProducerStateEntry.NUM_BATCHES_TO_RETAIN, which matches the client's
// max.in.flight.requests.per.connection bound for idempotence.
const ProducerBatchWindow = 5

// ProducerBatch is one batch an idempotent producer appended.
type ProducerBatch struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	MaxTimestamp            int64
}

// ProducerEntry is one producer id's state on this partition, as Kafka's
// ProducerStateEntry: its latest epoch and its latest batches of that
// epoch, oldest first, at most ProducerBatchWindow. Batches is empty
// when the epoch came from a control batch only.
type ProducerEntry struct {
	ProducerID int64
	Epoch      int16
	// LastTimestamp is the largest maxTimestamp of the producer's batches
	// (control batches included): what expiry goes by, as Kafka's
	// ProducerStateEntry.lastTimestamp.
	LastTimestamp int64
	Batches       []ProducerBatch
}

// producerState is the partition's producer table (Kafka's
// ProducerStateManager, without transactions): it describes every batch
// below end. Log.mu guards the one the log holds; the writer replaces or
// updates it under the write lock.
type producerState struct {
	m   map[int64]*ProducerEntry
	end int64 // offset up to which (exclusive) the table covers the log
}

func newProducerState(end int64) producerState {
	return producerState{m: map[int64]*ProducerEntry{}, end: end}
}

// update applies one appended batch (leader or follower, or a replay at
// open): a new epoch starts the producer's window afresh; control
// batches (transaction markers) move the epoch only. Batches without a
// producer id are ignored. Kafka applies the same update whatever the
// append's origin; the sequence rules are the leader's business.
func (s *producerState) update(b BatchInfo) {
	s.end = max(s.end, b.LastOffset+1)
	if b.ProducerID < 0 {
		return
	}
	e := s.m[b.ProducerID]
	if e == nil {
		e = &ProducerEntry{ProducerID: b.ProducerID, Epoch: b.ProducerEpoch, LastTimestamp: b.MaxTimestamp}
		s.m[b.ProducerID] = e
	}
	if b.ProducerEpoch != e.Epoch {
		e.Epoch, e.Batches = b.ProducerEpoch, e.Batches[:0]
	}
	e.LastTimestamp = max(e.LastTimestamp, b.MaxTimestamp)
	if b.Control {
		return
	}
	if len(e.Batches) == ProducerBatchWindow {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:len(e.Batches)-1]
	}
	e.Batches = append(e.Batches, ProducerBatch{
		FirstSeq: b.BaseSequence, LastSeq: b.LastSequence(),
		FirstOffset: b.BaseOffset, LastOffset: b.LastOffset, MaxTimestamp: b.MaxTimestamp,
	})
}

// entry returns a copy of pid's entry.
func (s *producerState) entry(pid int64) (ProducerEntry, bool) {
	e := s.m[pid]
	if e == nil {
		return ProducerEntry{}, false
	}
	c := *e
	c.Batches = slices.Clone(e.Batches)
	return c, true
}

// removeExpired forgets producers whose LastTimestamp is expirationMs or
// more before nowMs (Kafka's removeExpiredProducers) and returns how many.
func (s *producerState) removeExpired(nowMs, expirationMs int64) int {
	n := 0
	for id, e := range s.m {
		if nowMs-e.LastTimestamp >= expirationMs {
			delete(s.m, id)
			n++
		}
	}
	return n
}

// Snapshot files: "<20-digit offset>.snapshot" beside the segments, the
// table as it stood at that offset (Kafka names them the same way). See
// doc.go for the layout.
const (
	snapshotSuffix     = ".snapshot"
	snapshotMagic      = "KWPS"
	snapshotVersion    = 1
	snapshotHeaderSize = 4 + 2 + 4 + 8 + 4 // magic, version, crc, offset, count
	snapshotEntryFixed = 8 + 2 + 8 + 1     // producer id, epoch, last timestamp, batch count
	snapshotBatchSize  = 4 + 4 + 8 + 8 + 8 // first/last seq, first/last offset, max timestamp
)

// ErrCorruptSnapshot matches every *CorruptSnapshotError.
var ErrCorruptSnapshot = errors.New("kafkalog: corrupt producer-state snapshot")

// CorruptSnapshotError says why a producer-state snapshot was refused.
type CorruptSnapshotError struct{ Reason string }

func (e *CorruptSnapshotError) Error() string {
	return "kafkalog: corrupt producer-state snapshot: " + e.Reason
}

// Is makes errors.Is(err, ErrCorruptSnapshot) true.
func (e *CorruptSnapshotError) Is(target error) bool { return target == ErrCorruptSnapshot }

func snapshotName(offset int64) string { return segmentName(offset) + snapshotSuffix }

func parseSnapshotName(name string) (int64, bool) { return parseOffsetName(name, snapshotSuffix) }

// encodeProducerSnapshot renders the table as of offset s.end, producers
// in id order so that equal tables give equal bytes.
func encodeProducerSnapshot(s *producerState) []byte {
	ids := slices.Sorted(maps.Keys(s.m))
	n := snapshotHeaderSize
	for _, id := range ids {
		n += snapshotEntryFixed + len(s.m[id].Batches)*snapshotBatchSize
	}
	b := make([]byte, 0, n)
	be := binary.BigEndian
	b = append(b, snapshotMagic...)
	b = be.AppendUint16(b, snapshotVersion)
	b = be.AppendUint32(b, 0) // CRC, below
	b = be.AppendUint64(b, uint64(s.end))
	b = be.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		e := s.m[id]
		b = be.AppendUint64(b, uint64(e.ProducerID))
		b = be.AppendUint16(b, uint16(e.Epoch))
		b = be.AppendUint64(b, uint64(e.LastTimestamp))
		b = append(b, byte(len(e.Batches)))
		for _, pb := range e.Batches {
			b = be.AppendUint32(b, uint32(pb.FirstSeq))
			b = be.AppendUint32(b, uint32(pb.LastSeq))
			b = be.AppendUint64(b, uint64(pb.FirstOffset))
			b = be.AppendUint64(b, uint64(pb.LastOffset))
			b = be.AppendUint64(b, uint64(pb.MaxTimestamp))
		}
	}
	be.PutUint32(b[6:], crc32.Checksum(b[10:], castagnoli))
	return b
}

// decodeProducerSnapshot parses and checks a snapshot: magic, version,
// CRC32C, exact length, and that every entry is one a log could have
// produced (ids >= 0 and ascending, 0..ProducerBatchWindow batches in offset
// order, all below the snapshot offset). Errors are *CorruptSnapshotError
// (ErrCorruptSnapshot).
func decodeProducerSnapshot(b []byte) (producerState, error) {
	bad := func(format string, args ...any) (producerState, error) {
		return producerState{}, &CorruptSnapshotError{Reason: fmt.Sprintf(format, args...)}
	}
	if len(b) < snapshotHeaderSize {
		return bad("%d bytes, shorter than the header", len(b))
	}
	if string(b[:4]) != snapshotMagic {
		return bad("magic %q", b[:4])
	}
	be := binary.BigEndian
	if v := be.Uint16(b[4:]); v != snapshotVersion {
		return bad("version %d, this build reads %d", v, snapshotVersion)
	}
	if got, want := crc32.Checksum(b[10:], castagnoli), be.Uint32(b[6:]); got != want {
		return bad("crc32c %#08x, header says %#08x", got, want)
	}
	s := newProducerState(int64(be.Uint64(b[10:])))
	if s.end < 0 {
		return bad("offset %d", s.end)
	}
	count := be.Uint32(b[18:])
	p := b[snapshotHeaderSize:]
	lastID := int64(-1)
	if uint64(count)*snapshotEntryFixed > uint64(len(p)) {
		return bad("%d entries in %d bytes", count, len(p))
	}
	for i := uint32(0); i < count; i++ {
		if len(p) < snapshotEntryFixed {
			return bad("entry %d: torn", i)
		}
		e := &ProducerEntry{ProducerID: int64(be.Uint64(p)), Epoch: int16(be.Uint16(p[8:])), LastTimestamp: int64(be.Uint64(p[10:]))}
		n := int(p[18])
		p = p[snapshotEntryFixed:]
		if e.ProducerID < 0 {
			return bad("entry %d: producer id %d", i, e.ProducerID)
		}
		if e.ProducerID <= lastID {
			return bad("entry %d: producer id %d after %d (ids ascend)", i, e.ProducerID, lastID)
		}
		lastID = e.ProducerID
		if n > ProducerBatchWindow || len(p) < n*snapshotBatchSize {
			return bad("entry %d: %d batches in %d bytes", i, n, len(p))
		}
		prev := int64(-1)
		for j := 0; j < n; j++ {
			pb := ProducerBatch{
				FirstSeq: int32(be.Uint32(p)), LastSeq: int32(be.Uint32(p[4:])),
				FirstOffset: int64(be.Uint64(p[8:])), LastOffset: int64(be.Uint64(p[16:])),
				MaxTimestamp: int64(be.Uint64(p[24:])),
			}
			p = p[snapshotBatchSize:]
			if pb.FirstOffset <= prev || pb.LastOffset < pb.FirstOffset || pb.LastOffset >= s.end || pb.FirstSeq < 0 || pb.LastSeq < 0 {
				return bad("entry %d batch %d: offsets [%d, %d] sequences [%d, %d] after %d, snapshot at %d",
					i, j, pb.FirstOffset, pb.LastOffset, pb.FirstSeq, pb.LastSeq, prev, s.end)
			}
			prev = pb.LastOffset
			e.Batches = append(e.Batches, pb)
		}
		s.m[e.ProducerID] = e
	}
	if len(p) != 0 {
		return bad("%d bytes after the last entry", len(p))
	}
	return s, nil
}

// snapshotOffsets lists the snapshot files in the log directory, oldest
// first. Caller holds writeMu.
func (l *Log) snapshotOffsets() ([]int64, error) {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, n := range names {
		if o, ok := parseSnapshotName(n); ok {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func (l *Log) snapshotPath(offset int64) string { return l.dir + "/" + snapshotName(offset) }

// removeSnapshots deletes the snapshots keep rejects. Caller holds writeMu.
func (l *Log) removeSnapshots(keep func(offset int64) bool) error {
	offs, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	removed := false
	for _, o := range offs {
		if keep(o) {
			continue
		}
		if err := l.fs.Remove(l.snapshotPath(o)); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		return l.fs.SyncDir(l.dir)
	}
	return nil
}

// takeSnapshot writes the table as of the log end (Kafka's takeSnapshot,
// at a roll and at Close) and keeps only the newest
// Config.ProducerSnapshots snapshots. A failure is logged, not returned:
// a missing snapshot costs a longer replay at the next open, never
// correctness. Caller holds writeMu.
func (l *Log) takeSnapshot() {
	if l.cfg.ProducerStateRebuildDisabled {
		return
	}
	l.mu.RLock()
	data := encodeProducerSnapshot(&l.mu.producers)
	end := l.mu.producers.end
	l.mu.RUnlock()
	if err := writeFileAtomic(l.fs, l.dir, snapshotName(end), data); err != nil {
		l.logger.Warn("kafkalog: cannot write producer-state snapshot", "offset", end, "err", err)
		return
	}
	offs, err := l.snapshotOffsets()
	if err == nil && len(offs) > l.cfg.ProducerSnapshots {
		oldestKept := offs[len(offs)-l.cfg.ProducerSnapshots]
		err = l.removeSnapshots(func(o int64) bool { return o >= oldestKept })
	}
	if err != nil {
		l.logger.Warn("kafkalog: cannot prune producer-state snapshots", "err", err)
	}
}

// loadProducerState rebuilds the producer table for the log as it is
// now, as Kafka's loadProducerState does: snapshots outside [log start,
// log end] are deleted; the newest readable snapshot at or below the log
// end is loaded (a corrupt one is logged, deleted, and the next older one
// tried); batch headers from there to the log end are replayed. With no
// usable snapshot the whole log is replayed. Caller holds writeMu; the
// table is installed under mu.
func (l *Log) loadProducerState() error {
	start, leo := l.logStartOffset(), l.mu.leo
	if l.cfg.ProducerStateRebuildDisabled {
		st := newProducerState(leo)
		l.mu.Lock()
		l.mu.producers = st
		l.mu.Unlock()
		return nil
	}
	if err := l.removeSnapshots(func(o int64) bool { return o >= start && o <= leo }); err != nil {
		return fmt.Errorf("producer state: %w", err)
	}
	offs, err := l.snapshotOffsets()
	if err != nil {
		return fmt.Errorf("producer state: %w", err)
	}
	st := newProducerState(start)
	for i := len(offs) - 1; i >= 0; i-- {
		loaded, err := l.readSnapshot(offs[i])
		if err == nil {
			st = loaded
			break
		}
		l.logger.Warn("kafkalog: ignoring unusable producer-state snapshot; trying an earlier one or the log",
			"offset", offs[i], "err", err)
		if err := l.fs.Remove(l.snapshotPath(offs[i])); err != nil {
			return fmt.Errorf("producer state: %w", err)
		}
	}
	from := st.end
	if err := l.replayProducers(&st, from, leo); err != nil {
		return fmt.Errorf("producer state: replay [%d, %d): %w", from, leo, err)
	}
	st.end = leo
	st.removeExpired(l.clock.Now().UnixMilli(), l.cfg.ProducerIDExpirationMs)
	l.mu.Lock()
	l.mu.producers = st
	l.mu.Unlock()
	l.logger.Debug("kafkalog: producer state loaded", "snapshot", from, "replayedTo", leo, "producers", len(st.m))
	return nil
}

func (l *Log) readSnapshot(offset int64) (producerState, error) {
	f, err := l.fs.Open(l.snapshotPath(offset))
	if err != nil {
		return producerState{}, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return producerState{}, err
	}
	if size > 1<<30 {
		return producerState{}, &CorruptSnapshotError{Reason: fmt.Sprintf("%d bytes", size)}
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return producerState{}, err
	}
	st, err := decodeProducerSnapshot(b)
	if err != nil {
		return producerState{}, err
	}
	if st.end != offset {
		return producerState{}, &CorruptSnapshotError{Reason: fmt.Sprintf("file %s holds offset %d", snapshotName(offset), st.end)}
	}
	return st, nil
}

// replayProducers applies the headers of the batches in [from, to) to st.
// from must start a batch (snapshots are taken at batch boundaries).
// Caller holds writeMu.
func (l *Log) replayProducers(st *producerState, from, to int64) error {
	r := &segReader{chunk: 1 << 20} // one buffer for every segment
	for _, s := range l.mu.segs {
		if s.next <= from || s.base >= to {
			continue
		}
		r.f, r.size, r.start, r.buf = s.file, s.size, 0, r.buf[:0]
		pos := int64(0)
		if from > s.base {
			p, _, err := locate(r, s, from)
			if err != nil {
				return err
			}
			pos = p
		}
		for pos < s.size {
			b, err := r.view(pos, BatchHeaderSize)
			if err != nil {
				return fmt.Errorf("segment %d: header at %d: %w", s.base, pos, err)
			}
			h, err := ParseBatchHeader(b)
			if err != nil {
				return fmt.Errorf("segment %d: %w", s.base, atPosition(err, pos))
			}
			if h.BaseOffset >= to {
				return nil
			}
			if h.BaseOffset >= from {
				st.update(batchInfoOf(h))
			}
			pos += int64(h.Size())
		}
	}
	return nil
}

// ProducerEntry returns a copy of the producer's state on this partition
// (ok false: no batch of it in the log, nor in the snapshot loaded).
func (l *Log) ProducerEntry(producerID int64) (ProducerEntry, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.producers.entry(producerID)
}

// RemoveExpiredProducers forgets the producers whose latest batch
// timestamp is ProducerIDExpirationMs or more before the clock's now (the
// check Kafka runs every producer.id.expiration.check.interval.ms), so the
// table is bounded by the producers active within that time. It returns
// how many it removed; the next snapshot leaves them out too.
func (l *Log) RemoveExpiredProducers() int {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.producers.removeExpired(l.clock.Now().UnixMilli(), l.cfg.ProducerIDExpirationMs)
}

// ProducerCount is the number of producers the table knows.
func (l *Log) ProducerCount() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.mu.producers.m)
}

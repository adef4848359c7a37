package kafkalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sort"
)

// Log compaction (cleanup.policy=compact), Kafka's log cleaner for one
// partition:
//
//	log start          first dirty                 cleanable end   active segment
//	|---- clean --------|----------- dirty ------------|  (not cleaned) |
//
// A pass builds a map key → last offset over the dirty section, then
// rewrites every cleanable segment keeping, for each key, only its record
// at the mapped offset (records in the clean section whose key does not
// occur in the dirty one stay). Offsets never change: a batch keeps its
// base offset, lastOffsetDelta, timestamps and leader epoch, and loses
// only records; a batch left without records is dropped, except the last
// batch of a producer id, which stays empty so producer state can still be
// rebuilt from the log. Consumers see gaps in the offsets, as in Kafka.
//
// Tombstones (null values) are dropped once they are older than
// DeleteRetentionMs. "Older" is measured in the data's time (the newest
// batch timestamp of the cleanable range), not by a wall clock, so that
// every replica that cleans the same range makes the same decision and
// keeps the same bytes.
//
// Each rewritten segment goes to "<base>.log.clean.tmp", is fsynced and
// renamed over "<base>.log" (an atomic replace); a crash leaves either the
// old or the new segment, and Open removes a leftover .tmp. The first
// dirty offset is kept in cleaner-offset-checkpoint (Kafka's one-offset
// checkpoint format), written after the segments.
//
// The pass reads sealed segments without holding the log's locks (their
// bytes do not change) and takes the write lock only to swap a segment in;
// if retention or truncation changed the segment meanwhile, the pass stops
// and reports ErrCompactionRaced.

const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// DefaultCompactMaxKeys bounds the keys one pass maps (Kafka bounds its
// offset map by log.cleaner.dedupe.buffer.size; 16 bytes per key here
// plus Go's map overhead, so ~1 GiB at this bound).
const DefaultCompactMaxKeys = 1 << 24

// ErrCompactionRaced: a segment changed (retention, truncation) while a
// compaction pass was rewriting it. The pass stopped; the next one starts
// again from the checkpoint.
var ErrCompactionRaced = errors.New("kafkalog: segment changed during compaction")

// CompactConfig is what one compaction pass may do.
type CompactConfig struct {
	// UpTo: only segments whose offsets are all below UpTo are cleaned
	// (the caller passes the high watermark). The active segment never is.
	UpTo int64
	// MinCleanableDirtyRatio (min.cleanable.dirty.ratio, Kafka default
	// 0.5): clean only when dirty bytes / cleanable bytes reach it.
	MinCleanableDirtyRatio float64
	// DeleteRetentionMs (delete.retention.ms, Kafka default 86400000).
	DeleteRetentionMs int64
	// MinCompactionLagMs (min.compaction.lag.ms, default 0): a segment
	// whose newest timestamp is within this of the log's newest cleanable
	// timestamp is not cleaned yet.
	MinCompactionLagMs int64
	// MaxKeys bounds the offset map; 0 takes DefaultCompactMaxKeys. When a
	// dirty section has more keys, the pass cleans up to the segment where
	// the map filled (at least one segment).
	MaxKeys int
	// Force cleans whatever the dirty ratio.
	Force bool
}

// CompactStats says what a pass did.
type CompactStats struct {
	Cleaned    bool
	FirstDirty int64 // where the dirty section started
	End        int64 // the pass cleaned offsets below End; the new first dirty offset
	DirtyRatio float64
	Segments   int // segments rewritten
	BatchesIn  int
	BatchesOut int
	RecordsIn  int64
	RecordsOut int64
	Tombstones int64 // tombstones dropped
	BytesIn    int64
	BytesOut   int64
}

type segView struct {
	s         *segment
	base      int64
	size      int64
	next      int64
	ts        int64
	file      File
	following int64 // base offset of the segment after this one
}

// Compact runs one compaction pass. Errors: ErrClosed, ErrFailed,
// ErrCompactionRaced, *CorruptBatchError (a stored batch that does not
// decode; nothing is rewritten), I/O errors.
func (l *Log) Compact(cfg CompactConfig) (CompactStats, error) {
	if cfg.MinCleanableDirtyRatio < 0 || cfg.MinCleanableDirtyRatio > 1 || math.IsNaN(cfg.MinCleanableDirtyRatio) {
		return CompactStats{}, fmt.Errorf("%w: min.cleanable.dirty.ratio %v outside [0, 1]", errConfig, cfg.MinCleanableDirtyRatio)
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultCompactMaxKeys
	}
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return CompactStats{}, ErrClosed
	}
	logStart := l.logStartOffset()
	var views []segView
	for i, s := range l.mu.segs[:len(l.mu.segs)-1] {
		if s.next > cfg.UpTo {
			break
		}
		views = append(views, segView{s: s, base: s.base, size: s.size, next: s.next, ts: s.maxTimestamp, file: s.file, following: l.mu.segs[i+1].base})
	}
	l.mu.RUnlock()

	// Compaction lag: the cleanable range ends before the first segment
	// that is too new.
	var newest int64 = -1
	for _, v := range views {
		newest = max(newest, v.ts)
	}
	if cfg.MinCompactionLagMs > 0 {
		for i, v := range views {
			if v.ts > newest-cfg.MinCompactionLagMs {
				views = views[:i]
				break
			}
		}
	}
	firstDirty, _, err := readOffsetCheckpoint(l.fs, l.dir, cleanerCheckpointFile)
	if err != nil {
		l.logger.Warn("kafkalog: ignoring unreadable cleaner checkpoint; the whole log is dirty", "err", err)
		firstDirty = 0
	}
	firstDirty = max(firstDirty, logStart)
	st := CompactStats{FirstDirty: firstDirty, End: firstDirty}
	var total, dirty int64
	for _, v := range views {
		total += v.size
		if v.next > firstDirty {
			dirty += v.size
		}
	}
	if dirty == 0 || len(views) == 0 {
		return st, nil
	}
	st.DirtyRatio = float64(dirty) / float64(total)
	if st.DirtyRatio < cfg.MinCleanableDirtyRatio && !cfg.Force {
		return st, nil
	}

	// Map pass over the dirty section; headers of everything for the
	// last batch of each producer.
	seed1, seed2 := maphash.MakeSeed(), maphash.MakeSeed()
	keyOf := func(k []byte) [2]uint64 { return [2]uint64{maphash.Bytes(seed1, k), maphash.Bytes(seed2, k)} }
	offsets := make(map[[2]uint64]int64)
	lastOfProducer := make(map[int64]int64) // producer id → base offset of its last batch
	end := len(views)
	for i, v := range views {
		err := l.walkSegment(v, func(h BatchHeader, batch []byte) error {
			if h.ProducerID >= 0 {
				lastOfProducer[h.ProducerID] = h.BaseOffset
			}
			if v.next <= firstDirty || h.LastOffset() < firstDirty || h.Control() {
				return nil
			}
			return eachStoredRecord(h, batch, func(r record) {
				if r.hasKey && h.BaseOffset+int64(r.offsetDelta) >= firstDirty {
					offsets[keyOf(r.key)] = h.BaseOffset + int64(r.offsetDelta)
				}
			})
		})
		if err != nil {
			return st, fmt.Errorf("kafkalog: compact: %w", err)
		}
		if len(offsets) > cfg.MaxKeys && v.next > firstDirty {
			end = i + 1
			l.logger.Warn("kafkalog: compaction offset map full; cleaning part of the dirty section", "keys", len(offsets), "maxKeys", cfg.MaxKeys, "upTo", v.next)
			break
		}
	}
	views = views[:end]
	horizon := int64(math.MinInt64)
	if cfg.DeleteRetentionMs >= 0 && newest >= 0 {
		horizon = newest - cfg.DeleteRetentionMs
	}

	// Before the first rewritten segment exists, record that the log may
	// hold compacted segments, so that recovery accepts their gaps.
	l.writeMu.Lock()
	if !l.w.compacted {
		if err := writeOffsetCheckpoint(l.fs, l.dir, cleanerCheckpointFile, firstDirty); err != nil {
			l.writeMu.Unlock()
			return st, fmt.Errorf("kafkalog: compact: checkpoint: %w", err)
		}
		l.w.compacted = true
	}
	l.writeMu.Unlock()
	for _, v := range views {
		n, err := l.compactSegment(v, keyOf, offsets, lastOfProducer, horizon, &st)
		if err != nil {
			return st, err
		}
		st.Segments += n
	}
	st.End = views[len(views)-1].following
	if err := writeOffsetCheckpoint(l.fs, l.dir, cleanerCheckpointFile, st.End); err != nil {
		return st, fmt.Errorf("kafkalog: compact: checkpoint: %w", err)
	}
	st.Cleaned = true
	l.logger.Info("kafkalog: compacted", "firstDirty", st.FirstDirty, "end", st.End, "dirtyRatio", st.DirtyRatio,
		"segmentsRewritten", st.Segments, "records", st.RecordsIn, "kept", st.RecordsOut, "tombstonesDropped", st.Tombstones,
		"bytesIn", st.BytesIn, "bytesOut", st.BytesOut)
	return st, nil
}

// walkSegment calls fn for each batch of a sealed segment.
func (l *Log) walkSegment(v segView, fn func(h BatchHeader, batch []byte) error) error {
	r := &segReader{f: v.file, size: v.size, chunk: 1 << 20}
	for pos := int64(0); pos < v.size; {
		fr, err := r.view(pos, BatchLengthOverhead)
		if err != nil {
			return fmt.Errorf("segment %d at %d: %w", v.base, pos, errOrRaced(err))
		}
		n := BatchLengthOverhead + int(int32(binary.BigEndian.Uint32(fr[offBatchLength:])))
		if n < BatchHeaderSize {
			return fmt.Errorf("segment %d: %w", v.base, corruptf(pos, "batchLength below header size"))
		}
		b, err := r.view(pos, n)
		if err != nil {
			return fmt.Errorf("segment %d at %d: %w", v.base, pos, errOrRaced(err))
		}
		h, err := ParseBatchHeader(b)
		if err != nil {
			return fmt.Errorf("segment %d: %w", v.base, atPosition(err, pos))
		}
		if err := fn(h, b); err != nil {
			return err
		}
		pos += int64(n)
	}
	return nil
}

func errOrRaced(err error) error {
	if errors.Is(err, errShort) {
		return ErrCompactionRaced
	}
	return err
}

// record is one record of a batch, as the cleaner sees it.
type record struct {
	raw         []byte // length varint through the end of the record
	offsetDelta int32
	tsDelta     int64
	key         []byte
	hasKey      bool
	tombstone   bool
}

// records returns the batch's records section, decompressed.
func storedRecords(h BatchHeader, batch []byte) ([]byte, error) {
	if h.Compression() == CodecNone {
		return batch[BatchHeaderSize:], nil
	}
	raw, err := decompressRecords(h.Compression(), batch[BatchHeaderSize:], DefaultMaxUncompressedBatchBytes)
	if err != nil {
		return nil, corruptf(BatchHeaderSize, "stored batch at offset %d: %v", h.BaseOffset, err)
	}
	return raw, nil
}

// eachRecord calls fn for each record of a stored batch.
func eachStoredRecord(h BatchHeader, batch []byte, fn func(r record)) error {
	recs, err := storedRecords(h, batch)
	if err != nil {
		return err
	}
	return splitRecords(recs, h, fn)
}

func splitRecords(recs []byte, h BatchHeader, fn func(r record)) error {
	for i := int32(0); i < h.RecordCount; i++ {
		length, n := binary.Varint(recs)
		if n <= 0 || length < 1 || length > int64(len(recs)-n) {
			return corruptf(BatchHeaderSize, "stored batch at offset %d: record %d: bad length", h.BaseOffset, i)
		}
		raw := recs[:n+int(length)]
		rr := recReader{b: recs[n+1 : n+int(length)]} // skip attributes
		r := record{raw: raw}
		r.tsDelta = rr.varint(math.MaxInt64)
		r.offsetDelta = int32(rr.varint(math.MaxInt32))
		kl := rr.varint(math.MaxInt32)
		if rr.bad || kl < -1 || kl > int64(len(rr.b)) {
			return corruptf(BatchHeaderSize, "stored batch at offset %d: record %d: bad key", h.BaseOffset, i)
		}
		if kl >= 0 {
			r.key, r.hasKey = rr.b[:kl], true
			rr.b = rr.b[kl:]
		}
		vl := rr.varint(math.MaxInt32)
		if rr.bad || vl < -1 {
			return corruptf(BatchHeaderSize, "stored batch at offset %d: record %d: bad value", h.BaseOffset, i)
		}
		r.tombstone = vl == -1
		fn(r)
		recs = recs[n+int(length):]
	}
	return nil
}

// compactSegment rewrites one segment if anything in it goes; it reports
// whether it did.
func (l *Log) compactSegment(v segView, keyOf func([]byte) [2]uint64, offsets map[[2]uint64]int64, lastOfProducer map[int64]int64, horizon int64, st *CompactStats) (int, error) {
	tmp := v.s.logPath + ".clean.tmp"
	var out File
	var written int64
	changed := false
	var kept []byte
	var pending [][]byte // batches before the first change, copied when it comes
	flush := func(b []byte) error {
		if out == nil {
			return nil
		}
		if _, err := out.WriteAt(b, written); err != nil {
			return err
		}
		written += int64(len(b))
		return nil
	}
	err := l.walkSegment(v, func(h BatchHeader, batch []byte) error {
		st.BatchesIn++
		st.RecordsIn += int64(h.RecordCount)
		st.BytesIn += int64(len(batch))
		var nb []byte
		if h.Control() {
			nb = batch
		} else {
			kept = kept[:0]
			count := int32(0)
			var err error
			if err = eachStoredRecord(h, batch, func(r record) {
				off := h.BaseOffset + int64(r.offsetDelta)
				if r.hasKey {
					if last, ok := offsets[keyOf(r.key)]; ok && last > off {
						return
					}
					if r.tombstone && int64(h.BaseTimestamp)+r.tsDelta < horizon {
						st.Tombstones++
						return
					}
				}
				kept = append(kept, r.raw...)
				count++
			}); err != nil {
				return err
			}
			switch {
			case count == h.RecordCount:
				nb = batch
			case count == 0 && !(h.ProducerID >= 0 && lastOfProducer[h.ProducerID] == h.BaseOffset):
				nb = nil
			default:
				if nb, err = rebuildBatch(h, batch, kept, count); err != nil {
					return err
				}
			}
			st.RecordsOut += int64(count)
		}
		if len(nb) != len(batch) && !changed {
			changed = true
			var err error
			if out, err = l.fs.Create(tmp); err != nil {
				return err
			}
			for _, p := range pending {
				if err := flush(p); err != nil {
					return err
				}
			}
			pending = nil
		}
		if !changed {
			pending = append(pending, batch)
			return nil
		}
		if nb != nil {
			st.BatchesOut++
			st.BytesOut += int64(len(nb))
		}
		return flush(nb)
	})
	if !changed {
		// Nothing goes: the segment stays as it is.
		for _, p := range pending {
			st.BatchesOut++
			st.BytesOut += int64(len(p))
		}
		return 0, err
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		l.fs.Remove(tmp)
		return 0, fmt.Errorf("kafkalog: compact segment %d: %w", v.base, err)
	}
	return 1, l.swapSegment(v, tmp)
}

// rebuildBatch writes a batch with the same header fields and only the
// kept records (recompressed with the batch's codec), and a new CRC.
func rebuildBatch(h BatchHeader, batch, kept []byte, count int32) ([]byte, error) {
	body := kept
	attrs := h.Attributes
	if h.Compression() != CodecNone {
		if count == 0 {
			attrs &^= 7 // an empty batch carries no compressed stream
		} else {
			var err error
			if body, err = compressRecords(h.Compression(), kept); err != nil {
				return nil, err
			}
		}
	}
	nb := make([]byte, BatchHeaderSize+len(body))
	copy(nb, batch[:BatchHeaderSize])
	copy(nb[BatchHeaderSize:], body)
	be := binary.BigEndian
	be.PutUint32(nb[offBatchLength:], uint32(len(nb)-BatchLengthOverhead))
	be.PutUint16(nb[offAttributes:], uint16(attrs))
	be.PutUint32(nb[offRecordCount:], uint32(count))
	be.PutUint32(nb[offCRC:], BatchCRC(nb))
	return nb, nil
}

// swapSegment replaces v's file by the rewritten tmp, if the segment is
// still what the pass read.
func (l *Log) swapSegment(v segView, tmp string) error {
	defer l.changed() // after the unlock
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		l.fs.Remove(tmp)
		return err
	}
	i := sort.Search(len(l.mu.segs), func(i int) bool { return l.mu.segs[i].base >= v.base })
	if i >= len(l.mu.segs)-1 || l.mu.segs[i] != v.s || v.s.size != v.size {
		l.fs.Remove(tmp)
		return fmt.Errorf("kafkalog: compact segment %d: %w", v.base, ErrCompactionRaced)
	}
	if err := l.fs.Rename(tmp, v.s.logPath); err != nil {
		l.fs.Remove(tmp)
		return fmt.Errorf("kafkalog: compact segment %d: %w", v.base, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failWith(fmt.Errorf("kafkalog: compact segment %d: %w", v.base, err))
	}
	f, err := l.fs.Open(v.s.logPath)
	if err != nil {
		return l.failWith(fmt.Errorf("kafkalog: compact segment %d: reopen: %w", v.base, err))
	}
	size, err := f.Size()
	if err == nil {
		var res scanResult
		res, err = scanSegment(f, size, v.base, l.cfg.IndexIntervalBytes, false, true)
		if err == nil && res.validEnd != size {
			err = fmt.Errorf("rewritten segment does not scan: %s", res.problem)
		}
		if err == nil {
			l.mu.Lock()
			old := v.s.file
			v.s.file, v.s.size, v.s.index, v.s.bytesSinceIndex = f, size, res.index, res.bytesSinceIndex
			v.s.timeIndex, v.s.bytesSinceTimeIndex = res.timeIndex, res.bytesSinceTimeIndex
			if res.next > v.base {
				v.s.next = res.next
			}
			l.mu.Unlock()
			old.Close()
			return l.writeIndexFile(v.s.indexPath, res.index)
		}
	}
	f.Close()
	return l.failWith(fmt.Errorf("kafkalog: compact segment %d: %w", v.base, err))
}

// failWith marks the log failed (as a failed write does) and returns err.
// Caller holds writeMu.
func (l *Log) failWith(err error) error {
	l.w.failed = err
	l.logger.Error("kafkalog: log failed; reopen it to recover", "err", err)
	return err
}

// validateStoredBatch checks a batch of a sealed segment, which the
// cleaner may have compacted: the structure and CRC, recordCount at most
// lastOffsetDelta+1 (0 for the empty batch kept for a producer), and for
// uncompressed records their framing with offset deltas increasing within
// [0, lastOffsetDelta].
func validateStoredBatch(b []byte) (BatchHeader, error) {
	h, err := validateStructure(b, math.MaxInt32)
	if err != nil {
		return h, err
	}
	if h.RecordCount < 0 || h.LastOffsetDelta < 0 || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
		return h, corruptf(0, "record count %d with lastOffsetDelta %d", h.RecordCount, h.LastOffsetDelta)
	}
	if h.Compression() != CodecNone {
		return h, nil
	}
	prev := int32(-1)
	bad := ""
	err = splitRecords(b[BatchHeaderSize:], h, func(r record) {
		if bad == "" && (r.offsetDelta <= prev || r.offsetDelta > h.LastOffsetDelta) {
			bad = fmt.Sprintf("offsetDelta %d after %d (lastOffsetDelta %d)", r.offsetDelta, prev, h.LastOffsetDelta)
		}
		prev = r.offsetDelta
	})
	if err != nil {
		return h, err
	}
	if bad != "" {
		return h, corruptf(BatchHeaderSize, "%s", bad)
	}
	// splitRecords stops after recordCount records; anything after is junk.
	n := 0
	rest := b[BatchHeaderSize:]
	for i := int32(0); i < h.RecordCount; i++ {
		l, k := binary.Varint(rest[n:])
		n += k + int(l)
	}
	if n != len(rest) {
		return h, corruptf(BatchHeaderSize, "%d bytes after the last of %d records", len(rest)-n, h.RecordCount)
	}
	return h, nil
}

// splitStoredBatches is splitBatches for a compacted log's bytes: each
// batch is checked by validateStoredBatch (and maxBytes).
func splitStoredBatches(b []byte, maxBytes int, fn func(h BatchHeader, batch []byte) error) error {
	for pos := 0; pos < len(b); {
		size, err := frameSize(b[pos:], int64(pos))
		if err != nil {
			return err
		}
		if size > maxBytes {
			return fmt.Errorf("%w: %d bytes, max %d", ErrBatchTooLarge, size, maxBytes)
		}
		h, err := validateStoredBatch(b[pos : pos+size])
		if err != nil {
			return atPosition(err, int64(pos))
		}
		if err := fn(h, b[pos:pos+size]); err != nil {
			return err
		}
		pos += size
	}
	return nil
}

// Record is one record of a stored batch as EachRecord hands it out.
// Key and Value alias the batch (or its decompressed copy); a nil Key or
// Value was null.
type Record struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
}

// EachRecord calls fn for each record of one stored batch (compressed or
// not, compacted or not). Errors: *CorruptBatchError.
func EachRecord(batch []byte, fn func(r Record)) error {
	h, err := validateStoredBatch(batch)
	if err != nil {
		return err
	}
	return eachStoredRecord(h, batch, func(r record) {
		out := Record{Offset: h.BaseOffset + int64(r.offsetDelta), Timestamp: h.BaseTimestamp + r.tsDelta, Key: r.key}
		if !r.tombstone {
			out.Value = valueOf(r.raw)
		}
		fn(out)
	})
}

// valueOf returns the value of a raw record (length varint first) that
// splitRecords accepted.
func valueOf(raw []byte) []byte {
	rr := recReader{b: raw}
	rr.varint(math.MaxInt32) // length
	rr.b = rr.b[1:]          // attributes
	rr.varint(math.MaxInt64) // timestamp delta
	rr.varint(math.MaxInt32) // offset delta
	rr.bytes(true)           // key
	vl := rr.varint(math.MaxInt32)
	if rr.bad || vl < 0 || vl > int64(len(rr.b)) {
		return nil
	}
	return rr.b[:vl:vl]
}

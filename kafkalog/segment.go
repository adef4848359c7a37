package kafkalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// indexEntry is one sparse offset-index entry, Kafka's: the last offset of
// a batch relative to the segment base, and the batch's start position.
type indexEntry struct {
	rel uint32
	pos uint32
}

const indexEntrySize = 8

// segment is one <base>.log file and its in-memory offset index.
type segment struct {
	base      int64
	logPath   string
	indexPath string
	file      File

	// Published state: written by the writer under Log.mu (write lock),
	// read by readers under Log.mu (read lock). Bytes below size are whole
	// batches and never change until a truncation, which holds the write
	// lock.
	size         int64
	next         int64 // offset after the last batch; base when empty
	index        []indexEntry
	maxTimestamp int64 // largest batch maxTimestamp; -1 if none
	timeIndex    []timeEntry
	lastModified time.Time // by the clock, at the last append or at open

	// Writer-only state, under Log.writeMu.
	bytesSinceIndex     int
	bytesSinceTimeIndex int
	firstAppend         time.Time // zero until the first append since creation/open
	dirty               bool      // bytes written since the last fsync
}

func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// parseSegmentName returns the base offset of a "<20 digits>.log" name.
func parseSegmentName(name string) (int64, bool) { return parseOffsetName(name, ".log") }

// parseOffsetName returns the offset of a "<20 digits><suffix>" name.
func parseOffsetName(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

func newSegmentPaths(dir string, base int64) *segment {
	n := segmentName(base)
	return &segment{
		base:         base,
		next:         base,
		logPath:      filepath.Join(dir, n+".log"),
		indexPath:    filepath.Join(dir, n+".index"),
		maxTimestamp: -1,
	}
}

// lookup returns the position to start scanning from for offset: that of
// the last index entry whose offset is <= offset, else 0.
func lookup(index []indexEntry, base, offset int64) int64 {
	lo, hi := 0, len(index) // first entry with offset > target
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if base+int64(index[m].rel) <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return int64(index[lo-1].pos)
}

// encodeIndex renders entries in Kafka's .index format.
func encodeIndex(entries []indexEntry) []byte {
	b := make([]byte, len(entries)*indexEntrySize)
	for i, e := range entries {
		binary.BigEndian.PutUint32(b[i*8:], e.rel)
		binary.BigEndian.PutUint32(b[i*8+4:], e.pos)
	}
	return b
}

// segReader serves views of a file region through one reusable buffer.
type segReader struct {
	f     File
	size  int64 // readable limit
	chunk int
	buf   []byte
	start int64
}

var errShort = errors.New("short")

// view returns bytes [pos, pos+n), valid until the next call. errShort if
// the region passes size.
func (r *segReader) view(pos int64, n int) ([]byte, error) {
	if pos < 0 || n < 0 || pos+int64(n) > r.size {
		return nil, errShort
	}
	if pos >= r.start && pos+int64(n) <= r.start+int64(len(r.buf)) {
		o := pos - r.start
		return r.buf[o : o+int64(n)], nil
	}
	want := int64(max(n, r.chunk))
	want = min(want, r.size-pos)
	if int64(cap(r.buf)) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	r.start = pos
	if _, err := r.f.ReadAt(r.buf, pos); err != nil && !errors.Is(err, io.EOF) {
		r.buf = r.buf[:0]
		return nil, err
	}
	return r.buf[:n], nil
}

// liteHeader is the part of a header a walk needs.
type liteHeader struct {
	base  int64
	size  int
	last  int64
	epoch int32
	maxTS int64
}

const liteHeaderSize = offMaxTimestamp + 8

func parseLite(b []byte) liteHeader {
	be := binary.BigEndian
	h := liteHeader{
		base:  int64(be.Uint64(b[offBaseOffset:])),
		size:  BatchLengthOverhead + int(int32(be.Uint32(b[offBatchLength:]))),
		epoch: int32(be.Uint32(b[offLeaderEpoch:])),
	}
	h.last = h.base + int64(int32(be.Uint32(b[offLastOffsetDelta:])))
	h.maxTS = int64(be.Uint64(b[offMaxTimestamp:]))
	return h
}

// locate finds the batch of s containing offset (s.base <= offset <
// s.next) within the first size bytes. Caller holds Log.mu (any mode) or
// is the writer.
func locate(r *segReader, s *segment, offset int64) (int64, liteHeader, error) {
	pos := lookup(s.index, s.base, offset)
	for pos < r.size {
		b, err := r.view(pos, liteHeaderSize)
		if err != nil {
			return 0, liteHeader{}, fmt.Errorf("segment %d: read header at %d: %w", s.base, pos, err)
		}
		h := parseLite(b)
		if h.size < BatchHeaderSize {
			return 0, liteHeader{}, fmt.Errorf("segment %d: %w", s.base, corruptf(pos, "batchLength below header size"))
		}
		if h.last >= offset {
			return pos, h, nil
		}
		pos += int64(h.size)
	}
	return 0, liteHeader{}, fmt.Errorf("segment %d: offset %d not found below position %d: %w", s.base, offset, r.size, ErrOffsetOutOfRange)
}

// scanResult is what a segment scan learns.
type scanResult struct {
	validEnd            int64
	next                int64
	index               []indexEntry
	maxTimestamp        int64
	timeIndex           []timeEntry
	bytesSinceIndex     int
	bytesSinceTimeIndex int
	records             int64
	problem             string // why the scan stopped before the end, or ""
	// epochStarts, with verify: where each leader epoch above the one
	// before it starts among the segment's batches (Kafka's
	// LogSegment.recover assigns them to the leader-epoch cache).
	epochStarts []EpochEntry
}

// scanSegment walks a segment file from the start. With verify it
// validates every batch fully (CRC, records); without, only the framing,
// magic and offsets. The offsets of a log that was never compacted are
// contiguous; a compacted log (compacted) may have gaps between batches
// and batches with fewer records than their offset range, so verify then
// checks the stored-batch rules of validateStoredBatch and offsets need
// only increase. It stops at the first torn or bad batch and reports the
// valid prefix; only I/O errors are returned as errors.
func scanSegment(f File, size int64, base int64, interval int, verify, compacted bool) (scanResult, error) {
	res := scanResult{next: base, maxTimestamp: -1}
	r := &segReader{f: f, size: size, chunk: 1 << 20}
	pos := int64(0)
	for pos < size {
		fr, err := r.view(pos, BatchLengthOverhead)
		if errors.Is(err, errShort) {
			res.problem = fmt.Sprintf("torn batch framing: %d bytes", size-pos)
			break
		} else if err != nil {
			return res, err
		}
		l := int64(int32(binary.BigEndian.Uint32(fr[offBatchLength:])))
		if l < BatchHeaderSize-BatchLengthOverhead {
			res.problem = fmt.Sprintf("batchLength %d", l)
			break
		}
		if pos+BatchLengthOverhead+l > size {
			res.problem = fmt.Sprintf("torn batch: %d bytes of %d", size-pos, BatchLengthOverhead+l)
			break
		}
		b, err := r.view(pos, int(BatchLengthOverhead+l))
		if err != nil {
			return res, err
		}
		var h BatchHeader
		if verify && compacted {
			h, err = validateStoredBatch(b)
		} else if verify {
			h, err = ValidateBatchMax(b, math.MaxInt32)
		} else {
			h, err = ParseBatchHeader(b)
			if err == nil && (h.LastOffsetDelta < 0 || h.RecordCount < 0) {
				err = corruptf(0, "negative lastOffsetDelta or recordCount")
			}
		}
		if err != nil {
			res.problem = err.Error()
			break
		}
		if h.BaseOffset < res.next || (!compacted && h.BaseOffset != res.next) {
			res.problem = fmt.Sprintf("batch base offset %d, expected %d", h.BaseOffset, res.next)
			break
		}
		if h.LastOffset()-base > math.MaxInt32 || pos > math.MaxUint32 {
			res.problem = "offset or position does not fit the index"
			break
		}
		if res.bytesSinceIndex > interval {
			res.index = append(res.index, indexEntry{rel: uint32(h.LastOffset() - base), pos: uint32(pos)})
			res.bytesSinceIndex = 0
		}
		res.bytesSinceIndex += len(b)
		res.maxTimestamp = max(res.maxTimestamp, h.MaxTimestamp)
		res.timeIndex, res.bytesSinceTimeIndex = addTimeEntry(res.timeIndex, res.bytesSinceTimeIndex, len(b), interval, res.maxTimestamp, h.LastOffset())
		res.records += int64(h.RecordCount)
		if e := h.PartitionLeaderEpoch; verify && e >= 0 {
			if n := len(res.epochStarts); n == 0 || e > res.epochStarts[n-1].Epoch {
				res.epochStarts = append(res.epochStarts, EpochEntry{Epoch: e, StartOffset: h.BaseOffset})
			}
		}
		res.next = h.NextOffset()
		pos += int64(len(b))
	}
	res.validEnd = pos
	return res, nil
}

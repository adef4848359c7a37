package kafkalog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// RecordBatch v2 layout constants (see doc.go for the drawing).
const (
	// BatchHeaderSize is the size of a v2 batch header, records excluded.
	BatchHeaderSize = 61
	// BatchLengthOverhead is the size of the baseOffset and batchLength
	// fields, which batchLength does not count.
	BatchLengthOverhead = 12
	// DefaultMaxBatchBytes is Kafka's message.max.bytes default.
	DefaultMaxBatchBytes = 1048588

	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// scanHeaderSize is what a header walk needs: up to lastOffsetDelta.
	scanHeaderSize = offBaseTimestamp
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the decoded header of a RecordBatch (magic 2).
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32 // bytes after the batchLength field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the whole batch's size in bytes.
func (h BatchHeader) Size() int { return BatchLengthOverhead + int(h.BatchLength) }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset following the batch.
func (h BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the codec id in attributes bits 0-2 (0 none, 1 gzip,
// 2 snappy, 3 lz4, 4 zstd).
func (h BatchHeader) Compression() int8 { return int8(h.Attributes & 7) }

// LogAppendTime reports attributes bit 3 (timestamp type LogAppendTime).
func (h BatchHeader) LogAppendTime() bool { return h.Attributes&8 != 0 }

// Transactional reports attributes bit 4.
func (h BatchHeader) Transactional() bool { return h.Attributes&16 != 0 }

// Control reports attributes bit 5.
func (h BatchHeader) Control() bool { return h.Attributes&32 != 0 }

// ParseBatchHeader decodes the header at the start of b. It checks only
// what it must to decode: at least BatchHeaderSize bytes, magic 2 and a
// batchLength that covers the header. It does not check the CRC nor that
// b holds the whole batch. Errors are *CorruptBatchError (ErrCorruptBatch).
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, corruptf(0, "%d bytes, shorter than a batch header (%d)", len(b), BatchHeaderSize)
	}
	h := BatchHeader{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		RecordCount:          int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
	if h.Magic != 2 {
		return h, corruptf(0, "magic %d, want 2", h.Magic)
	}
	if h.BatchLength < BatchHeaderSize-BatchLengthOverhead {
		return h, corruptf(0, "batchLength %d shorter than the header", h.BatchLength)
	}
	return h, nil
}

// BatchCRC computes the CRC32C a v2 batch stores: over the bytes from
// attributes (byte 21) to the end of the batch. b must be a whole batch.
func BatchCRC(b []byte) uint32 { return crc32.Checksum(b[offAttributes:], castagnoli) }

// SetBaseOffset overwrites the batch's baseOffset. The CRC does not cover
// it, so the batch stays valid.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch overwrites the batch's partitionLeaderEpoch
// (bytes 12..15). The CRC does not cover it, so the batch stays valid.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// setMaxTimestamp overwrites the batch's maxTimestamp, which the CRC
// covers, and rewrites the CRC; it returns the new CRC.
func setMaxTimestamp(b []byte, ts int64) uint32 {
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	crc := BatchCRC(b)
	binary.BigEndian.PutUint32(b[offCRC:], crc)
	return crc
}

// ValidateBatch checks that b is exactly one valid v2 batch of at most
// DefaultMaxBatchBytes bytes and returns its header. See ValidateBatchMax.
func ValidateBatch(b []byte) (BatchHeader, error) {
	return ValidateBatchMax(b, DefaultMaxBatchBytes)
}

// ValidateBatchMax checks that b is exactly one valid v2 batch:
//   - magic 2, batchLength covering the header and equal to len(b)-12;
//   - size at most maxBytes (else an error wrapping ErrBatchTooLarge);
//   - CRC32C over attributes..end matches;
//   - compression codec 0..4;
//   - uncompressed: recordCount >= 1, the records' varint framing fills the
//     batch exactly, record i has offsetDelta i, lastOffsetDelta equals
//     recordCount-1 and no timestamp overflows;
//   - compressed (records not decoded): recordCount >= 1,
//     lastOffsetDelta >= recordCount-1.
//
// Other errors are *CorruptBatchError with Position 0.
func ValidateBatchMax(b []byte, maxBytes int) (BatchHeader, error) {
	if len(b) < offAttributes {
		_, err := ParseBatchHeader(b)
		return BatchHeader{}, err
	}
	return validateBatchCRC(b, maxBytes, BatchCRC(b))
}

// validateBatchCRC is ValidateBatchMax with the batch's CRC32C computed
// by the caller.
func validateBatchCRC(b []byte, maxBytes int, crc uint32) (BatchHeader, error) {
	h, err := validateHeaderCRC(b, maxBytes, crc)
	if err != nil || h.Compression() != CodecNone {
		return h, err
	}
	if _, err := walkRecords(b[BatchHeaderSize:], h); err != nil {
		return h, err
	}
	return h, nil
}

// validateHeaderCRC is ValidateBatchMax without the record walk, with the
// batch's CRC32C computed by the caller: the framing, size, CRC32C,
// attributes and codec (validateStructureCRC), and the header's record
// count against its lastOffsetDelta, which is what the log's offsets come
// from. It is what Kafka's follower checks of a replicated batch (the
// batch CRC and header, UnifiedLog.analyzeAndValidateRecords for
// AppendOrigin.REPLICATION): the leader walked the records when it
// appended them, and the CRC32C covers every record byte since.
func validateHeaderCRC(b []byte, maxBytes int, crc uint32) (BatchHeader, error) {
	h, err := validateStructureCRC(b, maxBytes, crc)
	if err != nil {
		return h, err
	}
	if h.RecordCount < 1 {
		return h, corruptf(0, "record count %d", h.RecordCount)
	}
	if h.LastOffsetDelta < h.RecordCount-1 {
		return h, corruptf(0, "lastOffsetDelta %d with %d records", h.LastOffsetDelta, h.RecordCount)
	}
	if h.Compression() == CodecNone && h.LastOffsetDelta != h.RecordCount-1 {
		return h, corruptf(0, "lastOffsetDelta %d, want %d for %d uncompressed records", h.LastOffsetDelta, h.RecordCount-1, h.RecordCount)
	}
	return h, nil
}

// Record layout (varints are zigzag, as encoding/binary.Varint reads
// them):
//
//	length varint | attributes int8 | timestampDelta varlong |
//	offsetDelta varint | keyLen varint | key | valueLen varint | value |
//	headerCount varint | (hKeyLen varint | hKey | hValLen varint | hVal)*

type recReader struct {
	b   []byte
	bad bool
}

func (r *recReader) varint(max int64) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 || v > max || v < -max-1 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes skips a length-prefixed field; nullable allows length -1.
func (r *recReader) bytes(nullable bool) {
	l := r.varint(math.MaxInt32)
	if r.bad {
		return
	}
	if l == -1 && nullable {
		return
	}
	if l < 0 || l > int64(len(r.b)) {
		r.bad = true
		return
	}
	r.b = r.b[l:]
}

// checkRecord checks one record's fields (b is the record after its
// length) and returns its timestamp delta, or why it is bad.
func checkRecord(b []byte, i int32, h BatchHeader) (int64, string) {
	if len(b) < 1 {
		return 0, "empty"
	}
	r := recReader{b: b[1:]} // attributes byte is unused in v2
	tsDelta := r.varint(math.MaxInt64)
	offDelta := r.varint(math.MaxInt32)
	if r.bad {
		return 0, "bad timestamp or offset delta"
	}
	if offDelta != int64(i) {
		return 0, fmt.Sprintf("offsetDelta %d, want %d", offDelta, i)
	}
	if (tsDelta > 0 && h.BaseTimestamp > math.MaxInt64-tsDelta) ||
		(tsDelta < 0 && h.BaseTimestamp < math.MinInt64-tsDelta) {
		return 0, "timestamp overflows"
	}
	r.bytes(true) // key
	r.bytes(true) // value
	nh := r.varint(math.MaxInt32)
	if r.bad || nh < 0 {
		return 0, "bad key, value or header count"
	}
	for j := int64(0); j < nh && !r.bad; j++ {
		r.bytes(false)
		r.bytes(true)
	}
	if r.bad {
		return 0, "bad header"
	}
	if len(r.b) != 0 {
		return 0, fmt.Sprintf("%d trailing bytes", len(r.b))
	}
	return tsDelta, ""
}

// SplitBatches walks b, a concatenation of whole batches, validating each
// as ValidateBatch does but of any size (stored batches are as large as
// their topic's max.message.bytes allowed), and calling fn with its header and bytes (a sub-slice
// of b). A torn or corrupt batch stops the walk with a *CorruptBatchError
// whose Position is the batch's offset within b; an error from fn is
// returned as is.
func SplitBatches(b []byte, fn func(h BatchHeader, batch []byte) error) error {
	return splitBatches(b, math.MaxInt32, fn)
}

// WalkHeaders walks b like SplitBatches but parses only each batch's
// header, without checking CRCs or records: for bytes that were just
// validated (after a successful append), not for bytes from outside.
func WalkHeaders(b []byte, fn func(h BatchHeader) error) error {
	pos := 0
	for pos < len(b) {
		size, err := frameSize(b[pos:], int64(pos))
		if err != nil {
			return err
		}
		h, err := ParseBatchHeader(b[pos : pos+size])
		if err != nil {
			return atPosition(err, int64(pos))
		}
		if err := fn(h); err != nil {
			return err
		}
		pos += size
	}
	return nil
}

func splitBatches(b []byte, maxBytes int, fn func(h BatchHeader, batch []byte) error) error {
	pos := 0
	for pos < len(b) {
		size, err := frameSize(b[pos:], int64(pos))
		if err != nil {
			return err
		}
		batch := b[pos : pos+size]
		h, err := ValidateBatchMax(batch, maxBytes)
		if err != nil {
			return atPosition(err, int64(pos))
		}
		if err := fn(h, batch); err != nil {
			return err
		}
		pos += size
	}
	return nil
}

// splitVerifiedBatches is splitBatches for batches ValidateBatchesCRC32C
// passed: framing and header parse only, no CRC (the caller's pass
// computed it).
func splitVerifiedBatches(b []byte, _ int, fn func(h BatchHeader, batch []byte) error) error {
	for pos := 0; pos < len(b); {
		size, err := frameSize(b[pos:], int64(pos))
		if err != nil {
			return err
		}
		h, err := ParseBatchHeader(b[pos : pos+size])
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

// frameSize reads the batch framing at the start of b and reports the
// batch's size, or a torn-batch error if b does not hold all of it.
func frameSize(b []byte, pos int64) (int, error) {
	if len(b) < BatchLengthOverhead {
		return 0, corruptf(pos, "torn: %d bytes left, shorter than the batch framing", len(b))
	}
	l := int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	if l < BatchHeaderSize-BatchLengthOverhead {
		return 0, corruptf(pos, "batchLength %d shorter than the header", l)
	}
	size := int(l) + BatchLengthOverhead
	if size > len(b) {
		return 0, corruptf(pos, "torn: batch of %d bytes, %d left", size, len(b))
	}
	return size, nil
}

func atPosition(err error, pos int64) error {
	if ce, ok := err.(*CorruptBatchError); ok {
		return &CorruptBatchError{Position: ce.Position + pos, Reason: ce.Reason}
	}
	return fmt.Errorf("batch at position %d: %w", pos, err)
}

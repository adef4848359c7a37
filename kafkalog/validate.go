package kafkalog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultMaxUncompressedBatchBytes bounds what one compressed batch may
// decompress to on the produce path (kwal.batch.max.uncompressed.bytes).
const DefaultMaxUncompressedBatchBytes = 64 << 20

// maxZstdWindow bounds the history a zstd frame may ask the decoder to
// keep, which the decoder allocates up front: a few bytes of frame header
// must not cost more. zstd's levels up to 19 use at most 8 MiB, the
// window the format asks every decoder to support; a single-segment frame
// (franz-go's) asks for its content size, so it covers batches up to
// 8 MiB uncompressed.
const maxZstdWindow = 8 << 20

// maxSnappyRatio bounds what a snappy block may claim to decode to per
// byte: its longest copy (64 bytes) takes 2-3 bytes, so a claim past ~32x
// is a lie, refused before the output is allocated.
const maxSnappyRatio = 32

// Compression codec ids (attributes bits 0-2).
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// xerialMagic starts snappy data framed the way Kafka's Java client
// writes it (xerial SnappyOutputStream): magic, int32 version, int32
// compatible version, then chunks of int32 length + raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// BatchValidator checks batches a client produced as Kafka's leader does
// (LogValidator with origin CLIENT): the structure and CRC (as
// ValidateBatchMax), then Kafka's batch rules (recordCount >= 1 and equal to
// lastOffsetDelta+1, no control batch, a producer id comes with a sequence)
// and then every record, compressed or not: decompressed with a bound on
// the decompressed size, each record's varint framing, offsetDelta i for
// record i, timestamps that do not overflow, exactly recordCount records
// and nothing after them.
//
// Errors: *CorruptBatchError (ErrCorruptBatch) for bytes that do not
// decode (CRC, framing, a compressed stream that does not decompress or
// decompresses to more than the bound, fewer or more records than the
// header says, and on a compressed batch a lastOffsetDelta that disagrees
// with the record count); *InvalidRecordError (ErrInvalidRecord) for
// Kafka's other batch rules; ErrInvalidTimestamp for a batch claiming LogAppendTime;
// ErrBatchTooLarge. Kafka answers these CORRUPT_MESSAGE, INVALID_RECORD,
// INVALID_TIMESTAMP and MESSAGE_TOO_LARGE.
//
// A BatchValidator is safe for concurrent use: it keeps decompressors for
// reuse in a pool, so concurrent validations each hold their own.
type BatchValidator struct {
	maxBatchBytes   int
	maxUncompressed int64
	pool            sync.Pool // *decompressState
}

// NewBatchValidator returns a validator refusing batches over maxBatchBytes
// and compressed batches that decompress to more than maxUncompressed
// bytes. Zero takes DefaultMaxBatchBytes and
// DefaultMaxUncompressedBatchBytes.
func NewBatchValidator(maxBatchBytes int, maxUncompressed int64) *BatchValidator {
	if maxBatchBytes <= 0 {
		maxBatchBytes = DefaultMaxBatchBytes
	}
	if maxUncompressed <= 0 {
		maxUncompressed = DefaultMaxUncompressedBatchBytes
	}
	return &BatchValidator{maxBatchBytes: maxBatchBytes, maxUncompressed: maxUncompressed}
}

// ValidBatch is one batch that BatchValidator.Validate accepted; only it
// makes them, so Log.AppendValidatedAsLeader need not look again.
type ValidBatch struct {
	header BatchHeader
	bytes  []byte
	// maxTimestamp is the largest record timestamp (base + largest
	// delta). Kafka's leader sets the header's maxTimestamp from the
	// records; the append does the same when they differ.
	maxTimestamp int64
}

// Header is the batch's header as the client sent it.
func (v ValidBatch) Header() BatchHeader { return v.header }

// Bytes are the batch as the client sent it (not copied).
func (v ValidBatch) Bytes() []byte { return v.bytes }

// MaxTimestamp is the largest timestamp among the batch's records, which
// the appended batch carries in its header (for CreateTime batches).
func (v ValidBatch) MaxTimestamp() int64 { return v.maxTimestamp }

// Validate checks that b is exactly one batch a client may write. See
// BatchValidator for what is checked and the errors.
func (v *BatchValidator) Validate(b []byte) (ValidBatch, error) {
	h, err := validateStructure(b, v.maxBatchBytes)
	if err != nil {
		return ValidBatch{}, err
	}
	if err := checkClientRules(h); err != nil {
		return ValidBatch{}, err
	}
	var maxDelta int64
	if h.Compression() == CodecNone {
		maxDelta, err = walkRecords(b[BatchHeaderSize:], h)
	} else {
		maxDelta, err = v.walkCompressed(b[BatchHeaderSize:], h)
	}
	if err != nil {
		return ValidBatch{}, err
	}
	return ValidBatch{header: h, bytes: b, maxTimestamp: h.BaseTimestamp + maxDelta}, nil
}

// validateStructure is what every batch must pass: framing, size, CRC,
// attributes, codec.
func validateStructure(b []byte, maxBytes int) (BatchHeader, error) {
	if len(b) < offAttributes {
		_, err := ParseBatchHeader(b)
		return BatchHeader{}, err
	}
	return validateStructureCRC(b, maxBytes, BatchCRC(b))
}

// validateStructureCRC is validateStructure with the CRC32C of
// b[offAttributes:] computed by the caller.
func validateStructureCRC(b []byte, maxBytes int, crc uint32) (BatchHeader, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, corruptf(0, "batch length says %d bytes, have %d", h.Size(), len(b))
	}
	if len(b) > maxBytes {
		return h, fmt.Errorf("%w: %d bytes, max %d", ErrBatchTooLarge, len(b), maxBytes)
	}
	if got := crc; got != h.CRC {
		return h, corruptf(0, "crc32c %#08x, header says %#08x", got, h.CRC)
	}
	if h.Attributes&^0x3f != 0 {
		return h, corruptf(0, "unknown attribute bits %#04x", h.Attributes)
	}
	if c := h.Compression(); c > CodecZstd {
		return h, corruptf(0, "unknown compression codec %d", c)
	}
	return h, nil
}

// checkClientRules are the header rules of Kafka's LogValidator.validateBatch
// for a client's batch.
//
// An offset range that disagrees with the record count is INVALID_RECORD
// on an uncompressed batch, as Kafka answers, and CORRUPT_MESSAGE on a
// compressed one: there the header is all a reader sees without
// decompressing, so a header that disagrees with the records inside is
// the same fault as a record count the stream does not hold (issue 15
// asks one answer, CORRUPT_MESSAGE, for every corrupt compressed batch).
func checkClientRules(h BatchHeader) error {
	if reason := offsetRangeProblem(h); reason != "" {
		if h.Compression() != CodecNone {
			return corruptf(0, "%s batch: %s", codecName(h.Compression()), reason)
		}
		return invalidf("%s", reason)
	}
	switch {
	case h.Control():
		return invalidf("clients may not write control batches")
	case h.ProducerID >= 0 && h.BaseSequence < 0:
		return invalidf("producer id %d with invalid sequence %d", h.ProducerID, h.BaseSequence)
	case h.LogAppendTime():
		// Kafka's validateTimestamp: only the broker sets LogAppendTime.
		return fmt.Errorf("%w: the batch says LogAppendTime; a producer may not set it", ErrInvalidTimestamp)
	}
	return nil
}

// offsetRangeProblem says what is wrong with the header's record count
// and lastOffsetDelta together, or "".
func offsetRangeProblem(h BatchHeader) string {
	switch {
	case h.RecordCount <= 0:
		return fmt.Sprintf("invalid reported record count %d", h.RecordCount)
	case h.LastOffsetDelta < 0:
		return fmt.Sprintf("invalid offset range: lastOffsetDelta %d", h.LastOffsetDelta)
	case int64(h.LastOffsetDelta)+1 != int64(h.RecordCount):
		return fmt.Sprintf("inconsistent offset range [0, %d] and record count %d", h.LastOffsetDelta, h.RecordCount)
	}
	return ""
}

// walkRecords checks uncompressed records and returns the largest
// timestamp delta.
func walkRecords(recs []byte, h BatchHeader) (int64, error) {
	pos := int64(BatchHeaderSize)
	var maxDelta int64
	for i := int32(0); i < h.RecordCount; i++ {
		length, n := binary.Varint(recs)
		if n <= 0 || length < 0 || length > int64(len(recs)-n) {
			return 0, corruptf(pos, "record %d of %d: bad length", i, h.RecordCount)
		}
		tsDelta, reason := checkRecord(recs[n:n+int(length)], i, h)
		if reason != "" {
			return 0, corruptf(pos, "record %d: %s", i, reason)
		}
		if i == 0 || tsDelta > maxDelta {
			maxDelta = tsDelta
		}
		recs = recs[n+int(length):]
		pos += int64(n) + length
	}
	if len(recs) != 0 {
		return 0, corruptf(pos, "%d bytes after the last of %d records", len(recs), h.RecordCount)
	}
	return maxDelta, nil
}

// decompressState is one validation's reusable decompressors and buffers.
type decompressState struct {
	src    bytes.Reader
	plain  bytes.Reader
	gz     *gzip.Reader
	zs     *zstd.Decoder
	lz     *lz4.Reader
	lim    io.LimitedReader
	br     *bufio.Reader
	recLim io.LimitedReader
	rec    bytes.Buffer
	snappy []byte
}

// retainedDecompressBuffer is the largest record or snappy buffer a pooled
// state keeps.
const retainedDecompressBuffer = 1 << 20

func (v *BatchValidator) getState() *decompressState {
	if st, ok := v.pool.Get().(*decompressState); ok {
		return st
	}
	return &decompressState{br: bufio.NewReaderSize(nil, 32<<10)}
}

func (v *BatchValidator) putState(st *decompressState) {
	if st.rec.Cap() > retainedDecompressBuffer {
		st.rec = bytes.Buffer{}
	}
	if cap(st.snappy) > retainedDecompressBuffer {
		st.snappy = nil
	}
	st.src.Reset(nil)
	st.plain.Reset(nil)
	st.br.Reset(nil)
	st.lim.R = nil
	v.pool.Put(st)
}

// walkCompressed decompresses the records section as a stream and checks
// each record, holding one record at a time (snappy blocks are decoded
// whole, within the bound).
func (v *BatchValidator) walkCompressed(data []byte, h BatchHeader) (int64, error) {
	st := v.getState()
	defer v.putState(st)
	st.src.Reset(data)
	var r io.Reader
	var err error
	switch h.Compression() {
	case CodecGzip:
		if st.gz == nil {
			st.gz, err = gzip.NewReader(&st.src)
		} else {
			err = st.gz.Reset(&st.src)
		}
		r = st.gz
	case CodecSnappy:
		st.snappy, err = decodeSnappy(st.snappy[:0], data, v.maxUncompressed)
		st.plain.Reset(st.snappy)
		r = &st.plain
	case CodecLZ4:
		if st.lz == nil {
			st.lz = lz4.NewReader(&st.src)
		} else {
			st.lz.Reset(&st.src)
		}
		r = st.lz
	case CodecZstd:
		if st.zs == nil {
			st.zs, err = zstd.NewReader(&st.src,
				zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxWindow(maxZstdWindow))
		} else {
			err = st.zs.Reset(&st.src)
		}
		r = st.zs
	}
	if err != nil {
		return 0, corruptf(BatchHeaderSize, "%s records: %v", codecName(h.Compression()), err)
	}
	st.lim = io.LimitedReader{R: r, N: v.maxUncompressed + 1}
	st.br.Reset(&st.lim)
	fail := func(i int32, what string, err error) (int64, error) {
		if st.lim.N <= 0 {
			return 0, corruptf(BatchHeaderSize, "%s records decompress to more than %d bytes", codecName(h.Compression()), v.maxUncompressed)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, corruptf(BatchHeaderSize, "%s records: %s: only %d of %d records", codecName(h.Compression()), what, i, h.RecordCount)
		}
		return 0, corruptf(BatchHeaderSize, "%s records: record %d: %s: %v", codecName(h.Compression()), i, what, err)
	}
	var maxDelta int64
	for i := int32(0); i < h.RecordCount; i++ {
		length, err := binary.ReadVarint(st.br)
		if err != nil {
			return fail(i, "record length", err)
		}
		if length < 0 || length > v.maxUncompressed {
			return 0, corruptf(BatchHeaderSize, "%s records: record %d: bad length %d", codecName(h.Compression()), i, length)
		}
		// The buffer grows with the bytes that arrive, not with the
		// length claimed: a small batch cannot make it allocate much.
		st.rec.Reset()
		st.recLim = io.LimitedReader{R: st.br, N: length}
		if n, err := st.rec.ReadFrom(&st.recLim); err != nil || n != length {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fail(i, "record body", err)
		}
		rec := st.rec.Bytes()
		tsDelta, reason := checkRecord(rec, i, h)
		if reason != "" {
			return 0, corruptf(BatchHeaderSize, "%s records: record %d: %s", codecName(h.Compression()), i, reason)
		}
		if i == 0 || tsDelta > maxDelta {
			maxDelta = tsDelta
		}
	}
	// Reading to the end also makes gzip, lz4 and zstd verify their
	// checksums.
	switch _, err := st.br.ReadByte(); {
	case err == nil:
		if st.lim.N <= 0 {
			return fail(h.RecordCount, "", nil)
		}
		return 0, corruptf(BatchHeaderSize, "%s records: bytes after the last of %d records", codecName(h.Compression()), h.RecordCount)
	case !errors.Is(err, io.EOF):
		return fail(h.RecordCount, "after the last record", err)
	}
	return maxDelta, nil
}

// decodeSnappy decodes Kafka's snappy: xerial-framed chunks or one raw
// block, refusing more than limit bytes before decoding.
func decodeSnappy(dst, src []byte, limit int64) ([]byte, error) {
	block := func(dst, b []byte) ([]byte, error) {
		n, err := s2.DecodedLen(b)
		if err != nil {
			return dst, err
		}
		if int64(n) > int64(len(b))*maxSnappyRatio+64 {
			return dst, fmt.Errorf("a %d byte block claims %d bytes, more than snappy can encode", len(b), n)
		}
		if int64(len(dst))+int64(n) > limit {
			return dst, fmt.Errorf("decompresses to more than %d bytes", limit)
		}
		start := len(dst)
		dst = slices.Grow(dst, n)[:start+n]
		if _, err := s2.Decode(dst[start:], b); err != nil {
			return dst, err
		}
		return dst, nil
	}
	if !bytes.HasPrefix(src, xerialMagic) {
		return block(dst, src)
	}
	if len(src) < len(xerialMagic)+8 {
		return dst, errors.New("short xerial header")
	}
	src = src[len(xerialMagic)+8:]
	for len(src) > 0 {
		if len(src) < 4 {
			return dst, errors.New("torn xerial chunk length")
		}
		n := binary.BigEndian.Uint32(src)
		if uint64(n) > uint64(len(src)-4) {
			return dst, fmt.Errorf("xerial chunk of %d bytes, %d left", n, len(src)-4)
		}
		var err error
		if dst, err = block(dst, src[4:4+n]); err != nil {
			return dst, err
		}
		src = src[4+n:]
	}
	return dst, nil
}

func codecName(c int8) string {
	switch c {
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return "uncompressed"
}

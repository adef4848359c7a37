package objformat

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/klauspost/compress/zstd"

	"github.com/kwal/kwal/metadata"
)

// Layout constants; doc.go draws them.
const (
	Version        = 1
	HeaderSize     = 8
	TrailerSize    = 16
	footerCountLen = 4
	// EntryFixedSize is an entry's size without its topic name.
	EntryFixedSize = 2 + 4 + 4 + 8*5 + 1 + 4
	// MaxTopicLen is Kafka's limit on a topic name.
	MaxTopicLen = 249
	// MaxRawLength bounds a slice's decoded size, so a forged footer cannot
	// make a reader allocate without limit.
	MaxRawLength = 256 << 20
	// MaxFooterLen bounds the footer a reader is willing to fetch.
	MaxFooterLen = 64 << 20
)

var (
	headerMagic  = [4]byte{'K', 'W', 'A', 'L'}
	trailerMagic = [4]byte{'L', 'A', 'W', 'K'}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

// Errors.
var (
	// ErrCorruptObject: the object's bytes fail a bounds or checksum check.
	// Always wrapped with the detail.
	ErrCorruptObject = errors.New("objformat: corrupt combined object")
	// ErrInvalidInput: Encode was given slices it cannot encode (empty data,
	// bad offsets, a topic name too long, an unknown codec).
	ErrInvalidInput = errors.New("objformat: invalid input")
)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptObject, fmt.Sprintf(format, args...))
}

// CRC32C is the Castagnoli checksum the format uses.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// EntrySize is the footer bytes one entry for topic takes.
func EntrySize(topic string) int { return EntryFixedSize + len(topic) }

// FixedOverhead is the bytes every object has whatever its entries:
// header, footer count and trailer.
const FixedOverhead = HeaderSize + footerCountLen + TrailerSize

// Overhead is the bytes an object of n entries adds around its slice bytes,
// not counting the entries' topic names: header, footer count, fixed entry
// parts and trailer.
func Overhead(n int) int { return FixedOverhead + n*EntryFixedSize }

// Input is one slice to encode: whole RecordBatch v2 batches of one
// partition and one leader epoch, offsets [BaseOffset, LastOffset].
type Input struct {
	metadata.TopicPartition
	LeaderEpoch int32
	BaseOffset  int64
	LastOffset  int64
	Data        []byte
}

// Encoder encodes objects, reusing a zstd encoder between calls. The zero
// value is ready to use; it is not safe for concurrent use.
type Encoder struct {
	zenc *zstd.Encoder
	// Each partition's last offset so far in the object being encoded, for
	// the offset-order check: index maps a partition to its slot in last,
	// and a slot counts only if its gen is this call's. Both outlive a call,
	// so a steady stream of objects over the same partitions costs one map
	// lookup per slice and no allocation.
	index map[metadata.TopicPartition]int32
	last  []lastOffset
	gen   uint64
}

type lastOffset struct {
	gen    uint64
	offset int64
}

// maxIndexed bounds the partitions an Encoder remembers between calls.
const maxIndexed = 1 << 14

// checkOrder records s as the latest slice of its partition in this call and
// reports whether it starts after the partition's previous slice.
func (e *Encoder) checkOrder(s *Input) (prev int64, ok bool) {
	i, found := e.index[s.TopicPartition]
	if !found {
		i = int32(len(e.last))
		e.index[s.TopicPartition] = i
		e.last = append(e.last, lastOffset{})
	}
	l := &e.last[i]
	if l.gen == e.gen && s.BaseOffset <= l.offset {
		return l.offset, false
	}
	*l = lastOffset{gen: e.gen, offset: s.LastOffset}
	return 0, true
}

// Close releases the zstd encoder, if one was made.
func (e *Encoder) Close() {
	if e.zenc != nil {
		_ = e.zenc.Close()
		e.zenc = nil
	}
}

// Encode returns a new object holding in, in order, and its footer entries.
// It returns ErrInvalidInput for input it refuses.
func Encode(in []Input, codec metadata.Codec) ([]byte, []metadata.SliceEntry, error) {
	var e Encoder
	defer e.Close()
	return e.Append(nil, in, codec)
}

// Append encodes an object of in, appending it to dst[:0]'s backing array
// when it has room (dst is reused, its contents overwritten). The entries
// are newly allocated and belong to the caller.
func (e *Encoder) Append(dst []byte, in []Input, codec metadata.Codec) ([]byte, []metadata.SliceEntry, error) {
	if len(in) == 0 {
		return nil, nil, fmt.Errorf("%w: no slices", ErrInvalidInput)
	}
	if codec != metadata.CodecNone && codec != metadata.CodecZstd {
		return nil, nil, fmt.Errorf("%w: codec %v", ErrInvalidInput, codec)
	}
	size := Overhead(len(in))
	if e.index == nil || len(e.index)+len(in) > maxIndexed {
		e.index = make(map[metadata.TopicPartition]int32, len(in))
		e.last = e.last[:0]
	}
	e.gen++
	for i := range in {
		s := &in[i]
		switch {
		case len(s.Data) == 0:
			return nil, nil, fmt.Errorf("%w: slice %d of %v is empty", ErrInvalidInput, i, s.TopicPartition)
		case len(s.Topic) == 0 || len(s.Topic) > MaxTopicLen:
			return nil, nil, fmt.Errorf("%w: slice %d: topic name length %d", ErrInvalidInput, i, len(s.Topic))
		case s.Partition < 0 || s.LeaderEpoch < 0 || s.BaseOffset < 0 || s.LastOffset < s.BaseOffset:
			return nil, nil, fmt.Errorf("%w: slice %d of %v: partition %d epoch %d offsets [%d, %d]",
				ErrInvalidInput, i, s.TopicPartition, s.Partition, s.LeaderEpoch, s.BaseOffset, s.LastOffset)
		case len(s.Data) > MaxRawLength:
			return nil, nil, fmt.Errorf("%w: slice %d of %v: %d bytes > %d", ErrInvalidInput, i, s.TopicPartition, len(s.Data), MaxRawLength)
		}
		if prev, ok := e.checkOrder(s); !ok {
			return nil, nil, fmt.Errorf("%w: slice %d of %v: base offset %d not after %d",
				ErrInvalidInput, i, s.TopicPartition, s.BaseOffset, prev)
		}
		size += len(s.Topic) + len(s.Data)
	}
	if codec == metadata.CodecZstd && e.zenc == nil {
		z, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, nil, fmt.Errorf("objformat: zstd encoder: %w", err)
		}
		e.zenc = z
	}

	buf := dst[:0]
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	buf = append(buf, headerMagic[:]...)
	buf = binary.BigEndian.AppendUint16(buf, Version)
	buf = binary.BigEndian.AppendUint16(buf, 0)

	entries := make([]metadata.SliceEntry, len(in))
	for i := range in {
		s := &in[i]
		pos := len(buf)
		if codec == metadata.CodecZstd {
			buf = e.zenc.EncodeAll(s.Data, buf)
		} else {
			buf = append(buf, s.Data...)
		}
		stored := buf[pos:]
		entries[i] = metadata.SliceEntry{
			TopicPartition: s.TopicPartition,
			LeaderEpoch:    s.LeaderEpoch,
			BaseOffset:     s.BaseOffset,
			LastOffset:     s.LastOffset,
			Position:       int64(pos),
			Length:         int64(len(stored)),
			RawLength:      int64(len(s.Data)),
			Codec:          codec,
			CRC32C:         CRC32C(stored),
		}
	}

	footerStart := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(entries)))
	for i := range entries {
		buf = appendEntry(buf, &entries[i])
	}
	footer := buf[footerStart:]
	if len(footer) > MaxFooterLen {
		return nil, nil, fmt.Errorf("%w: footer of %d bytes > %d", ErrInvalidInput, len(footer), MaxFooterLen)
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(footer)))
	buf = binary.BigEndian.AppendUint32(buf, CRC32C(footer))
	buf = binary.BigEndian.AppendUint16(buf, Version)
	buf = binary.BigEndian.AppendUint16(buf, 0)
	buf = append(buf, trailerMagic[:]...)
	return buf, entries, nil
}

func appendEntry(b []byte, e *metadata.SliceEntry) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.Topic)))
	b = append(b, e.Topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(e.Partition))
	b = binary.BigEndian.AppendUint32(b, uint32(e.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(e.BaseOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(e.Position))
	b = binary.BigEndian.AppendUint64(b, uint64(e.Length))
	b = binary.BigEndian.AppendUint64(b, uint64(e.RawLength))
	b = append(b, byte(e.Codec))
	b = binary.BigEndian.AppendUint32(b, e.CRC32C)
	return b
}

// Trailer is the decoded fixed-size end of an object.
type Trailer struct {
	FooterLen uint32
	FooterCRC uint32
}

// ParseTrailer decodes the last TrailerSize bytes of an object.
func ParseTrailer(t []byte) (Trailer, error) {
	if len(t) != TrailerSize {
		return Trailer{}, corrupt("trailer is %d bytes, want %d", len(t), TrailerSize)
	}
	if !bytes.Equal(t[12:16], trailerMagic[:]) {
		return Trailer{}, corrupt("trailer magic %q", t[12:16])
	}
	if v := binary.BigEndian.Uint16(t[8:]); v != Version {
		return Trailer{}, corrupt("trailer version %d, this reader knows %d", v, Version)
	}
	if f := binary.BigEndian.Uint16(t[10:]); f != 0 {
		return Trailer{}, corrupt("trailer flags %#x", f)
	}
	tr := Trailer{FooterLen: binary.BigEndian.Uint32(t[0:]), FooterCRC: binary.BigEndian.Uint32(t[4:])}
	if tr.FooterLen < footerCountLen+EntryFixedSize+1 || tr.FooterLen > MaxFooterLen {
		return Trailer{}, corrupt("footer length %d out of range", tr.FooterLen)
	}
	return tr, nil
}

// DecodeFooter checks a whole object's header, trailer and footer and
// returns its entries. It does not check the slices' CRCs; ReadSlice does,
// per slice, when they are read.
func DecodeFooter(obj []byte) ([]metadata.SliceEntry, error) {
	if len(obj) < HeaderSize+TrailerSize {
		return nil, corrupt("object of %d bytes is shorter than header and trailer", len(obj))
	}
	if err := checkHeader(obj[:HeaderSize]); err != nil {
		return nil, err
	}
	tr, err := ParseTrailer(obj[len(obj)-TrailerSize:])
	if err != nil {
		return nil, err
	}
	if int64(tr.FooterLen) > int64(len(obj)-HeaderSize-TrailerSize) {
		return nil, corrupt("footer length %d exceeds object of %d bytes", tr.FooterLen, len(obj))
	}
	footerStart := len(obj) - TrailerSize - int(tr.FooterLen)
	entries, err := decodeFooterBytes(obj[footerStart:len(obj)-TrailerSize], tr)
	if err != nil {
		return nil, err
	}
	if end := entries[len(entries)-1].Position + entries[len(entries)-1].Length; end != int64(footerStart) {
		return nil, corrupt("slices end at %d but the footer starts at %d", end, footerStart)
	}
	return entries, nil
}

func checkHeader(h []byte) error {
	if !bytes.Equal(h[:4], headerMagic[:]) {
		return corrupt("header magic %q", h[:4])
	}
	if v := binary.BigEndian.Uint16(h[4:]); v != Version {
		return corrupt("header version %d, this reader knows %d", v, Version)
	}
	if f := binary.BigEndian.Uint16(h[6:]); f != 0 {
		return corrupt("header flags %#x", f)
	}
	return nil
}

// decodeFooterBytes decodes and bounds-checks the footer. The slices it
// describes must tile [HeaderSize, footer start) exactly; the caller checks
// the end against the object it has.
func decodeFooterBytes(f []byte, tr Trailer) ([]metadata.SliceEntry, error) {
	if len(f) != int(tr.FooterLen) {
		return nil, corrupt("footer is %d bytes, trailer says %d", len(f), tr.FooterLen)
	}
	if got := CRC32C(f); got != tr.FooterCRC {
		return nil, corrupt("footer CRC32C %#08x, trailer says %#08x", got, tr.FooterCRC)
	}
	count := binary.BigEndian.Uint32(f)
	if count == 0 || uint64(count)*(EntryFixedSize+1) > uint64(len(f)-footerCountLen) {
		return nil, corrupt("footer claims %d entries in %d bytes", count, len(f))
	}
	entries := make([]metadata.SliceEntry, 0, count)
	last := make(map[metadata.TopicPartition]int64, 0)
	next := int64(HeaderSize)
	p := f[footerCountLen:]
	for i := 0; i < int(count); i++ {
		if len(p) < 2 {
			return nil, corrupt("entry %d: footer ends early", i)
		}
		tl := int(binary.BigEndian.Uint16(p))
		if tl == 0 || tl > MaxTopicLen {
			return nil, corrupt("entry %d: topic name length %d", i, tl)
		}
		if len(p) < EntryFixedSize+tl {
			return nil, corrupt("entry %d: footer ends early", i)
		}
		q := p[2+tl:]
		e := metadata.SliceEntry{
			TopicPartition: metadata.TopicPartition{Topic: string(p[2 : 2+tl]), Partition: int32(binary.BigEndian.Uint32(q))},
			LeaderEpoch:    int32(binary.BigEndian.Uint32(q[4:])),
			BaseOffset:     int64(binary.BigEndian.Uint64(q[8:])),
			LastOffset:     int64(binary.BigEndian.Uint64(q[16:])),
			Position:       int64(binary.BigEndian.Uint64(q[24:])),
			Length:         int64(binary.BigEndian.Uint64(q[32:])),
			RawLength:      int64(binary.BigEndian.Uint64(q[40:])),
			Codec:          metadata.Codec(q[48]),
			CRC32C:         binary.BigEndian.Uint32(q[49:]),
		}
		p = q[EntryFixedSize-2:]
		if err := checkEntry(i, &e, next); err != nil {
			return nil, err
		}
		if prev, ok := last[e.TopicPartition]; ok && e.BaseOffset <= prev {
			return nil, corrupt("entry %d of %v: base offset %d not after %d", i, e.TopicPartition, e.BaseOffset, prev)
		}
		last[e.TopicPartition] = e.LastOffset
		next = e.Position + e.Length
		entries = append(entries, e)
	}
	if len(p) != 0 {
		return nil, corrupt("%d bytes after the last footer entry", len(p))
	}
	return entries, nil
}

func checkEntry(i int, e *metadata.SliceEntry, wantPos int64) error {
	switch {
	case e.Partition < 0 || e.LeaderEpoch < 0:
		return corrupt("entry %d: partition %d, leader epoch %d", i, e.Partition, e.LeaderEpoch)
	case e.BaseOffset < 0 || e.LastOffset < e.BaseOffset:
		return corrupt("entry %d of %v: offsets [%d, %d]", i, e.TopicPartition, e.BaseOffset, e.LastOffset)
	case e.Position != wantPos:
		return corrupt("entry %d of %v: position %d, want %d (slices must be back to back)", i, e.TopicPartition, e.Position, wantPos)
	case e.Length <= 0 || e.Length > math.MaxInt64-e.Position || e.Length > MaxRawLength:
		return corrupt("entry %d of %v: length %d", i, e.TopicPartition, e.Length)
	}
	switch e.Codec {
	case metadata.CodecNone:
		if e.RawLength != e.Length {
			return corrupt("entry %d of %v: raw length %d != length %d for codec none", i, e.TopicPartition, e.RawLength, e.Length)
		}
	case metadata.CodecZstd:
		if e.RawLength <= 0 || e.RawLength > MaxRawLength {
			return corrupt("entry %d of %v: raw length %d", i, e.TopicPartition, e.RawLength)
		}
	default:
		return corrupt("entry %d of %v: unknown codec %d", i, e.TopicPartition, e.Codec)
	}
	return nil
}

// RangeReader is the read this package needs from object storage; it has
// objstore.Store's GetRange semantics (off < 0 reads the last -off bytes).
type RangeReader interface {
	GetRange(ctx context.Context, key string, off, length int64) ([]byte, error)
}

// ReadFooter reads an object's footer from its tail with two suffix range
// GETs (trailer, then footer and trailer) and returns the entries and the
// object size they imply. Errors from r are returned wrapped; bad bytes give
// ErrCorruptObject. A truncated body is not detected here (no slice bytes
// are read); ReadSlice's CRC check catches it.
func ReadFooter(ctx context.Context, r RangeReader, key string) ([]metadata.SliceEntry, int64, error) {
	t, err := r.GetRange(ctx, key, -TrailerSize, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("objformat: read trailer of %s: %w", key, err)
	}
	tr, err := ParseTrailer(t)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", key, err)
	}
	want := int64(tr.FooterLen) + TrailerSize
	ft, err := r.GetRange(ctx, key, -want, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("objformat: read footer of %s: %w", key, err)
	}
	if int64(len(ft)) != want {
		return nil, 0, fmt.Errorf("%s: %w", key, corrupt("footer read returned %d bytes, want %d", len(ft), want))
	}
	if !bytes.Equal(ft[len(ft)-TrailerSize:], t) {
		return nil, 0, fmt.Errorf("%s: %w", key, corrupt("trailer changed between reads"))
	}
	entries, err := decodeFooterBytes(ft[:tr.FooterLen], tr)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", key, err)
	}
	last := entries[len(entries)-1]
	return entries, last.Position + last.Length + want, nil
}

// SliceReader checks and decodes stored slices, reusing one zstd decoder.
// The zero value is ready; it is not safe for concurrent use.
type SliceReader struct {
	zdec *zstd.Decoder
}

// Close releases the zstd decoder, if one was made.
func (r *SliceReader) Close() {
	if r.zdec != nil {
		r.zdec.Close()
		r.zdec = nil
	}
}

// ReadSlice checks stored (the Length bytes at e.Position) against e and
// returns the raw log bytes. See SliceReader.Read.
func ReadSlice(stored []byte, e metadata.SliceEntry) ([]byte, error) {
	var r SliceReader
	defer r.Close()
	return r.Read(stored, e)
}

// Read checks stored against e's length and CRC32C and returns the raw log
// bytes: stored itself for codec none, a new buffer for zstd. A zstd frame
// is decoded into at most e.RawLength bytes, and a frame that would produce
// more or fewer is refused, so a forged entry cannot be a decompression
// bomb. Every failure is ErrCorruptObject.
func (r *SliceReader) Read(stored []byte, e metadata.SliceEntry) ([]byte, error) {
	if int64(len(stored)) != e.Length {
		return nil, corrupt("slice of %v at %d: have %d bytes, entry says %d", e.TopicPartition, e.Position, len(stored), e.Length)
	}
	if got := CRC32C(stored); got != e.CRC32C {
		return nil, corrupt("slice of %v at %d: CRC32C %#08x, entry says %#08x", e.TopicPartition, e.Position, got, e.CRC32C)
	}
	switch e.Codec {
	case metadata.CodecNone:
		if e.RawLength != e.Length {
			return nil, corrupt("slice of %v at %d: raw length %d != length %d", e.TopicPartition, e.Position, e.RawLength, e.Length)
		}
		return stored, nil
	case metadata.CodecZstd:
	default:
		return nil, corrupt("slice of %v at %d: unknown codec %d", e.TopicPartition, e.Position, e.Codec)
	}
	if e.RawLength <= 0 || e.RawLength > MaxRawLength {
		return nil, corrupt("slice of %v at %d: raw length %d", e.TopicPartition, e.Position, e.RawLength)
	}
	var h zstd.Header
	if err := h.Decode(stored); err != nil {
		return nil, corrupt("slice of %v at %d: zstd header: %v", e.TopicPartition, e.Position, err)
	}
	if h.HasFCS && h.FrameContentSize != uint64(e.RawLength) {
		return nil, corrupt("slice of %v at %d: zstd frame holds %d bytes, entry says %d", e.TopicPartition, e.Position, h.FrameContentSize, e.RawLength)
	}
	if r.zdec == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(MaxRawLength), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, fmt.Errorf("objformat: zstd decoder: %w", err)
		}
		r.zdec = d
	}
	out, err := r.zdec.DecodeAll(stored, make([]byte, 0, e.RawLength))
	if err != nil {
		return nil, corrupt("slice of %v at %d: zstd: %v", e.TopicPartition, e.Position, err)
	}
	if int64(len(out)) != e.RawLength {
		return nil, corrupt("slice of %v at %d: decoded %d bytes, entry says %d", e.TopicPartition, e.Position, len(out), e.RawLength)
	}
	return out, nil
}

// StoredBytes returns the stored bytes of e inside obj, bounds-checked.
func StoredBytes(obj []byte, e metadata.SliceEntry) ([]byte, error) {
	if e.Position < HeaderSize || e.Length <= 0 || e.Position > int64(len(obj)) || e.Length > int64(len(obj))-e.Position {
		return nil, corrupt("slice of %v: range [%d, +%d) outside object of %d bytes", e.TopicPartition, e.Position, e.Length, len(obj))
	}
	return obj[e.Position : e.Position+e.Length], nil
}

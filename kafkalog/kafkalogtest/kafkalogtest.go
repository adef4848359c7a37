package kafkalogtest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one record of a BatchSpec. A nil Key or Value encodes as null.
type Record struct {
	Key, Value     []byte
	TimestampDelta int64
	Headers        []Header
}

// Header is a record header; Value nil encodes as null.
type Header struct {
	Key   string
	Value []byte
}

// BatchSpec describes a v2 batch. If RawRecords is non-nil it is used as
// the records section verbatim (e.g. pretend-compressed bytes with
// Attributes&7 != 0) and RecordCount/LastOffsetDelta must be set;
// otherwise Records are encoded and both are derived.
type BatchSpec struct {
	BaseOffset      int64
	LeaderEpoch     int32
	Attributes      int16
	BaseTimestamp   int64
	MaxTimestamp    int64 // 0: BaseTimestamp + the largest delta
	ProducerID      int64 // 0 is encoded as -1 (no producer)
	ProducerEpoch   int16
	BaseSequence    int32
	Records         []Record
	RawRecords      []byte
	RecordCount     int32
	LastOffsetDelta int32
}

// MakeBatch returns a valid uncompressed v2 batch holding one record per
// value (null keys, no headers), all with timestamp ts.
func MakeBatch(baseOffset int64, epoch int32, values [][]byte, ts int64) []byte {
	recs := make([]Record, len(values))
	for i, v := range values {
		recs[i] = Record{Value: v}
	}
	return Encode(BatchSpec{BaseOffset: baseOffset, LeaderEpoch: epoch, BaseTimestamp: ts, Records: recs})
}

// MakeBatchN returns a valid batch of n records of size bytes each.
func MakeBatchN(baseOffset int64, epoch int32, n, size int, ts int64) []byte {
	vals := make([][]byte, n)
	for i := range vals {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(int(baseOffset) + i + j)
		}
		vals[i] = v
	}
	return MakeBatch(baseOffset, epoch, vals, ts)
}

// Encode encodes s with a correct batchLength and CRC32C.
func Encode(s BatchSpec) []byte {
	b := make([]byte, 61, 61+len(s.RawRecords)+len(s.Records)*16)
	count, lastDelta, maxTS := s.RecordCount, s.LastOffsetDelta, s.MaxTimestamp
	if s.RawRecords != nil {
		b = append(b, s.RawRecords...)
	} else {
		count, lastDelta = int32(len(s.Records)), int32(len(s.Records)-1)
		var maxDelta int64
		var rec []byte
		for i, r := range s.Records {
			maxDelta = max(maxDelta, r.TimestampDelta)
			rec = rec[:0]
			rec = append(rec, 0)
			rec = binary.AppendVarint(rec, r.TimestampDelta)
			rec = binary.AppendVarint(rec, int64(i))
			rec = appendBytes(rec, r.Key)
			rec = appendBytes(rec, r.Value)
			rec = binary.AppendVarint(rec, int64(len(r.Headers)))
			for _, h := range r.Headers {
				rec = appendBytes(rec, []byte(h.Key))
				rec = appendBytes(rec, h.Value)
			}
			b = binary.AppendVarint(b, int64(len(rec)))
			b = append(b, rec...)
		}
		if maxTS == 0 {
			maxTS = s.BaseTimestamp + maxDelta
		}
	}
	pid := s.ProducerID
	if pid == 0 {
		pid = -1
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(s.BaseOffset))
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[12:], uint32(s.LeaderEpoch))
	b[16] = 2
	be.PutUint16(b[21:], uint16(s.Attributes))
	be.PutUint32(b[23:], uint32(lastDelta))
	be.PutUint64(b[27:], uint64(s.BaseTimestamp))
	be.PutUint64(b[35:], uint64(maxTS))
	be.PutUint64(b[43:], uint64(pid))
	be.PutUint16(b[51:], uint16(s.ProducerEpoch))
	be.PutUint32(b[53:], uint32(s.BaseSequence))
	be.PutUint32(b[57:], uint32(count))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// Records encodes s.Records as a batch's uncompressed records section.
func Records(s BatchSpec) []byte {
	b := Encode(BatchSpec{Records: s.Records})
	return b[61:]
}

// Codec ids of the attributes' low bits.
const (
	Gzip   = 1
	Snappy = 2
	LZ4    = 3
	Zstd   = 4
)

// Compress compresses a records section with codec as Kafka clients do
// (snappy as one raw block; XerialSnappy gives the Java client's framing).
func Compress(codec int, raw []byte) []byte {
	var buf bytes.Buffer
	switch codec {
	case Gzip:
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case Snappy:
		return s2.EncodeSnappy(nil, raw)
	case LZ4:
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case Zstd:
		w, _ := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		w.Write(raw)
		w.Close()
	default:
		return raw
	}
	return buf.Bytes()
}

// XerialSnappy frames raw as Kafka's Java client does: the xerial magic,
// version 1, compatible version 1, then chunks of int32 length + raw
// snappy block of at most chunk input bytes.
func XerialSnappy(raw []byte, chunk int) []byte {
	out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for len(raw) > 0 {
		n := min(chunk, len(raw))
		blk := s2.EncodeSnappy(nil, raw[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
		out = append(out, blk...)
		raw = raw[n:]
	}
	return out
}

// EncodeCompressed encodes s.Records compressed with codec into a valid
// batch (CRC, counts and max timestamp filled in).
func EncodeCompressed(s BatchSpec, codec int) []byte {
	plain := Encode(s)
	s.RawRecords = Compress(codec, plain[61:])
	s.RecordCount = int32(len(s.Records))
	s.LastOffsetDelta = int32(len(s.Records) - 1)
	s.MaxTimestamp = int64(binary.BigEndian.Uint64(plain[35:]))
	s.Attributes = s.Attributes&^7 | int16(codec)
	s.Records = nil
	return Encode(s)
}

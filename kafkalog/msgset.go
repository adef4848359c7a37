package kafkalog

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// Legacy message sets (magic 0 and 1) are the record format of Produce
// v0-2 and Fetch v0-3. Kafka 3.x stores only RecordBatch v2: its leader
// up-converts what an old producer sends and down-converts what an old
// consumer fetches. kwal does the same with UpConvert and DownConvert.
//
//	message set: repeated  offset int64 | size int32 | message (size bytes)
//	message v0:            crc uint32 | magic int8 | attributes int8 | key | value
//	message v1:            crc uint32 | magic int8 | attributes int8 | timestamp int64 | key | value
//	key, value:            int32 length (-1 null) | bytes
//	attributes:            bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4),
//	                       bit 3 (v1) timestamp type: LogAppendTime
//
// The crc is CRC-32 (IEEE) over magic..end. A compressed message's value
// is a message set of inner messages, compressed whole; in v1 the inner
// offsets are relative (0..n-1) and the wrapper carries the last one.

const (
	legacyLogOverhead = 12 // offset + size
	legacyV0Header    = 4 + 1 + 1
	legacyV1Header    = legacyV0Header + 8
)

// IsMessageSet says whether b starts with a legacy (magic 0 or 1) message
// rather than a RecordBatch v2: the magic byte sits at the same position
// in both formats.
func IsMessageSet(b []byte) bool {
	return len(b) > offMagic && b[offMagic] < 2
}

// legacyRecord is one record read from a legacy message set.
type legacyRecord struct {
	ts         int64
	key, value []byte
}

// UpConvert turns a legacy message set (magic 0/1, compressed or not)
// into one RecordBatch v2 at base offset 0, as Kafka's leader does for
// Produce v0-2: records keep their keys, values (null too) and v1
// timestamps (a v0 message has none: -1; a LogAppendTime wrapper gives
// its inner messages its own timestamp); the batch is compressed with the
// codec of the last compressed wrapper (compression.type=producer), has
// no producer id and CreateTime (the leader stamps LogAppendTime topics).
// limit bounds what one wrapper may decompress to. Errors:
// *CorruptBatchError (bad size, crc, magic, codec or nesting).
func UpConvert(b []byte, limit int64) ([]byte, error) {
	var recs []legacyRecord
	codec := int8(CodecNone)
	err := eachLegacyMessage(b, func(pos int64, magic, attrs int8, ts int64, key, value []byte) error {
		c := attrs & 7
		if c == CodecNone {
			recs = append(recs, legacyRecord{ts: ts, key: key, value: value})
			return nil
		}
		if c > CodecLZ4 {
			return corruptf(pos, "magic %d message with codec %d", magic, c)
		}
		raw, err := decompressRecords(c, value, limit)
		if err != nil {
			return corruptf(pos, "decompressing a %s wrapper: %v", codecName(c), err)
		}
		codec = c
		return eachLegacyMessage(raw, func(ipos int64, imagic, iattrs int8, its int64, ikey, ivalue []byte) error {
			switch {
			case imagic != magic:
				return corruptf(pos, "inner message of magic %d in a magic %d wrapper", imagic, magic)
			case iattrs&7 != CodecNone:
				return corruptf(pos, "nested compressed message at inner position %d", ipos)
			}
			if magic == 1 && attrs&8 != 0 {
				its = ts
			}
			recs = append(recs, legacyRecord{ts: its, key: ikey, value: ivalue})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, corruptf(0, "empty message set")
	}
	return encodeV2Batch(recs, codec)
}

// eachLegacyMessage walks a legacy message set, checking each message's
// size, crc and magic, and calls fn with its fields (key and value alias
// b). A trailing partial message is an error: a producer sends whole ones.
func eachLegacyMessage(b []byte, fn func(pos int64, magic, attrs int8, ts int64, key, value []byte) error) error {
	for pos := 0; pos < len(b); {
		if len(b)-pos < legacyLogOverhead+legacyV0Header {
			return corruptf(int64(pos), "truncated message header (%d bytes left)", len(b)-pos)
		}
		size := int(int32(binary.BigEndian.Uint32(b[pos+8:])))
		if size < legacyV0Header+8 || size > len(b)-pos-legacyLogOverhead {
			return corruptf(int64(pos), "message size %d with %d bytes left", size, len(b)-pos-legacyLogOverhead)
		}
		m := b[pos+legacyLogOverhead : pos+legacyLogOverhead+size]
		if crc := binary.BigEndian.Uint32(m); crc != crc32.ChecksumIEEE(m[4:]) {
			return corruptf(int64(pos), "message crc %08x, computed %08x", crc, crc32.ChecksumIEEE(m[4:]))
		}
		magic, attrs := int8(m[4]), int8(m[5])
		rest := m[legacyV0Header:]
		ts := int64(-1)
		switch magic {
		case 0:
		case 1:
			if len(rest) < 8+8 {
				return corruptf(int64(pos), "magic 1 message of %d bytes", size)
			}
			ts = int64(binary.BigEndian.Uint64(rest))
			rest = rest[8:]
		default:
			return corruptf(int64(pos), "magic %d in a legacy message set", magic)
		}
		key, rest, ok := legacyBytes(rest)
		if !ok {
			return corruptf(int64(pos), "bad key length")
		}
		value, rest, ok := legacyBytes(rest)
		if !ok || len(rest) != 0 {
			return corruptf(int64(pos), "bad value length")
		}
		if err := fn(int64(pos), magic, attrs, ts, key, value); err != nil {
			return err
		}
		pos += legacyLogOverhead + size
	}
	return nil
}

func legacyBytes(b []byte) (v, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	switch {
	case n == -1:
		return nil, b, true
	case n < 0 || int(n) > len(b):
		return nil, nil, false
	}
	return b[:n:n], b[n:], true
}

// encodeV2Batch builds a RecordBatch v2 at base offset 0 holding recs,
// compressed with codec, without producer id.
func encodeV2Batch(recs []legacyRecord, codec int8) ([]byte, error) {
	base, maxTs := recs[0].ts, recs[0].ts
	for _, r := range recs {
		maxTs = max(maxTs, r.ts)
	}
	var raw []byte
	var rec []byte
	for i, r := range recs {
		rec = rec[:0]
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, r.ts-base)
		rec = binary.AppendVarint(rec, int64(i))
		rec = appendVarBytes(rec, r.key)
		rec = appendVarBytes(rec, r.value)
		rec = binary.AppendUvarint(rec, 0) // no headers
		raw = binary.AppendVarint(raw, int64(len(rec)))
		raw = append(raw, rec...)
	}
	if codec != CodecNone {
		var err error
		if raw, err = compressRecords(codec, raw); err != nil {
			return nil, err
		}
	}
	if len(raw) > math.MaxInt32-BatchHeaderSize {
		return nil, ErrBatchTooLarge
	}
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(raw))
	binary.BigEndian.PutUint64(b[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(BatchHeaderSize-BatchLengthOverhead+len(raw)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], math.MaxUint32) // -1
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(codec))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(len(recs)-1))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(base))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[offProducerID:], math.MaxUint64)    // -1
	binary.BigEndian.PutUint16(b[offProducerEpoch:], math.MaxUint16) // -1
	binary.BigEndian.PutUint32(b[offBaseSequence:], math.MaxUint32)  // -1
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(recs)))
	b = append(b, raw...)
	binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b))
	return b, nil
}

func appendVarBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// DownConvert turns stored RecordBatch v2 bytes into a legacy message set
// of magic 0 or 1 for Fetch v0-3, as Kafka's down-conversion does: every
// record becomes one message at its own offset, with its key, value and
// (v1) timestamp, LogAppendTime batches marked so; headers are dropped
// (the old formats have none) and control batches skipped. Unlike Kafka,
// the messages are sent uncompressed (any client reads those). A
// trailing partial batch is ignored, as a fetch may end inside one.
// Errors: *CorruptBatchError.
func DownConvert(data []byte, magic int8) ([]byte, error) {
	var out []byte
	for pos := 0; pos < len(data); {
		h, err := ParseBatchHeader(data[pos:])
		if err != nil || pos+h.Size() > len(data) {
			break
		}
		batch := data[pos : pos+h.Size()]
		pos += h.Size()
		if h.Control() {
			continue
		}
		err = EachRecord(batch, func(r Record) {
			out = appendLegacyMessage(out, magic, h, r)
		})
		if err != nil {
			return nil, err
		}
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

func appendLegacyMessage(out []byte, magic int8, h BatchHeader, r Record) []byte {
	start := len(out)
	out = binary.BigEndian.AppendUint64(out, uint64(r.Offset))
	out = append(out, 0, 0, 0, 0, 0, 0, 0, 0) // size, crc
	out = append(out, byte(magic), 0)
	if magic == 1 {
		ts := r.Timestamp
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
			out[len(out)-1] = 8
		}
		out = binary.BigEndian.AppendUint64(out, uint64(ts))
	}
	for _, v := range [][]byte{r.Key, r.Value} {
		if v == nil {
			out = binary.BigEndian.AppendUint32(out, math.MaxUint32)
			continue
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, v...)
	}
	m := out[start+legacyLogOverhead:]
	binary.BigEndian.PutUint32(out[start+8:], uint32(len(m)))
	binary.BigEndian.PutUint32(m, crc32.ChecksumIEEE(m[4:]))
	return out
}

package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"unicode/utf16"

	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KV is one record to write: a tombstone has a nil Value.
type KV struct{ Key, Value []byte }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeBatch returns an uncompressed RecordBatch v2 (base offset 0, no
// producer) holding kvs, with its length and CRC32C filled in; the
// leader's append assigns offsets and the leader epoch.
func EncodeBatch(kvs []KV, timestampMs int64) []byte {
	const header = 61
	b := make([]byte, header, header+len(kvs)*64)
	var rec []byte
	for i, kv := range kvs {
		rec = rec[:0]
		rec = append(rec, 0)                     // attributes
		rec = binary.AppendVarint(rec, 0)        // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = appendVarBytes(rec, kv.Key)
		rec = appendVarBytes(rec, kv.Value)
		rec = binary.AppendVarint(rec, 0) // headers
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[12:], 0xffffffff) // partition leader epoch: set on append
	b[16] = 2
	be.PutUint16(b[21:], 0) // attributes
	be.PutUint32(b[23:], uint32(len(kvs)-1))
	be.PutUint64(b[27:], uint64(timestampMs))
	be.PutUint64(b[35:], uint64(timestampMs))
	be.PutUint64(b[43:], 0xffffffffffffffff) // producer id -1
	be.PutUint16(b[51:], 0xffff)
	be.PutUint32(b[53:], 0xffffffff)
	be.PutUint32(b[57:], uint32(len(kvs)))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

func appendVarBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// ErrCompressedBatch: the coordinator writes uncompressed batches only.
var ErrCompressedBatch = errors.New("group: compressed batch in __consumer_offsets")

// DecodeBatches walks log bytes (whole batches, each checked by its
// CRC32C) and calls fn with every record's offset, key and value. Control
// batches are skipped. Errors wrap kafkalog.ErrCorruptBatch,
// ErrCorruptRecord or ErrCompressedBatch.
func DecodeBatches(b []byte, fn func(offset int64, key, value []byte) error) (next int64, err error) {
	next = -1
	err = kafkalog.SplitBatches(b, func(h kafkalog.BatchHeader, batch []byte) error {
		next = h.NextOffset()
		if h.Control() {
			return nil
		}
		if h.Compression() != 0 {
			return fmt.Errorf("%w at offset %d (codec %d)", ErrCompressedBatch, h.BaseOffset, h.Compression())
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(batch); err != nil {
			return fmt.Errorf("%w: batch at offset %d: %v", ErrCorruptRecord, h.BaseOffset, err)
		}
		raw := rb.Records
		for i := int32(0); i < rb.NumRecords; i++ {
			l, n := binary.Varint(raw)
			if n <= 0 || l < 0 || l > int64(len(raw)-n) {
				return fmt.Errorf("%w: record %d of batch at offset %d: bad length", ErrCorruptRecord, i, h.BaseOffset)
			}
			var r kmsg.Record
			if err := r.ReadFrom(raw[:n+int(l)]); err != nil {
				return fmt.Errorf("%w: record %d of batch at offset %d: %v", ErrCorruptRecord, i, h.BaseOffset, err)
			}
			raw = raw[n+int(l):]
			if err := fn(h.BaseOffset+int64(r.OffsetDelta), r.Key, r.Value); err != nil {
				return err
			}
		}
		return nil
	})
	return next, err
}

// PartitionFor is Kafka's choice of a group's __consumer_offsets
// partition: abs(Java String.hashCode(groupID)) % partitions, with Kafka's
// Utils.abs (MinInt32 maps to 0).
func PartitionFor(groupID string, partitions int32) int32 {
	var h int32
	for _, c := range utf16.Encode([]rune(groupID)) {
		h = 31*h + int32(c)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

// Package objformat encodes and decodes kwal's combined object: the bytes
// the combiner PUTs to object storage, holding slices of many partitions.
//
// It owns the byte layout, its bounds checks and its checksums. It does not
// own I/O beyond one small RangeReader used to read a footer from the tail
// of a stored object, and it does not parse Kafka RecordBatches: a slice's
// bytes are opaque here.
//
// # Layout
//
// All integers are big-endian (Kafka's byte order). Positions are absolute
// byte offsets from the start of the object.
//
//	offset 0                      8                                     F            F+L          F+L+16
//	┌──────────────────────────────┬─────────┬─────────┬─────┬───────────┬────────────┬────────────┐
//	│ header                       │ slice 0 │ slice 1 │ ... │ slice n-1 │ footer     │ trailer    │
//	└──────────────────────────────┴─────────┴─────────┴─────┴───────────┴────────────┴────────────┘
//
//	header (8 bytes)
//	  0  magic    [4]byte  "KWAL"
//	  4  version  uint16   1
//	  6  flags    uint16   0 (reserved; readers refuse non-zero)
//
//	slices: stored bytes of each slice, back to back from offset 8 in footer
//	order, no gaps and no overlaps. A stored slice is either the raw log bytes
//	(codec none) or one independent zstd frame (codec zstd), so a reader can
//	range-GET any one slice and decode it alone.
//
//	footer (L bytes, starting at F = 8 + sum of stored lengths)
//	  0  count    uint32   number of entries, >= 1
//	  4  entries  count × entry
//
//	entry (55 bytes + topic)
//	  0  topicLen     uint16   1..249
//	  2  topic        [topicLen]byte
//	  +0  partition   int32    >= 0
//	  +4  leaderEpoch int32    >= 0
//	  +8  baseOffset  int64    >= 0
//	  +16 lastOffset  int64    >= baseOffset
//	  +24 position    int64    absolute; == 8 + sum of earlier lengths
//	  +32 length      int64    stored bytes, > 0
//	  +40 rawLength   int64    == length for codec none; 1..MaxRawLength for zstd
//	  +48 codec       uint8    0 none, 1 zstd
//	  +49 crc32c      uint32   Castagnoli CRC of the stored bytes
//
//	trailer (16 bytes, the last bytes of the object)
//	  0  footerLen  uint32   L
//	  4  footerCRC  uint32   CRC32C (Castagnoli) of the footer bytes
//	  8  version    uint16   1
//	  10 flags      uint16   0
//	  12 magic      [4]byte  "LAWK"
//
// Two partitions' slices may interleave in an object, but one partition's
// entries appear in offset order: each entry of a topic-partition starts
// after the last offset of its previous entry in the same object.
//
// Reading the footer from storage takes two suffix range GETs: the 16-byte
// trailer, then footer+trailer (see ReadFooter). The footer alone determines
// the object's size (8 + sum of lengths + L + 16), so no HEAD is needed.
//
// Every decode error wraps ErrCorruptObject with what was wrong and where.
//
// Concurrency: the package functions are safe for concurrent use. An
// Encoder or SliceReader is not; use one per goroutine.
package objformat

package metadata

import (
	"fmt"

	"github.com/kwal/kwal/topicpart"
)

// TopicPartition is the module's one topic-partition type (package topicpart).
type TopicPartition = topicpart.TopicPartition

// Codec says how a slice's bytes are stored inside a combined object.
type Codec uint8

const (
	// CodecNone: the stored bytes are the raw log bytes.
	CodecNone Codec = 0
	// CodecZstd: the stored bytes are one independent zstd frame that
	// decompresses to the raw log bytes.
	CodecZstd Codec = 1
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// SliceEntry locates one slice of one partition inside a combined object.
// It is both the combined object's footer entry and the per-slice entry of
// the RemoteWalCombinedLogSegmentMetadata event, so the two always agree.
//
// A slice is the exact bytes of whole RecordBatch v2 batches of one
// partition and one leader epoch: offsets [BaseOffset, LastOffset].
type SliceEntry struct {
	TopicPartition
	LeaderEpoch int32
	BaseOffset  int64 // first offset of the first batch
	LastOffset  int64 // last offset of the last batch
	Position    int64 // where the stored bytes start in the object
	Length      int64 // stored bytes (compressed when Codec != CodecNone)
	RawLength   int64 // raw log bytes after decoding
	Codec       Codec
	CRC32C      uint32 // Castagnoli CRC of the stored bytes
}

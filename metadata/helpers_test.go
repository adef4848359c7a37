package metadata

import "fmt"

func testID(n byte) ObjectID {
	var id ObjectID
	for i := range id {
		id[i] = n + byte(i)
	}
	return id
}

func testEntry(topic string, p int32, base, last int64) SliceEntry {
	return SliceEntry{
		TopicPartition: TopicPartition{Topic: topic, Partition: p},
		LeaderEpoch:    3,
		BaseOffset:     base,
		LastOffset:     last,
		Position:       base * 10,
		Length:         (last - base + 1) * 10,
		RawLength:      (last - base + 1) * 12,
		Codec:          CodecZstd,
		CRC32C:         0xdeadbeef,
	}
}

// testObject is one object part on metadata partition mp with the given
// entries.
func testObject(id byte, mp int32, st SegmentState, entries ...SliceEntry) *ObjectMetadata {
	return &ObjectMetadata{
		ID:                testID(id),
		MetadataPartition: mp,
		Bucket:            "wal",
		Key:               fmt.Sprintf("wal/obj-%d", id),
		BrokerID:          1,
		State:             st,
		EventTimestampMs:  1_700_000_000_000,
		Entries:           entries,
	}
}

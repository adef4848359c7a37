package metadata

import (
	"fmt"
	"slices"
)

// Murmur2 is Kafka's Utils.murmur2: the 32-bit MurmurHash2 with seed
// 0x9747b28c, reading the input as little-endian 4-byte words. Its value
// is the Java int Kafka returns.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	n := length / 4
	for i := 0; i < n; i++ {
		i4 := i * 4
		k := uint32(data[i4]) | uint32(data[i4+1])<<8 | uint32(data[i4+2])<<16 | uint32(data[i4+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n*4:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// toPositive is Kafka's Utils.toPositive: clear the sign bit (not abs).
func toPositive(n int32) int32 { return n & 0x7fffffff }

// MetadataPartition returns the metadata partition that holds every event
// of user partition tp, for a metadata topic of numPartitions partitions.
//
// Kafka's RemoteLogMetadataTopicPartitioner computes
// toPositive(murmur2(toBytes(topicIdPartition))) % numPartitions, where
// toBytes hashes the topic id and partition. kwal has no topic ids, so the
// hashed bytes are the UTF-8 of tp.String(), "topic-partition" (e.g.
// "orders-7"); as in Kafka, a topic-partition never moves between metadata
// partitions while the partition count stays fixed. numPartitions must be
// positive.
func MetadataPartition(tp TopicPartition, numPartitions int32) int32 {
	if numPartitions <= 0 {
		panic(fmt.Sprintf("metadata: MetadataPartition with %d partitions", numPartitions))
	}
	return toPositive(Murmur2([]byte(tp.String()))) % numPartitions
}

// Split divides one object's metadata into one ObjectMetadata per metadata
// partition, each holding only the entries of the user partitions that map
// there, in their original order. The parts come back ordered by metadata
// partition. An object with no entries yields a single part on metadata
// partition 0, so its state is still recorded.
func Split(m *ObjectMetadata, numPartitions int32) []*ObjectMetadata {
	byPart := make(map[int32][]SliceEntry)
	var parts []int32
	cache := make(map[TopicPartition]int32)
	for _, e := range m.Entries {
		p, ok := cache[e.TopicPartition]
		if !ok {
			p = MetadataPartition(e.TopicPartition, numPartitions)
			cache[e.TopicPartition] = p
		}
		if _, seen := byPart[p]; !seen {
			parts = append(parts, p)
		}
		byPart[p] = append(byPart[p], e)
	}
	if len(parts) == 0 {
		parts = []int32{0}
	}
	slices.Sort(parts)
	out := make([]*ObjectMetadata, 0, len(parts))
	for _, p := range parts {
		c := *m
		c.MetadataPartition = p
		c.Entries = byPart[p]
		out = append(out, &c)
	}
	return out
}

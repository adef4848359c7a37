package metadata

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// Version is the newest event format this package writes and reads.
// Version 2 added the DeadRange and ReplicatedOffset types and changed
// nothing else; an event is written with the lowest version that has its
// type (EventVersion), so a version-1 reader still reads every object event
// and refuses only the new types, clearly (*UnsupportedVersionError).
const Version uint8 = 2

// EventVersion is the format version an event of type t is written with.
func EventVersion(t EventType) uint8 {
	if t == TypeDeadRange || t == TypeReplicatedOffset {
		return 2
	}
	return 1
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Smallest encoded sizes, used to bound counts before allocating.
const (
	minEntryLen  = 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 4 // nine varints of one byte, codec, crc
	minStringLen = 1
	headerLen    = 2 // version, type
	trailerLen   = 4 // CRC32C
)

// Encode appends the encoding of ev to dst. A Tombstone has no encoding
// (its record value is nil) and is refused, as is an event that fails
// Validate.
func Encode(dst []byte, ev Event) ([]byte, error) {
	if err := ev.Validate(); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, EventVersion(ev.Type()), byte(ev.Type()))
	switch e := ev.(type) {
	case *ObjectMetadata:
		dst = encodeObject(dst, e)
	case *StateUpdate:
		dst = append(dst, e.ID[:]...)
		dst = binary.AppendUvarint(dst, uint64(e.MetadataPartition))
		dst = append(dst, byte(e.State))
		dst = binary.AppendVarint(dst, e.EventTimestampMs)
		dst = binary.AppendVarint(dst, int64(e.BrokerID))
	case *PartitionDelete:
		dst = appendString(dst, e.Topic)
		dst = binary.AppendUvarint(dst, uint64(e.Partition))
		dst = append(dst, byte(e.State))
		dst = binary.AppendVarint(dst, e.EventTimestampMs)
		dst = binary.AppendVarint(dst, int64(e.BrokerID))
	case *DeadRange:
		dst = appendPartitionOffset(dst, e.TopicPartition, e.LeaderEpoch, e.StartOffset, e.BrokerID, e.EventTimestampMs)
	case *ReplicatedOffset:
		dst = appendPartitionOffset(dst, e.TopicPartition, e.LeaderEpoch, e.Offset, e.BrokerID, e.EventTimestampMs)
	default:
		return dst[:start], malformed("%s events have no encoding", ev.Type())
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), nil
}

func encodeObject(dst []byte, m *ObjectMetadata) []byte {
	dst = append(dst, m.ID[:]...)
	dst = binary.AppendUvarint(dst, uint64(m.MetadataPartition))
	dst = binary.AppendVarint(dst, int64(m.BrokerID))
	dst = append(dst, byte(m.State))
	dst = binary.AppendVarint(dst, m.EventTimestampMs)
	dst = appendString(dst, m.Bucket)
	dst = appendString(dst, m.Key)

	// Topic table: every topic name once, in first-seen order; entries
	// refer to it by index. One object holds many partitions of few
	// topics, so this is most of the saving over naming each entry's topic.
	var topics []string
	idx := make(map[string]int, 4)
	for i := range m.Entries {
		t := m.Entries[i].Topic
		if _, ok := idx[t]; !ok {
			idx[t] = len(topics)
			topics = append(topics, t)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(topics)))
	for _, t := range topics {
		dst = appendString(dst, t)
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Entries)))
	for i := range m.Entries {
		e := &m.Entries[i]
		dst = binary.AppendUvarint(dst, uint64(idx[e.Topic]))
		dst = binary.AppendUvarint(dst, uint64(e.Partition))
		dst = binary.AppendVarint(dst, int64(e.LeaderEpoch))
		dst = binary.AppendUvarint(dst, uint64(e.BaseOffset))
		dst = binary.AppendUvarint(dst, uint64(e.LastOffset-e.BaseOffset))
		dst = binary.AppendUvarint(dst, uint64(e.Position))
		dst = binary.AppendUvarint(dst, uint64(e.Length))
		dst = binary.AppendUvarint(dst, uint64(e.RawLength))
		dst = append(dst, byte(e.Codec))
		dst = binary.BigEndian.AppendUint32(dst, e.CRC32C)
	}
	return dst
}

// appendPartitionOffset is the payload of the partition-offset events
// (DeadRange, ReplicatedOffset): topic:str partition:uv leader_epoch:uv
// offset:uv broker:v timestamp_ms:v.
func appendPartitionOffset(dst []byte, tp TopicPartition, epoch int32, offset int64, broker int32, ts int64) []byte {
	dst = appendString(dst, tp.Topic)
	dst = binary.AppendUvarint(dst, uint64(tp.Partition))
	dst = binary.AppendUvarint(dst, uint64(epoch))
	dst = binary.AppendUvarint(dst, uint64(offset))
	dst = binary.AppendVarint(dst, int64(broker))
	return binary.AppendVarint(dst, ts)
}

// partitionOffset reads what appendPartitionOffset wrote.
func (r *reader) partitionOffset() (tp TopicPartition, epoch int32, offset int64, broker int32, ts int64) {
	tp.Topic = r.string()
	tp.Partition = r.uint31()
	epoch = r.uint31()
	offset = r.uint63()
	broker = r.int32()
	ts = r.varint()
	return tp, epoch, offset, broker, ts
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Decode decodes one event value. Errors: *UnsupportedVersionError for a
// version other than Version; an error wrapping ErrMalformedEvent for
// anything truncated, failing its CRC, trailing bytes or out of bounds.
// The returned event shares no memory with b.
func Decode(b []byte) (Event, error) {
	if len(b) < 1 {
		return nil, malformed("empty value")
	}
	if b[0] < 1 || b[0] > Version {
		return nil, &UnsupportedVersionError{Got: b[0], Max: Version}
	}
	if len(b) < headerLen+trailerLen {
		return nil, malformed("%d bytes is shorter than header and checksum", len(b))
	}
	body := b[:len(b)-trailerLen]
	want := binary.BigEndian.Uint32(b[len(b)-trailerLen:])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, malformed("CRC32C %08x, want %08x", got, want)
	}
	r := reader{b: body[headerLen:]}
	var ev Event
	if t := EventType(body[1]); EventVersion(t) > b[0] {
		return nil, malformed("%s event in format version %d (it needs %d)", t, b[0], EventVersion(t))
	}
	switch EventType(body[1]) {
	case TypeObject:
		ev = decodeObject(&r)
	case TypeStateUpdate:
		u := &StateUpdate{}
		r.id(&u.ID)
		u.MetadataPartition = r.uint31()
		u.State = SegmentState(r.byte())
		u.EventTimestampMs = r.varint()
		u.BrokerID = r.int32()
		ev = u
	case TypePartitionDelete:
		d := &PartitionDelete{}
		d.Topic = r.string()
		d.Partition = r.uint31()
		d.State = PartitionDeleteState(r.byte())
		d.EventTimestampMs = r.varint()
		d.BrokerID = r.int32()
		ev = d
	case TypeDeadRange:
		d := &DeadRange{}
		d.TopicPartition, d.LeaderEpoch, d.StartOffset, d.BrokerID, d.EventTimestampMs = r.partitionOffset()
		ev = d
	case TypeReplicatedOffset:
		v := &ReplicatedOffset{}
		v.TopicPartition, v.LeaderEpoch, v.Offset, v.BrokerID, v.EventTimestampMs = r.partitionOffset()
		ev = v
	default:
		return nil, malformed("unknown event type %d", body[1])
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, malformed("%d trailing bytes after %s event", len(r.b), ev.Type())
	}
	if err := ev.Validate(); err != nil {
		return nil, err
	}
	return ev, nil
}

func decodeObject(r *reader) *ObjectMetadata {
	m := &ObjectMetadata{}
	r.id(&m.ID)
	m.MetadataPartition = r.uint31()
	m.BrokerID = r.int32()
	m.State = SegmentState(r.byte())
	m.EventTimestampMs = r.varint()
	m.Bucket = r.string()
	m.Key = r.string()
	nt := r.count(minStringLen)
	topics := make([]string, 0, nt)
	for i := 0; i < nt && r.err == nil; i++ {
		topics = append(topics, r.string())
	}
	ne := r.count(minEntryLen)
	if ne > 0 {
		m.Entries = make([]SliceEntry, 0, ne)
	}
	for i := 0; i < ne && r.err == nil; i++ {
		var e SliceEntry
		ti := r.uvarint()
		if r.err == nil && ti >= uint64(len(topics)) {
			r.fail("entry %d: topic index %d of %d topics", i, ti, len(topics))
			break
		}
		if r.err == nil {
			e.Topic = topics[ti]
		}
		e.Partition = r.uint31()
		e.LeaderEpoch = r.int32()
		e.BaseOffset = r.uint63()
		delta := r.uint63()
		if r.err == nil && e.BaseOffset > math.MaxInt64-delta {
			r.fail("entry %d: last offset overflows", i)
		}
		e.LastOffset = e.BaseOffset + delta
		e.Position = r.uint63()
		e.Length = r.uint63()
		e.RawLength = r.uint63()
		e.Codec = Codec(r.byte())
		e.CRC32C = r.uint32()
		m.Entries = append(m.Entries, e)
	}
	return m
}

// reader decodes with bounds checks; after the first error every read
// returns zero and err keeps that first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = malformed(format, args...)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.fail("truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uint32() uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) id(id *ObjectID) {
	if r.err != nil {
		return
	}
	if len(r.b) < len(id) {
		r.fail("truncated object id")
		return
	}
	copy(id[:], r.b)
	r.b = r.b[len(id):]
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uint31() int32 {
	v := r.uvarint()
	if v > math.MaxInt32 {
		r.fail("%d out of int32 range", v)
		return 0
	}
	return int32(v)
}

func (r *reader) uint63() int64 {
	v := r.uvarint()
	if v > math.MaxInt64 {
		r.fail("%d out of int64 range", v)
		return 0
	}
	return int64(v)
}

func (r *reader) int32() int32 {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail("%d out of int32 range", v)
		return 0
	}
	return int32(v)
}

// count reads a length and checks that that many items of at least
// minLen bytes each fit in what is left, so garbage cannot make us allocate.
func (r *reader) count(minLen int) int {
	v := r.uvarint()
	if r.err != nil {
		return 0
	}
	if v > uint64(len(r.b)/minLen) {
		r.fail("count %d does not fit in %d bytes", v, len(r.b))
		return 0
	}
	return int(v)
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.fail("string of %d bytes with %d left", n, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// Record keys. An object part's events share the key
//
//	'o' | object id (16) | metadata partition (u32 BE)
//
// so compaction keeps the latest snapshot of every object part and a nil
// value under it (a Tombstone) removes the part. A partition deletion's key is
//
//	'p' | partition (u32 BE) | topic bytes
//
// a dead range's (one per partition and leader epoch, so compaction keeps
// every epoch's)
//
//	'd' | partition (u32 BE) | leader epoch (u32 BE) | topic bytes
//
// and a replicated offset's (the latest per partition)
//
//	'v' | partition (u32 BE) | topic bytes
const (
	keyObject           = 'o'
	keyPartition        = 'p'
	keyDeadRange        = 'd'
	keyReplicatedOffset = 'v'
	objectKeyLen        = 1 + 16 + 4
)

// ObjectRecordKey is the record key of an object part's events.
func ObjectRecordKey(ref ObjectRef) []byte {
	k := make([]byte, 0, objectKeyLen)
	k = append(k, keyObject)
	k = append(k, ref.ID[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(ref.MetadataPartition))
}

// PartitionDeleteRecordKey is the record key of a partition's deletion events.
func PartitionDeleteRecordKey(tp TopicPartition) []byte {
	k := make([]byte, 0, 5+len(tp.Topic))
	k = append(k, keyPartition)
	k = binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
	return append(k, tp.Topic...)
}

// DeadRangeRecordKey is the record key of tp's dead range of leaderEpoch.
func DeadRangeRecordKey(tp TopicPartition, leaderEpoch int32) []byte {
	k := make([]byte, 0, 9+len(tp.Topic))
	k = append(k, keyDeadRange)
	k = binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
	k = binary.BigEndian.AppendUint32(k, uint32(leaderEpoch))
	return append(k, tp.Topic...)
}

// ReplicatedOffsetRecordKey is the record key of tp's replicated offsets.
func ReplicatedOffsetRecordKey(tp TopicPartition) []byte {
	k := make([]byte, 0, 5+len(tp.Topic))
	k = append(k, keyReplicatedOffset)
	k = binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
	return append(k, tp.Topic...)
}

// RecordKey returns the record key ev is published under.
func RecordKey(ev Event) []byte {
	switch e := ev.(type) {
	case *ObjectMetadata:
		return ObjectRecordKey(e.Ref())
	case *StateUpdate:
		return ObjectRecordKey(e.Ref())
	case *Tombstone:
		return ObjectRecordKey(e.ObjectRef)
	case *PartitionDelete:
		return PartitionDeleteRecordKey(e.TopicPartition)
	case *DeadRange:
		return DeadRangeRecordKey(e.TopicPartition, e.LeaderEpoch)
	case *ReplicatedOffset:
		return ReplicatedOffsetRecordKey(e.TopicPartition)
	}
	return nil
}

// DecodeRecord decodes a record of the metadata topic: the value when there
// is one, else the key of a tombstone. It checks that the key agrees with
// the value. Errors are those of Decode.
func DecodeRecord(key, value []byte) (Event, error) {
	if value == nil {
		if len(key) != objectKeyLen || key[0] != keyObject {
			return nil, malformed("nil value under a key that names no object (%d bytes)", len(key))
		}
		t := &Tombstone{}
		copy(t.ID[:], key[1:17])
		t.MetadataPartition = int32(binary.BigEndian.Uint32(key[17:]))
		if err := t.Validate(); err != nil {
			return nil, err
		}
		return t, nil
	}
	ev, err := Decode(value)
	if err != nil {
		return nil, err
	}
	if want := RecordKey(ev); string(want) != string(key) {
		return nil, malformed("record key %x does not match its %s event (want %x)", key, ev.Type(), want)
	}
	return ev, nil
}

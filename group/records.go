package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The records of __consumer_offsets. Kafka's own layout is not kept (a
// kwal cluster reads only what kwal wrote); like Kafka's, every key and
// value starts with a version, so a reader refuses what it does not know.
//
//	key    version int16 = 0 (offset) | group string | topic string | partition int32
//	key    version int16 = 1 (group)  | group string
//	offset value: version int16 = 0 | offset int64 | leader epoch int32 |
//	              metadata nullable string | commit timestamp ms int64
//	group value:  version int16 = 0 | protocol type string | generation int32 |
//	              protocol string | leader string | state timestamp ms int64 |
//	              members int32, each: member id, instance id, client id,
//	              client host (strings) | session timeout ms int32 |
//	              rebalance timeout ms int32 | metadata bytes | assignment bytes
//
// Strings are int16 length and bytes (-1: null), bytes int32 length and
// bytes. A nil value is a tombstone: the offset was deleted, or the group.
// Checksums are the record batch's CRC32C.

const (
	keyOffset int16 = 0
	keyGroup  int16 = 1
)

// ErrCorruptRecord is wrapped by every decoding error.
var ErrCorruptRecord = errors.New("group: corrupt __consumer_offsets record")

// OffsetKey names a committed offset.
type OffsetKey struct {
	Group     string
	Topic     string
	Partition int32
}

// Offset is a committed offset.
type Offset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
	CommitTime  time.Time
}

// MemberRecord is a member as the group record keeps it.
type MemberRecord struct {
	MemberID, InstanceID, ClientID, ClientHost string
	SessionTimeout, RebalanceTimeout           time.Duration
	Metadata, Assignment                       []byte
}

// GroupRecord is a group's persisted state: the last generation.
type GroupRecord struct {
	ProtocolType string
	Generation   int32
	Protocol     string
	Leader       string
	StateSince   time.Time
	Members      []MemberRecord
}

// Record is one decoded __consumer_offsets record: an offset (OffsetKey
// set) or a group (Group set without Topic); Offset or GroupValue nil
// for a tombstone.
type Record struct {
	IsGroup    bool
	Key        OffsetKey
	Offset     *Offset
	GroupValue *GroupRecord
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendNullableString(b []byte, s *string) []byte {
	if s == nil {
		return binary.BigEndian.AppendUint16(b, 0xffff)
	}
	return appendString(b, *s)
}

func appendBytes(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// OffsetRecordKey encodes an offset's key.
func OffsetRecordKey(k OffsetKey) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(keyOffset))
	b = appendString(b, k.Group)
	b = appendString(b, k.Topic)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

// GroupRecordKey encodes a group's key.
func GroupRecordKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(keyGroup))
	return appendString(b, group)
}

// EncodeOffset encodes an offset value.
func EncodeOffset(o Offset) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(o.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(o.LeaderEpoch))
	b = appendNullableString(b, o.Metadata)
	return binary.BigEndian.AppendUint64(b, uint64(o.CommitTime.UnixMilli()))
}

// EncodeGroup encodes a group value.
func EncodeGroup(g GroupRecord) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = appendString(b, g.ProtocolType)
	b = binary.BigEndian.AppendUint32(b, uint32(g.Generation))
	b = appendString(b, g.Protocol)
	b = appendString(b, g.Leader)
	b = binary.BigEndian.AppendUint64(b, uint64(g.StateSince.UnixMilli()))
	b = binary.BigEndian.AppendUint32(b, uint32(len(g.Members)))
	for _, m := range g.Members {
		b = appendString(b, m.MemberID)
		b = appendString(b, m.InstanceID)
		b = appendString(b, m.ClientID)
		b = appendString(b, m.ClientHost)
		b = binary.BigEndian.AppendUint32(b, uint32(m.SessionTimeout.Milliseconds()))
		b = binary.BigEndian.AppendUint32(b, uint32(m.RebalanceTimeout.Milliseconds()))
		b = appendBytes(b, m.Metadata)
		b = appendBytes(b, m.Assignment)
	}
	return b
}

// reader decodes the primitives; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: short %s", ErrCorruptRecord, what)
	}
	r.b = nil
}

func (r *reader) u16(what string) uint16 {
	if len(r.b) < 2 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32(what string) uint32 {
	if len(r.b) < 4 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64(what string) uint64 {
	if len(r.b) < 8 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) nullableString(what string) *string {
	n := int16(r.u16(what))
	if r.err != nil {
		return nil
	}
	if n == -1 {
		return nil
	}
	if n < 0 || int(n) > len(r.b) {
		r.fail(what)
		return nil
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return &s
}

func (r *reader) string(what string) string {
	s := r.nullableString(what)
	if s == nil {
		if r.err == nil {
			r.err = fmt.Errorf("%w: null %s", ErrCorruptRecord, what)
		}
		return ""
	}
	return *s
}

func (r *reader) bytes(what string) []byte {
	n := r.u32(what)
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.fail(what)
		return nil
	}
	v := append([]byte{}, r.b[:n]...)
	r.b = r.b[n:]
	return v
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrCorruptRecord, len(r.b))
	}
	return r.err
}

// DecodeRecord decodes one record's key and value (nil: a tombstone).
// Errors wrap ErrCorruptRecord.
func DecodeRecord(key, value []byte) (Record, error) {
	r := &reader{b: key}
	var rec Record
	switch v := int16(r.u16("key version")); {
	case r.err != nil:
		return rec, r.err
	case v == keyOffset:
		rec.Key.Group = r.string("group")
		rec.Key.Topic = r.string("topic")
		rec.Key.Partition = int32(r.u32("partition"))
	case v == keyGroup:
		rec.IsGroup = true
		rec.Key.Group = r.string("group")
	default:
		return rec, fmt.Errorf("%w: unknown key version %d", ErrCorruptRecord, v)
	}
	if err := r.done(); err != nil {
		return rec, err
	}
	if value == nil {
		return rec, nil
	}
	r = &reader{b: value}
	if v := int16(r.u16("value version")); r.err == nil && v != 0 {
		return rec, fmt.Errorf("%w: unknown value version %d", ErrCorruptRecord, v)
	}
	if !rec.IsGroup {
		o := &Offset{}
		o.Offset = int64(r.u64("offset"))
		o.LeaderEpoch = int32(r.u32("leader epoch"))
		o.Metadata = r.nullableString("metadata")
		o.CommitTime = time.UnixMilli(int64(r.u64("commit time")))
		rec.Offset = o
		return rec, r.done()
	}
	g := &GroupRecord{}
	g.ProtocolType = r.string("protocol type")
	g.Generation = int32(r.u32("generation"))
	g.Protocol = r.string("protocol")
	g.Leader = r.string("leader")
	g.StateSince = time.UnixMilli(int64(r.u64("state timestamp")))
	n := r.u32("member count")
	if uint64(n) > uint64(len(r.b)) { // every member takes bytes
		r.fail("members")
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		var m MemberRecord
		m.MemberID = r.string("member id")
		m.InstanceID = r.string("instance id")
		m.ClientID = r.string("client id")
		m.ClientHost = r.string("client host")
		m.SessionTimeout = time.Duration(int32(r.u32("session timeout"))) * time.Millisecond
		m.RebalanceTimeout = time.Duration(int32(r.u32("rebalance timeout"))) * time.Millisecond
		m.Metadata = r.bytes("metadata")
		m.Assignment = r.bytes("assignment")
		g.Members = append(g.Members, m)
	}
	rec.GroupValue = g
	return rec, r.done()
}

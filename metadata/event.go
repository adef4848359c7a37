package metadata

import (
	"encoding/hex"
	"errors"
	"fmt"
)

// ObjectID is the universally unique id of one combined object (the KIP's
// combinedSegmentId, a Uuid).
type ObjectID [16]byte

func (id ObjectID) String() string { return hex.EncodeToString(id[:]) }

// UUID formats id as a UUID, 8-4-4-4-12 hex digits (the leaf of its
// object's key, see combiner.Key).
func (id ObjectID) UUID() string {
	var s [36]byte
	hex.Encode(s[0:8], id[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], id[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], id[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], id[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], id[10:16])
	return string(s[:])
}

// ParseObjectID parses the 32 hex digits String produces.
func ParseObjectID(s string) (ObjectID, error) {
	var id ObjectID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("metadata: object id %q is not 32 hex digits", s)
	}
	copy(id[:], b)
	return id, nil
}

// EventType is the second byte of every encoded event.
type EventType uint8

const (
	// TypeObject is an ObjectMetadata event.
	TypeObject EventType = 1
	// TypeStateUpdate is a StateUpdate event.
	TypeStateUpdate EventType = 2
	// TypePartitionDelete is a PartitionDelete event.
	TypePartitionDelete EventType = 3
	// TypeDeadRange is a DeadRange event (format version 2).
	TypeDeadRange EventType = 4
	// TypeReplicatedOffset is a ReplicatedOffset event (format version 2).
	TypeReplicatedOffset EventType = 5
	// TypeTombstone is never encoded: a Tombstone is a record with a nil
	// value, recognised by its key.
	TypeTombstone EventType = 0
)

func (t EventType) String() string {
	switch t {
	case TypeObject:
		return "object"
	case TypeStateUpdate:
		return "state_update"
	case TypePartitionDelete:
		return "partition_delete"
	case TypeDeadRange:
		return "dead_range"
	case TypeReplicatedOffset:
		return "replicated_offset"
	case TypeTombstone:
		return "tombstone"
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// Event is one message of the metadata topic: *ObjectMetadata, *StateUpdate,
// *PartitionDelete, *DeadRange, *ReplicatedOffset or *Tombstone. The set is
// closed.
type Event interface {
	Type() EventType
	// Validate reports a malformed event (wrapping ErrMalformedEvent).
	Validate() error
}

var (
	_ Event = (*ObjectMetadata)(nil)
	_ Event = (*StateUpdate)(nil)
	_ Event = (*PartitionDelete)(nil)
	_ Event = (*DeadRange)(nil)
	_ Event = (*ReplicatedOffset)(nil)
	_ Event = (*Tombstone)(nil)
)

// ObjectMetadata is the KIP's RemoteWalCombinedLogSegmentMetadata, as
// published for one metadata partition: it holds only the entries of the
// user partitions that map to MetadataPartition (see Split).
//
// Every state change of an object is published as a full ObjectMetadata
// snapshot with the new State, never as a bare StateUpdate, because the
// topic is compacted: compaction keeps only the last value of a key, and a
// bare update would erase the entries.
type ObjectMetadata struct {
	ID                ObjectID
	MetadataPartition int32
	Bucket            string
	Key               string // object key in the store
	BrokerID          int32  // the uploading (leader) broker
	State             SegmentState
	EventTimestampMs  int64
	// Entries: one per slice. Each slice is one partition and one leader
	// epoch, so the uploading broker's leader epochs per partition are the
	// entries' LeaderEpoch fields (LeaderEpochs collects them).
	Entries []SliceEntry
}

func (*ObjectMetadata) Type() EventType { return TypeObject }

// Validate checks the invariants every decoded and every published
// ObjectMetadata satisfies.
func (m *ObjectMetadata) Validate() error {
	if m.Key == "" {
		return malformed("object %s: empty object key", m.ID)
	}
	if m.MetadataPartition < 0 {
		return malformed("object %s: metadata partition %d", m.ID, m.MetadataPartition)
	}
	if !m.State.Valid() {
		return malformed("object %s: state %d", m.ID, uint8(m.State))
	}
	for i := range m.Entries {
		if err := validateEntry(&m.Entries[i]); err != nil {
			return fmt.Errorf("object %s entry %d: %w", m.ID, i, err)
		}
	}
	return nil
}

func validateEntry(e *SliceEntry) error {
	switch {
	case e.Topic == "":
		return malformed("empty topic")
	case e.Partition < 0:
		return malformed("partition %d", e.Partition)
	case e.BaseOffset < 0 || e.LastOffset < e.BaseOffset:
		return malformed("offsets [%d, %d]", e.BaseOffset, e.LastOffset)
	case e.Position < 0 || e.Length < 0 || e.RawLength < 0:
		return malformed("position %d length %d raw length %d", e.Position, e.Length, e.RawLength)
	case e.Codec != CodecNone && e.Codec != CodecZstd:
		return malformed("codec %d", uint8(e.Codec))
	}
	return nil
}

// LeaderEpochs returns, per user partition, the highest leader epoch among
// the entries.
func (m *ObjectMetadata) LeaderEpochs() map[TopicPartition]int32 {
	out := make(map[TopicPartition]int32)
	for _, e := range m.Entries {
		if cur, ok := out[e.TopicPartition]; !ok || e.LeaderEpoch > cur {
			out[e.TopicPartition] = e.LeaderEpoch
		}
	}
	return out
}

// Ref names the part of the object this event describes.
func (m *ObjectMetadata) Ref() ObjectRef {
	return ObjectRef{ID: m.ID, MetadataPartition: m.MetadataPartition}
}

// StateUpdate is the KIP's RemoteWalCombinedLogSegmentMetadataUpdate: the
// new state of a known object part. kwal's own publisher sends snapshots
// instead (see ObjectMetadata); State still applies StateUpdates so other
// writers and tools can use them.
type StateUpdate struct {
	ID                ObjectID
	MetadataPartition int32
	State             SegmentState
	EventTimestampMs  int64
	BrokerID          int32
}

func (*StateUpdate) Type() EventType { return TypeStateUpdate }

func (u *StateUpdate) Validate() error {
	if u.MetadataPartition < 0 {
		return malformed("update %s: metadata partition %d", u.ID, u.MetadataPartition)
	}
	if !u.State.Valid() {
		return malformed("update %s: state %d", u.ID, uint8(u.State))
	}
	return nil
}

// Ref names the object part the update is for.
func (u *StateUpdate) Ref() ObjectRef {
	return ObjectRef{ID: u.ID, MetadataPartition: u.MetadataPartition}
}

// PartitionDelete is the deletion of a user partition's remote WAL data
// (Kafka's RemotePartitionDeleteMetadata).
type PartitionDelete struct {
	TopicPartition
	State            PartitionDeleteState
	EventTimestampMs int64
	BrokerID         int32
}

func (*PartitionDelete) Type() EventType { return TypePartitionDelete }

func (d *PartitionDelete) Validate() error {
	if d.Topic == "" || d.Partition < 0 {
		return malformed("partition delete: bad partition %s", d.TopicPartition)
	}
	if !d.State.Valid() {
		return malformed("partition delete %s: state %d", d.TopicPartition, uint8(d.State))
	}
	return nil
}

// Tombstone is a record with a nil value under an object key: the object
// part is gone and compaction may drop every earlier record of it.
type Tombstone struct {
	ObjectRef
}

func (*Tombstone) Type() EventType { return TypeTombstone }

func (t *Tombstone) Validate() error {
	if t.MetadataPartition < 0 {
		return malformed("tombstone %s: metadata partition %d", t.ID, t.MetadataPartition)
	}
	return nil
}

// ObjectRef names one part of an object: the object's events for one
// metadata partition. It is the record key of those events.
type ObjectRef struct {
	ID                ObjectID
	MetadataPartition int32
}

func (r ObjectRef) String() string { return fmt.Sprintf("%s/%d", r.ID, r.MetadataPartition) }

// Errors.
var (
	// ErrMalformedEvent: the bytes are truncated, fail their checksum or
	// bounds checks, or describe an impossible event. Decode wraps it.
	ErrMalformedEvent = errors.New("metadata: malformed event")
	// ErrUnknownObject: a StateUpdate names an object part State has never
	// seen. State ignores the update (the consumer logs it).
	ErrUnknownObject = errors.New("metadata: state update for unknown object")
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedEvent, fmt.Sprintf(format, args...))
}

// UnsupportedVersionError: the event was written in a format this reader
// does not know (normally a newer one). Old readers refuse new data instead of misreading it.
type UnsupportedVersionError struct {
	Got, Max uint8
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("metadata: event format version %d is not supported (this reader knows versions 1 to %d; a newer writer?)", e.Got, e.Max)
}

// IllegalTransitionError: an event would move an object (or a partition
// deletion) backwards or skip a state. State refuses it and changes nothing.
type IllegalTransitionError struct {
	Ref       ObjectRef      // zero for a partition deletion
	Partition TopicPartition // set for a partition deletion
	From, To  string
}

func (e *IllegalTransitionError) Error() string {
	if e.Partition.Topic != "" {
		return fmt.Sprintf("metadata: illegal partition delete transition of %s: %s -> %s", e.Partition, e.From, e.To)
	}
	return fmt.Sprintf("metadata: illegal transition of object %s: %s -> %s", e.Ref, e.From, e.To)
}

package metadata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func codecCases() []struct {
	name string
	ev   Event
} {
	return []struct {
		name string
		ev   Event
	}{
		{"object_finished", testObject(1, 7, CopySegmentFinished,
			testEntry("orders", 0, 0, 99), testEntry("orders", 3, 1000, 1049), testEntry("clicks", 12, 5, 5))},
		{"object_started_no_entries", testObject(2, 0, CopySegmentStarted)},
		{"object_delete_finished_extremes", &ObjectMetadata{
			ID: testID(9), MetadataPartition: math.MaxInt32, Key: "k", BrokerID: math.MinInt32,
			State: DeleteSegmentFinished, EventTimestampMs: math.MinInt64,
			Entries: []SliceEntry{{TopicPartition: TopicPartition{Topic: "t", Partition: math.MaxInt32}, LeaderEpoch: -1,
				BaseOffset: 0, LastOffset: math.MaxInt64, Position: math.MaxInt64, Length: 0,
				RawLength: math.MaxInt64, Codec: CodecNone, CRC32C: math.MaxUint32}},
		}},
		{"state_update", &StateUpdate{ID: testID(3), MetadataPartition: 49, State: DeleteSegmentStarted,
			EventTimestampMs: 1_700_000_000_123, BrokerID: 2}},
		{"partition_delete", &PartitionDelete{TopicPartition: TopicPartition{Topic: "orders", Partition: 4},
			State: DeletePartitionStarted, EventTimestampMs: 1_700_000_000_456, BrokerID: 3}},
		{"dead_range", &DeadRange{TopicPartition: TopicPartition{Topic: "orders", Partition: 4},
			LeaderEpoch: 7, StartOffset: 6, BrokerID: 2, EventTimestampMs: 1_700_000_000_789}},
		{"replicated_offset", &ReplicatedOffset{TopicPartition: TopicPartition{Topic: "orders", Partition: math.MaxInt32},
			LeaderEpoch: math.MaxInt32, Offset: math.MaxInt64, BrokerID: math.MinInt32, EventTimestampMs: math.MinInt64}},
	}
}

func TestCodecRoundTripAndGolden(t *testing.T) {
	for _, c := range codecCases() {
		t.Run(c.name, func(t *testing.T) {
			b, err := Encode(nil, c.ev)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", c.name+".bin")
			if *update {
				if err := os.WriteFile(golden, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestCodecRoundTripAndGolden -update)", err)
			}
			if !bytes.Equal(b, want) {
				t.Fatalf("encoding changed (a format change needs a new Version):\n got %x\nwant %x", b, want)
			}
			got, err := Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.ev) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, c.ev)
			}
			k := RecordKey(c.ev)
			got2, err := DecodeRecord(k, want)
			if err != nil || !reflect.DeepEqual(got2, c.ev) {
				t.Fatalf("DecodeRecord: %v %+v", err, got2)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	good, err := Encode(nil, codecCases()[0].ev)
	if err != nil {
		t.Fatal(err)
	}
	// withCRC re-seals a body so only the intended fault remains.
	withCRC := func(body []byte) []byte {
		ev := append([]byte(nil), body...)
		return appendCRC(ev)
	}
	body := good[:len(good)-4]
	cases := []struct {
		name    string
		in      []byte
		version bool
	}{
		{"empty", []byte{}, false},
		{"version_only", []byte{Version}, false},
		{"future_version", append([]byte{Version + 1}, good[1:]...), true},
		{"version_zero", append([]byte{0}, good[1:]...), true},
		{"crc_flip", append(append([]byte(nil), body...), 0, 0, 0, 0), false},
		{"payload_flip", func() []byte { b := append([]byte(nil), good...); b[10] ^= 1; return b }(), false},
		{"truncated", withCRC(body[:len(body)-3]), false},
		{"trailing", withCRC(append(append([]byte(nil), body...), 0)), false},
		{"unknown_type", withCRC(append([]byte{Version, 99}, body[2:]...)), false},
		{"tombstone_type", withCRC(append([]byte{Version, 0}, body[2:]...)), false},
		{"huge_count", withCRC([]byte{Version, byte(TypeObject),
			1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, // id
			0, 0, 1, 0, // mp, broker, state, ts
			0, 1, 'k', // bucket, key
			0xff, 0xff, 0xff, 0xff, 0x0f, // topics count
		}), false},
		{"bad_state", withCRC([]byte{Version, byte(TypeStateUpdate),
			1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 9, 0, 0}), false},
		{"topic_index_out_of_range", withCRC([]byte{Version, byte(TypeObject),
			1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
			0, 0, 1, 0, 0, 1, 'k',
			1, 1, 't', // one topic
			1,                                     // one entry
			5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // topic index 5
		}), false},
		// A version-1 writer never wrote the new types: such bytes are garbage.
		{"dead_range_in_version_1", withCRC([]byte{1, byte(TypeDeadRange), 1, 't', 0, 1, 6, 2, 0}), false},
		{"replicated_offset_in_version_1", withCRC([]byte{1, byte(TypeReplicatedOffset), 1, 't', 0, 1, 6, 2, 0}), false},
		{"dead_range_empty_topic", withCRC([]byte{2, byte(TypeDeadRange), 0, 0, 1, 6, 2, 0}), false},
		{"dead_range_epoch_over_int32", withCRC([]byte{2, byte(TypeDeadRange), 1, 't', 0, 0x80, 0x80, 0x80, 0x80, 0x08, 6, 2, 0}), false},
		{"mp_over_int32", withCRC([]byte{Version, byte(TypeStateUpdate),
			1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0x80, 0x80, 0x80, 0x80, 0x08, 1, 0, 0}), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := Decode(c.in)
			if err == nil {
				t.Fatalf("decoded %+v", ev)
			}
			var uv *UnsupportedVersionError
			if c.version {
				if !errors.As(err, &uv) || uv.Got != c.in[0] || uv.Max != Version {
					t.Fatalf("want *UnsupportedVersionError, got %v", err)
				}
				return
			}
			if !errors.Is(err, ErrMalformedEvent) {
				t.Fatalf("want ErrMalformedEvent, got %v", err)
			}
		})
	}
}

func appendCRC(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestEncodeRefusesInvalid(t *testing.T) {
	bad := []Event{
		testObject(1, 0, CopySegmentFinished, testEntry("", 0, 0, 1)),
		testObject(1, 0, CopySegmentFinished, testEntry("t", -1, 0, 1)),
		testObject(1, 0, CopySegmentFinished, testEntry("t", 0, 5, 4)),
		testObject(1, -1, CopySegmentFinished),
		testObject(1, 0, SegmentState(7)),
		&ObjectMetadata{ID: testID(1)},
		&StateUpdate{State: 4},
		&PartitionDelete{TopicPartition: TopicPartition{Topic: "t", Partition: 0}, State: 3},
		&DeadRange{TopicPartition: TopicPartition{Topic: "t", Partition: 0}, LeaderEpoch: -1},
		&DeadRange{TopicPartition: TopicPartition{Topic: "t", Partition: 0}, StartOffset: -1},
		&DeadRange{TopicPartition: TopicPartition{Partition: 0}},
		&ReplicatedOffset{TopicPartition: TopicPartition{Topic: "t", Partition: -1}},
		&ReplicatedOffset{TopicPartition: TopicPartition{Topic: "t", Partition: 0}, Offset: -1},
		&Tombstone{},
	}
	for i, ev := range bad {
		if _, err := Encode(nil, ev); !errors.Is(err, ErrMalformedEvent) {
			t.Errorf("%d: Encode(%+v) = %v, want ErrMalformedEvent", i, ev, err)
		}
	}
}

func TestDecodeRecordKeys(t *testing.T) {
	obj := testObject(1, 4, CopySegmentFinished, testEntry("t", 0, 0, 1))
	v, _ := Encode(nil, obj)
	// A value under another object's key is refused.
	if _, err := DecodeRecord(ObjectRecordKey(ObjectRef{testID(2), 4}), v); !errors.Is(err, ErrMalformedEvent) {
		t.Fatalf("mismatched key: %v", err)
	}
	ev, err := DecodeRecord(ObjectRecordKey(obj.Ref()), nil)
	if err != nil || !reflect.DeepEqual(ev, &Tombstone{obj.Ref()}) {
		t.Fatalf("tombstone: %v %+v", err, ev)
	}
	for _, k := range [][]byte{nil, {'o'}, PartitionDeleteRecordKey(TopicPartition{Topic: "t", Partition: 1}), append(ObjectRecordKey(obj.Ref()), 0)} {
		if _, err := DecodeRecord(k, nil); !errors.Is(err, ErrMalformedEvent) {
			t.Errorf("nil value under key %x: %v", k, err)
		}
	}
}

// TestVersionsOfEvents: object, update and partition-delete events keep
// format version 1 (so a version-1 reader reads them), the new types are
// written as version 2, and a version-1 reader refuses those clearly.
func TestVersionsOfEvents(t *testing.T) {
	for _, c := range codecCases() {
		b, err := Encode(nil, c.ev)
		if err != nil {
			t.Fatal(err)
		}
		want := uint8(1)
		if c.ev.Type() == TypeDeadRange || c.ev.Type() == TypeReplicatedOffset {
			want = 2
		}
		if b[0] != want {
			t.Errorf("%s written as version %d, want %d", c.name, b[0], want)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, c := range codecCases() {
		b, _ := Encode(nil, c.ev)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{Version, byte(TypeObject)})
	f.Add(appendCRC([]byte{1, byte(TypeDeadRange), 1, 't', 0, 1, 6, 2, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := Decode(b)
		if err != nil {
			var uv *UnsupportedVersionError
			if !errors.Is(err, ErrMalformedEvent) && !errors.As(err, &uv) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := Encode(nil, ev)
		if err != nil {
			t.Fatalf("decoded event does not re-encode: %v", err)
		}
		ev2, err := Decode(again)
		if err != nil || !reflect.DeepEqual(ev, ev2) {
			t.Fatalf("decode(encode(x)) != x: %v\n%+v\n%+v", err, ev, ev2)
		}
	})
}

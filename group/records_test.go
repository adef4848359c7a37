package group

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog"
)

func ptr(s string) *string { return &s }

func TestRecordsRoundTrip(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	cases := []struct {
		name       string
		key, value []byte
		want       Record
	}{
		{"offset", OffsetRecordKey(OffsetKey{"g", "t", 3}), EncodeOffset(Offset{Offset: 42, LeaderEpoch: 7, Metadata: ptr("m"), CommitTime: now}),
			Record{Key: OffsetKey{"g", "t", 3}, Offset: &Offset{Offset: 42, LeaderEpoch: 7, Metadata: ptr("m"), CommitTime: now}}},
		{"offset null metadata", OffsetRecordKey(OffsetKey{"g", "t", 0}), EncodeOffset(Offset{Offset: 0, LeaderEpoch: -1, CommitTime: now}),
			Record{Key: OffsetKey{"g", "t", 0}, Offset: &Offset{Offset: 0, LeaderEpoch: -1, CommitTime: now}}},
		{"offset tombstone", OffsetRecordKey(OffsetKey{"g", "t", 1}), nil, Record{Key: OffsetKey{"g", "t", 1}}},
		{"group", GroupRecordKey("g"), EncodeGroup(GroupRecord{ProtocolType: "consumer", Generation: 5, Protocol: "range", Leader: "m1", StateSince: now,
			Members: []MemberRecord{{MemberID: "m1", InstanceID: "i1", ClientID: "c", ClientHost: "/h", SessionTimeout: 10 * time.Second, RebalanceTimeout: time.Minute, Metadata: []byte{1}, Assignment: []byte{2}}}}),
			Record{IsGroup: true, Key: OffsetKey{Group: "g"}, GroupValue: &GroupRecord{ProtocolType: "consumer", Generation: 5, Protocol: "range", Leader: "m1", StateSince: now,
				Members: []MemberRecord{{MemberID: "m1", InstanceID: "i1", ClientID: "c", ClientHost: "/h", SessionTimeout: 10 * time.Second, RebalanceTimeout: time.Minute, Metadata: []byte{1}, Assignment: []byte{2}}}}}},
		{"group tombstone", GroupRecordKey("g"), nil, Record{IsGroup: true, Key: OffsetKey{Group: "g"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeRecord(tc.key, tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
			// Every truncation of the key or value is refused.
			for i := range tc.key {
				if _, err := DecodeRecord(tc.key[:i], tc.value); !errors.Is(err, ErrCorruptRecord) {
					t.Fatalf("key cut at %d: %v", i, err)
				}
			}
			for i := range tc.value {
				if _, err := DecodeRecord(tc.key, tc.value[:i]); !errors.Is(err, ErrCorruptRecord) {
					t.Fatalf("value cut at %d: %v", i, err)
				}
			}
			if _, err := DecodeRecord(tc.key, append(append([]byte{}, tc.value...), 0)); tc.value != nil && !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("trailing byte: %v", err)
			}
		})
	}
	if _, err := DecodeRecord([]byte{0, 9, 0, 0}, nil); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("unknown key version: %v", err)
	}
	if _, err := DecodeRecord(GroupRecordKey("g"), []byte{0, 1}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("unknown value version: %v", err)
	}
}

func TestBatchRoundTripAndCorruption(t *testing.T) {
	kvs := []KV{{OffsetRecordKey(OffsetKey{"g", "t", 0}), EncodeOffset(Offset{Offset: 1})}, {GroupRecordKey("g"), nil}}
	b := EncodeBatch(kvs, 123)
	if _, err := kafkalog.ValidateBatch(b); err != nil {
		t.Fatalf("encoded batch is invalid: %v", err)
	}
	var got []KV
	next, err := DecodeBatches(b, func(off int64, k, v []byte) error {
		got = append(got, KV{k, v})
		return nil
	})
	if err != nil || next != 2 || len(got) != 2 || !bytes.Equal(got[0].Key, kvs[0].Key) || !bytes.Equal(got[0].Value, kvs[0].Value) || got[1].Value != nil {
		t.Fatalf("decoded %v next %d err %v", got, next, err)
	}
	// A flipped bit anywhere after the CRC field is caught by the CRC.
	for i := 21; i < len(b); i++ {
		c := append([]byte{}, b...)
		c[i] ^= 1
		if _, err := DecodeBatches(c, func(int64, []byte, []byte) error { return nil }); err == nil {
			t.Fatalf("bit flip at %d not detected", i)
		}
	}
}

// Kafka's partition choice: abs(String.hashCode) % 50, values checked
// against Java.
func TestPartitionFor(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want int32
	}{
		{"", 0},
		{"a", 97 % 50},           // "a".hashCode() = 97
		{"hello", 99162322 % 50}, // "hello".hashCode() = 99162322
		{"\U0001F600", (0xD83D*31 + 0xDE00) % 50}, // hashed as its UTF-16 surrogate pair
		{"polygenelubricants", 0},                 // hashCode = Integer.MIN_VALUE: Utils.abs gives 0
	} {
		if got := PartitionFor(tc.id, 50); got != tc.want {
			t.Errorf("PartitionFor(%q) = %d, want %d", tc.id, got, tc.want)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(OffsetRecordKey(OffsetKey{"g", "t", 1}), EncodeOffset(Offset{Offset: 5, Metadata: ptr("x")}))
	f.Add(GroupRecordKey("g"), EncodeGroup(GroupRecord{ProtocolType: "consumer", Members: []MemberRecord{{MemberID: "m"}}}))
	f.Add([]byte{0, 1}, []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		rec, err := DecodeRecord(key, value)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// What decodes re-encodes to what decodes the same.
		var k, v []byte
		if rec.IsGroup {
			k = GroupRecordKey(rec.Key.Group)
			if rec.GroupValue != nil {
				v = EncodeGroup(*rec.GroupValue)
			}
		} else {
			k = OffsetRecordKey(rec.Key)
			if rec.Offset != nil {
				v = EncodeOffset(*rec.Offset)
			}
		}
		again, err := DecodeRecord(k, v)
		if err != nil || !reflect.DeepEqual(again, rec) {
			t.Fatalf("re-encoded record differs: %+v vs %+v (%v)", again, rec, err)
		}
	})
}

func FuzzDecodeBatches(f *testing.F) {
	f.Add(EncodeBatch([]KV{{GroupRecordKey("g"), EncodeGroup(GroupRecord{})}}, 1))
	f.Add(EncodeBatch([]KV{{OffsetRecordKey(OffsetKey{"g", "t", 0}), nil}, {[]byte("k"), []byte("v")}}, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeBatches(b, func(_ int64, k, v []byte) error {
			_, _ = DecodeRecord(k, v)
			return nil
		})
	})
}

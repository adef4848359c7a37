package kafkalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

func TestValidateBatch(t *testing.T) {
	valid := kafkalogtest.MakeBatch(100, 3, [][]byte{[]byte("a"), nil, []byte("ccc")}, 1_700_000_000_000)
	mutate := func(f func(b []byte) []byte) []byte {
		return f(bytes.Clone(valid))
	}
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b))
		return b
	}
	withHeaders := kafkalogtest.Encode(kafkalogtest.BatchSpec{Records: []kafkalogtest.Record{
		{Key: []byte("k"), Value: []byte("v"), TimestampDelta: 5, Headers: []kafkalogtest.Header{{Key: "h", Value: nil}}},
	}})
	compressed := kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: 4, RawRecords: []byte("zstd-ish garbage"), RecordCount: 10, LastOffsetDelta: 9})
	tests := []struct {
		name    string
		b       []byte
		wantErr error
	}{
		{"valid", valid, nil},
		{"headers and key", withHeaders, nil},
		{"compressed records opaque", compressed, nil},
		{"short", valid[:60], ErrCorruptBatch},
		{"torn", valid[:len(valid)-1], ErrCorruptBatch},
		{"trailing byte", append(bytes.Clone(valid), 0), ErrCorruptBatch},
		{"magic 1", mutate(func(b []byte) []byte { b[offMagic] = 1; return b }), ErrCorruptBatch},
		{"crc flipped", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrCorruptBatch},
		{"record count high", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offRecordCount:], 4)
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 3)
			return recrc(b)
		}), ErrCorruptBatch},
		{"record count zero", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offRecordCount:], 0); return recrc(b) }), ErrCorruptBatch},
		{"lastOffsetDelta wrong", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 5); return recrc(b) }), ErrCorruptBatch},
		{"bad codec", mutate(func(b []byte) []byte { b[offAttributes+1] |= 6; return recrc(b) }), ErrCorruptBatch},
		{"unknown attribute", mutate(func(b []byte) []byte { b[offAttributes] |= 1; return recrc(b) }), ErrCorruptBatch},
		{"record length garbage", mutate(func(b []byte) []byte { b[BatchHeaderSize] = 0x7f; return recrc(b) }), ErrCorruptBatch},
		{"compressed count below delta", kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: 1, RawRecords: []byte("x"), RecordCount: 3, LastOffsetDelta: 1}), ErrCorruptBatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ValidateBatch(tt.b)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("ValidateBatch = %v, want %v", err, tt.wantErr)
			}
			if err == nil && h.Size() != len(tt.b) {
				t.Fatalf("Size %d, len %d", h.Size(), len(tt.b))
			}
		})
	}
	if _, err := ValidateBatchMax(valid, len(valid)-1); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("over max: %v", err)
	}
}

func TestBatchHeaderFields(t *testing.T) {
	b := kafkalogtest.Encode(kafkalogtest.BatchSpec{
		BaseOffset: 7, LeaderEpoch: 9, Attributes: 16 | 8, BaseTimestamp: 1000, MaxTimestamp: 2000,
		ProducerID: 42, ProducerEpoch: 3, BaseSequence: 11,
		Records: []kafkalogtest.Record{{Value: []byte("x")}, {Value: []byte("y")}},
	})
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	want := BatchHeader{BaseOffset: 7, BatchLength: int32(len(b) - 12), PartitionLeaderEpoch: 9, Magic: 2, CRC: h.CRC,
		Attributes: 24, LastOffsetDelta: 1, BaseTimestamp: 1000, MaxTimestamp: 2000, ProducerID: 42, ProducerEpoch: 3,
		BaseSequence: 11, RecordCount: 2}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	if !h.Transactional() || !h.LogAppendTime() || h.Control() || h.Compression() != 0 || h.NextOffset() != 9 {
		t.Fatalf("accessors wrong: %+v", h)
	}
}

func TestStampingKeepsCRC(t *testing.T) {
	b := kafkalogtest.MakeBatchN(0, 0, 5, 10, 1)
	SetBaseOffset(b, 1<<40)
	SetPartitionLeaderEpoch(b, 77)
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 77 {
		t.Fatalf("stamped header %+v", h)
	}
}

func TestSplitBatches(t *testing.T) {
	b1 := kafkalogtest.MakeBatchN(0, 1, 3, 8, 1)
	b2 := kafkalogtest.MakeBatchN(3, 1, 2, 8, 1)
	all := append(bytes.Clone(b1), b2...)
	var got []int64
	if err := SplitBatches(all, func(h BatchHeader, b []byte) error {
		got = append(got, h.BaseOffset, int64(len(b)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, int64(len(b1)), 3, int64(len(b2))}; !equalInts(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for _, cut := range []int{1, 11, 12, 60, len(b2) - 1} {
		err := SplitBatches(all[:len(b1)+cut], func(BatchHeader, []byte) error { return nil })
		var ce *CorruptBatchError
		if !errors.As(err, &ce) || ce.Position != int64(len(b1)) {
			t.Fatalf("cut %d: err %v, want corrupt at %d", cut, err, len(b1))
		}
	}
	stop := errors.New("stop")
	if err := SplitBatches(all, func(BatchHeader, []byte) error { return stop }); err != stop {
		t.Fatalf("fn error not returned: %v", err)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzValidateBatch(f *testing.F) {
	f.Add(kafkalogtest.MakeBatchN(0, 0, 1, 1, 0))
	f.Add(kafkalogtest.MakeBatchN(5, 2, 4, 30, 1_700_000_000_000))
	f.Add(kafkalogtest.Encode(kafkalogtest.BatchSpec{Records: []kafkalogtest.Record{{Key: []byte("k"), Headers: []kafkalogtest.Header{{Key: "a", Value: []byte("b")}}}}}))
	f.Add(kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: 3, RawRecords: []byte{1, 2, 3}, RecordCount: 2, LastOffsetDelta: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ValidateBatch(b)
		if err != nil {
			_ = SplitBatches(b, func(BatchHeader, []byte) error { return nil })
			return
		}
		// A valid batch survives stamping and splits back to itself.
		c := bytes.Clone(b)
		SetBaseOffset(c, h.BaseOffset+1)
		SetPartitionLeaderEpoch(c, h.PartitionLeaderEpoch+1)
		h2, err := ValidateBatch(c)
		if err != nil || h2.BaseOffset != h.BaseOffset+1 || h2.CRC != h.CRC {
			t.Fatalf("stamped batch invalid: %v", err)
		}
		n := 0
		if err := SplitBatches(append(bytes.Clone(b), b...), func(hh BatchHeader, bb []byte) error {
			if !bytes.Equal(bb, b) || hh != h {
				t.Fatalf("split batch differs")
			}
			n++
			return nil
		}); err != nil || n != 2 {
			t.Fatalf("split: %v, %d batches", err, n)
		}
	})
}

func TestWalkHeaders(t *testing.T) {
	var b []byte
	for i := int64(0); i < 3; i++ {
		b = append(b, kafkalogtest.MakeBatchN(i*4, 2, 4, 10, 1)...)
	}
	var bases []int64
	if err := WalkHeaders(b, func(h BatchHeader) error { bases = append(bases, h.BaseOffset); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(bases) != 3 || bases[2] != 8 {
		t.Fatalf("bases %v", bases)
	}
	if err := WalkHeaders(b[:len(b)-1], func(BatchHeader) error { return nil }); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("torn tail: %v", err)
	}
}

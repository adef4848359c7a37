package kafkalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

var allCodecs = []int{0, kafkalogtest.Gzip, kafkalogtest.Snappy, kafkalogtest.LZ4, kafkalogtest.Zstd}

func threeRecords() kafkalogtest.BatchSpec {
	return kafkalogtest.BatchSpec{BaseTimestamp: 1_700_000_000_000, ProducerID: 7, BaseSequence: 0, Records: []kafkalogtest.Record{
		{Key: []byte("k"), Value: []byte("a"), Headers: []kafkalogtest.Header{{Key: "h", Value: []byte("v")}}},
		{Value: nil, TimestampDelta: 9},
		{Value: bytes.Repeat([]byte("c"), 300), TimestampDelta: 4},
	}}
}

// withRaw builds a batch whose records section is raw, compressed with
// codec, claiming count records and lastOffsetDelta; the CRC is right.
func withRaw(codec int, raw []byte, count, lastDelta int32) []byte {
	return kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: int16(codec), RawRecords: kafkalogtest.Compress(codec, raw), RecordCount: count, LastOffsetDelta: lastDelta, BaseTimestamp: 1})
}

func codecTestName(c int) string { return codecName(int8(c)) }

// offsetRangeErr is the refusal of a header whose lastOffsetDelta and
// record count disagree: Kafka's INVALID_RECORD uncompressed, corrupt
// compressed.
func offsetRangeErr(codec int) error {
	if codec == 0 {
		return ErrInvalidRecord
	}
	return ErrCorruptBatch
}

func TestBatchValidatorAcceptsEveryCodec(t *testing.T) {
	v := NewBatchValidator(0, 0)
	for _, c := range allCodecs {
		b := kafkalogtest.EncodeCompressed(threeRecords(), c)
		vb, err := v.Validate(b)
		if err != nil {
			t.Fatalf("%s: %v", codecTestName(c), err)
		}
		if vb.Header().RecordCount != 3 || vb.MaxTimestamp() != 1_700_000_000_009 || !bytes.Equal(vb.Bytes(), b) {
			t.Fatalf("%s: header %+v max %d", codecTestName(c), vb.Header(), vb.MaxTimestamp())
		}
		// The pooled state is reused: validate twice.
		if _, err := v.Validate(b); err != nil {
			t.Fatalf("%s again: %v", codecTestName(c), err)
		}
	}
	raw := kafkalogtest.Records(threeRecords())
	x := kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: kafkalogtest.Snappy, RawRecords: kafkalogtest.XerialSnappy(raw, 100), RecordCount: 3, LastOffsetDelta: 2})
	if _, err := v.Validate(x); err != nil {
		t.Fatalf("xerial snappy: %v", err)
	}
}

func TestBatchValidatorRefuses(t *testing.T) {
	raw := kafkalogtest.Records(threeRecords())
	one := kafkalogtest.Records(kafkalogtest.BatchSpec{Records: []kafkalogtest.Record{{Value: []byte("x")}}})
	badOffset := bytes.Clone(raw)
	badOffset[3] = 2 // record 0: length, attributes, timestampDelta, then offsetDelta: zigzag 1
	type tc struct {
		name string
		b    []byte
		want error
	}
	var tests []tc
	for _, c := range allCodecs {
		n := codecTestName(c)
		tests = append(tests,
			tc{n + "/claims 1000 records holding one", withRaw(c, one, 1000, 999), ErrCorruptBatch},
			tc{n + "/claims 2 records holding 3", withRaw(c, raw, 2, 1), ErrCorruptBatch},
			// Kafka's INVALID_RECORD uncompressed; CORRUPT_MESSAGE compressed (checkClientRules).
			tc{n + "/lastOffsetDelta 2^31-1", withRaw(c, one, 1, math.MaxInt32), offsetRangeErr(c)},
			tc{n + "/lastOffsetDelta 2^31-1 and count 2^31-1", withRaw(c, one, math.MaxInt32, math.MaxInt32), offsetRangeErr(c)},
			tc{n + "/lastOffsetDelta below count", withRaw(c, raw, 3, 1), offsetRangeErr(c)},
			tc{n + "/lastOffsetDelta above count", withRaw(c, raw, 3, 5), offsetRangeErr(c)},
			tc{n + "/lastOffsetDelta negative", withRaw(c, raw, 3, -7), offsetRangeErr(c)},
			tc{n + "/record count 0", withRaw(c, raw, 0, -1), offsetRangeErr(c)},
			tc{n + "/bytes after the last record", withRaw(c, append(bytes.Clone(raw), 0), 3, 2), ErrCorruptBatch},
			tc{n + "/offsetDelta out of order", withRaw(c, badOffset, 3, 2), ErrCorruptBatch},
			tc{n + "/record body cut", withRaw(c, raw[:len(raw)-1], 3, 2), ErrCorruptBatch},
		)
		if c != 0 {
			tests = append(tests,
				tc{n + "/garbage inside, valid crc", kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: int16(c), RawRecords: []byte("this is not compressed at all"), RecordCount: 1}), ErrCorruptBatch},
				tc{n + "/compressed stream cut", func() []byte {
					z := kafkalogtest.Compress(c, raw)
					return kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: int16(c), RawRecords: z[:len(z)-3], RecordCount: 3, LastOffsetDelta: 2})
				}(), ErrCorruptBatch},
			)
		}
	}
	gz := kafkalogtest.Compress(kafkalogtest.Gzip, raw)
	gz[len(gz)-6] ^= 0xff // the gzip trailer's CRC32 of the data
	tests = append(tests,
		tc{"gzip checksum of the data wrong", kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: 1, RawRecords: gz, RecordCount: 3, LastOffsetDelta: 2}), ErrCorruptBatch},
		tc{"control batch", kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: 32, Records: []kafkalogtest.Record{{Value: []byte("x")}}}), ErrInvalidRecord},
		tc{"LogAppendTime from a client", kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: 8, Records: []kafkalogtest.Record{{Value: []byte("x")}}}), ErrInvalidTimestamp},
		tc{"producer id without sequence", kafkalogtest.Encode(kafkalogtest.BatchSpec{ProducerID: 5, BaseSequence: -1, Records: []kafkalogtest.Record{{Value: []byte("x")}}}), ErrInvalidRecord},
		tc{"xerial chunk torn", kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: 2, RawRecords: func() []byte { x := kafkalogtest.XerialSnappy(raw, 100); return x[:len(x)-2] }(), RecordCount: 3, LastOffsetDelta: 2}), ErrCorruptBatch},
		tc{"crc wrong", func() []byte { b := kafkalogtest.EncodeCompressed(threeRecords(), 1); b[len(b)-1] ^= 1; return b }(), ErrCorruptBatch},
		tc{"unknown codec", func() []byte {
			b := kafkalogtest.EncodeCompressed(threeRecords(), 1)
			b[offAttributes+1] |= 7
			binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b))
			return b
		}(), ErrCorruptBatch},
	)
	v := NewBatchValidator(0, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Validate(tt.b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
			if errors.Is(tt.want, ErrCorruptBatch) != errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("%v matches the wrong sentinel", err)
			}
		})
	}
}

// A compressed batch whose records decompress past the bound is refused
// before the bound is exceeded in memory; under the bound it passes.
func TestBatchValidatorDecompressionBound(t *testing.T) {
	spec := kafkalogtest.BatchSpec{Records: []kafkalogtest.Record{{Value: make([]byte, 1<<20)}, {Value: make([]byte, 1<<20)}}}
	for _, c := range allCodecs[1:] {
		b := kafkalogtest.EncodeCompressed(spec, c)
		if len(b) > 256<<10 {
			t.Fatalf("%s: %d bytes, expected zeros to compress", codecTestName(c), len(b))
		}
		if _, err := NewBatchValidator(0, 1<<20).Validate(b); !errors.Is(err, ErrCorruptBatch) {
			t.Fatalf("%s over the bound: %v", codecTestName(c), err)
		}
		if _, err := NewBatchValidator(0, 3<<20).Validate(b); err != nil {
			t.Fatalf("%s under the bound: %v", codecTestName(c), err)
		}
	}
}

func TestAppendValidatedAsLeader(t *testing.T) {
	l := newEnv(t, Config{}).log
	v := NewBatchValidator(0, 0)
	spec := threeRecords()
	spec.MaxTimestamp = 5 // wrong: the records say base+9
	b := kafkalogtest.EncodeCompressed(spec, kafkalogtest.Zstd)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], 5)
	binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b))
	vb, err := v.Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.AppendValidatedAsLeader(vb, 3)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 2 || l.LogEndOffset() != 3 {
		t.Fatalf("info %+v leo %d", info, l.LogEndOffset())
	}
	got, err := l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ValidateBatch(got)
	if err != nil {
		t.Fatalf("stored batch: %v", err)
	}
	if _, err := v.Validate(got); err != nil {
		t.Fatalf("stored batch no longer validates: %v", err)
	}
	if h.MaxTimestamp != 1_700_000_000_009 || h.PartitionLeaderEpoch != 3 {
		t.Fatalf("stored header %+v", h)
	}
	if binary.BigEndian.Uint64(b[offMaxTimestamp:]) != 5 {
		t.Fatal("the caller's bytes were modified")
	}
}

// FuzzBatchValidator reaches the decompressors and the record walk: the
// fuzzer mutates the (compressed) records section, the codec, the
// claimed count and lastOffsetDelta, and the batch around them gets a
// right CRC. A compressed batch is refused only as corrupt. Whatever the
// bytes, Validate must not panic or allocate past its bound, and what it
// accepts must be a structurally valid batch whose header agrees with it.
func FuzzBatchValidator(f *testing.F) {
	raw := kafkalogtest.Records(threeRecords())
	for _, c := range allCodecs {
		f.Add(uint8(c), int32(3), int32(2), kafkalogtest.Compress(c, raw))
		f.Add(uint8(c), int32(1000), int32(999), kafkalogtest.Compress(c, raw[:20]))
		f.Add(uint8(c), int32(3), int32(math.MaxInt32), kafkalogtest.Compress(c, raw))
	}
	f.Add(uint8(2), int32(3), int32(2), kafkalogtest.XerialSnappy(raw, 50))
	v := NewBatchValidator(0, 1<<20)
	f.Fuzz(func(t *testing.T, codec uint8, count, lastDelta int32, recs []byte) {
		b := kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: int16(codec & 7), RawRecords: recs, RecordCount: count, LastOffsetDelta: lastDelta, BaseTimestamp: 10})
		vb, err := v.Validate(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) && !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrBatchTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
			// Every refusal of a compressed batch for what its bytes
			// hold is CORRUPT_MESSAGE (only too large stays apart).
			if codec&7 != 0 && !errors.Is(err, ErrCorruptBatch) && !errors.Is(err, ErrBatchTooLarge) {
				t.Fatalf("compressed batch refused with %v, want a corrupt batch", err)
			}
			return
		}
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatalf("Validate accepted what ValidateBatch refuses: %v", err)
		}
		if h != vb.Header() || h.RecordCount != count || h.LastOffsetDelta != count-1 || lastDelta != count-1 {
			t.Fatalf("header %+v vs %+v", h, vb.Header())
		}
	})
}

// A few bytes must not make the validator allocate much: a record that
// claims 60 MiB, a snappy block that claims 60 MiB, a zstd frame that asks
// for a 64 MiB window. Each is refused, having allocated little.
func TestBatchValidatorNoAllocationAmplification(t *testing.T) {
	hugeRecord := binary.AppendVarint(nil, 60<<20)
	snappyLie := binary.AppendUvarint(nil, 60<<20) // a raw block's decoded length, then nothing
	snappyLie = append(snappyLie, 0)
	zstdBigWindow := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 16 << 3, 0x01, 0x00, 0x00}
	cases := []struct {
		name string
		b    []byte
	}{
		{"gzip record claims 60 MiB", withRaw(kafkalogtest.Gzip, hugeRecord, 1, 0)},
		{"zstd record claims 60 MiB", withRaw(kafkalogtest.Zstd, hugeRecord, 1, 0)},
		{"snappy block claims 60 MiB", kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: kafkalogtest.Snappy, RawRecords: snappyLie, RecordCount: 1})},
		{"zstd window 64 MiB", kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: kafkalogtest.Zstd, RawRecords: zstdBigWindow, RecordCount: 1})},
	}
	v := NewBatchValidator(0, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := v.Validate(tc.b)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("Validate = %v", err)
			}
			if d := after.TotalAlloc - before.TotalAlloc; d > 8<<20 {
				t.Fatalf("allocated %d bytes for a %d byte batch", d, len(tc.b))
			}
		})
	}
}

package kafkalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// legacyMsg encodes one message with kmsg's own legacy types (an encoder
// independent of ours), crc filled in.
func legacyMsg(magic int8, offset int64, attrs int8, ts int64, key, value []byte) []byte {
	var b []byte
	if magic == 0 {
		m := kmsg.MessageV0{Offset: offset, Magic: 0, Attributes: attrs, Key: key, Value: value}
		b = m.AppendTo(nil)
	} else {
		m := kmsg.MessageV1{Offset: offset, Magic: 1, Attributes: attrs, Timestamp: ts, Key: key, Value: value}
		b = m.AppendTo(nil)
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[16:]))
	return b
}

type legacyCase struct {
	key, value []byte
	ts         int64
}

var legacyCases = []legacyCase{
	{[]byte("k1"), []byte("v1"), 1000},
	{nil, []byte("no key"), 1001},
	{[]byte("tomb"), nil, 1003},
	{[]byte{}, []byte{}, 999},
}

func legacySet(magic int8, cs []legacyCase) []byte {
	var set []byte
	for i, c := range cs {
		set = append(set, legacyMsg(magic, int64(i), 0, c.ts, c.key, c.value)...)
	}
	return set
}

// checkUp up-converts set and compares every record with want; it
// returns the batch.
func checkUp(t *testing.T, set []byte, magic int8, want []legacyCase, codec int8, wrapperTs int64) []byte {
	t.Helper()
	b, err := UpConvert(set, 1<<20)
	if err != nil {
		t.Fatalf("UpConvert: %v", err)
	}
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatalf("up-converted batch does not validate: %v", err)
	}
	if h.Compression() != codec || h.RecordCount != int32(len(want)) || h.ProducerID != -1 || h.PartitionLeaderEpoch != -1 {
		t.Fatalf("header %+v, want codec %d, %d records, no producer", h, codec, len(want))
	}
	i := 0
	if err := EachRecord(b, func(r Record) {
		c := want[i]
		ts := c.ts
		if magic == 0 {
			ts = -1
		}
		if wrapperTs != 0 {
			ts = wrapperTs
		}
		if r.Offset != int64(i) || !bytes.Equal(r.Key, c.key) || (r.Key == nil) != (c.key == nil) ||
			!bytes.Equal(r.Value, c.value) || (r.Value == nil) != (c.value == nil) || r.Timestamp != ts {
			t.Fatalf("record %d: %+v, want %+v (ts %d)", i, r, c, ts)
		}
		i++
	}); err != nil {
		t.Fatal(err)
	}
	if i != len(want) {
		t.Fatalf("%d records, want %d", i, len(want))
	}
	return b
}

func TestUpConvertUncompressed(t *testing.T) {
	for _, magic := range []int8{0, 1} {
		checkUp(t, legacySet(magic, legacyCases), magic, legacyCases, CodecNone, 0)
	}
}

// A compressed wrapper (gzip, snappy in xerial framing, lz4) is inflated
// and the batch keeps the producer's codec; a v1 LogAppendTime wrapper
// gives its timestamp to every inner record.
func TestUpConvertCompressed(t *testing.T) {
	for _, magic := range []int8{0, 1} {
		for _, codec := range []int8{CodecGzip, CodecSnappy, CodecLZ4} {
			inner := legacySet(magic, legacyCases)
			z, err := compressRecords(codec, inner)
			if err != nil {
				t.Fatal(err)
			}
			set := legacyMsg(magic, int64(len(legacyCases)-1), codec, 5000, nil, z)
			checkUp(t, set, magic, legacyCases, codec, 0)
			if magic == 1 {
				set = legacyMsg(1, 3, codec|8, 7777, nil, z)
				checkUp(t, set, 1, legacyCases, codec, 7777)
			}
		}
	}
}

// Corruptions are refused with *CorruptBatchError, never converted.
func TestUpConvertRefuses(t *testing.T) {
	good := legacySet(1, legacyCases)
	z, _ := compressRecords(CodecGzip, legacySet(0, legacyCases))
	nested, _ := compressRecords(CodecGzip, legacyMsg(1, 0, CodecGzip, 1, nil, z))
	cases := map[string][]byte{
		"empty":       {},
		"crc":         func() []byte { b := bytes.Clone(good); b[len(b)-1] ^= 1; return b }(),
		"truncated":   good[:len(good)-3],
		"magic 2":     func() []byte { b := legacyMsg(1, 0, 0, 1, nil, []byte("x")); b[16] = 2; b[12] = 0; return b }(),
		"zstd":        legacyMsg(1, 0, CodecZstd, 1, nil, []byte("x")),
		"not gzip":    legacyMsg(1, 0, CodecGzip, 1, nil, []byte("not gzip")),
		"mixed magic": legacyMsg(1, 3, CodecGzip, 1, nil, z),
		"nested":      legacyMsg(1, 0, CodecGzip, 1, nil, nested),
		"huge size":   func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[8:], 1<<30); return b }(),
	}
	for name, set := range cases {
		if _, err := UpConvert(set, 1<<20); !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("%s: err %v, want ErrCorruptBatch", name, err)
		}
	}
	// A wrapper that inflates past the limit.
	big, _ := compressRecords(CodecGzip, legacySet(1, []legacyCase{{nil, make([]byte, 4096), 1}}))
	if _, err := UpConvert(legacyMsg(1, 0, CodecGzip, 1, nil, big), 1000); !errors.Is(err, ErrCorruptBatch) {
		t.Errorf("over the limit: err %v", err)
	}
}

// DownConvert is checked against kmsg's decoding of legacy messages:
// offsets (with gaps), keys, nulls, timestamps, LogAppendTime, control
// batches skipped, a trailing partial batch ignored.
func TestDownConvert(t *testing.T) {
	up, err := UpConvert(legacySet(1, legacyCases), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	first := bytes.Clone(up)
	SetBaseOffset(first, 10)
	second := bytes.Clone(up)
	SetBaseOffset(second, 20)
	binary.BigEndian.PutUint16(second[offAttributes:], 8) // LogAppendTime
	binary.BigEndian.PutUint32(second[offCRC:], BatchCRC(second))
	control := bytes.Clone(up)
	SetBaseOffset(control, 30)
	binary.BigEndian.PutUint16(control[offAttributes:], 32)
	binary.BigEndian.PutUint32(control[offCRC:], BatchCRC(control))
	data := append(append(append(append([]byte{}, first...), second...), control...), up[:20]...)
	for _, magic := range []int8{0, 1} {
		out, err := DownConvert(data, magic)
		if err != nil {
			t.Fatal(err)
		}
		var got []kmsg.MessageV1
		for rest := out; len(rest) > 0; {
			size := int(binary.BigEndian.Uint32(rest[8:])) + 12
			m := rest[:size]
			if crc := binary.BigEndian.Uint32(m[12:]); crc != crc32.ChecksumIEEE(m[16:]) {
				t.Fatalf("magic %d: bad crc", magic)
			}
			var v kmsg.MessageV1
			if magic == 0 {
				var v0 kmsg.MessageV0
				if err := v0.ReadFrom(m); err != nil {
					t.Fatal(err)
				}
				v = kmsg.MessageV1{Offset: v0.Offset, Magic: v0.Magic, Attributes: v0.Attributes, Key: v0.Key, Value: v0.Value}
			} else if err := v.ReadFrom(m); err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
			rest = rest[size:]
		}
		if len(got) != 2*len(legacyCases) {
			t.Fatalf("magic %d: %d messages, want %d", magic, len(got), 2*len(legacyCases))
		}
		for i, m := range got {
			c := legacyCases[i%len(legacyCases)]
			wantOff := int64(10 + i)
			wantTs, wantAttrs := c.ts, int8(0)
			if i >= len(legacyCases) {
				wantOff = int64(20 + i - len(legacyCases))
				wantTs, wantAttrs = 1003, 8 // the batch's max timestamp
			}
			if magic == 0 {
				wantTs, wantAttrs = 0, 0
			}
			if m.Magic != magic || m.Offset != wantOff || m.Attributes != wantAttrs || m.Timestamp != wantTs ||
				!bytes.Equal(m.Key, c.key) || (m.Key == nil) != (c.key == nil) || !bytes.Equal(m.Value, c.value) || (m.Value == nil) != (c.value == nil) {
				t.Fatalf("magic %d message %d: %+v, want offset %d ts %d attrs %d %+v", magic, i, m, wantOff, wantTs, wantAttrs, c)
			}
		}
	}
}

func FuzzUpConvert(f *testing.F) {
	f.Add(legacySet(0, legacyCases))
	f.Add(legacySet(1, legacyCases))
	z, _ := compressRecords(CodecGzip, legacySet(1, legacyCases))
	f.Add(legacyMsg(1, 3, CodecGzip, 1, nil, z))
	f.Fuzz(func(t *testing.T, set []byte) {
		b, err := UpConvert(set, 1<<16)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if _, err := ValidateBatch(b); err != nil {
			t.Fatalf("converted batch invalid: %v", err)
		}
		if _, err := DownConvert(b, 1); err != nil {
			t.Fatalf("down-converting a converted batch: %v", err)
		}
	})
}

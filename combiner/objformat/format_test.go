package objformat

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func tp(t string, p int32) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: t, Partition: p}
}

func sampleInputs() []Input {
	return []Input{
		{TopicPartition: tp("orders", 0), LeaderEpoch: 3, BaseOffset: 100, LastOffset: 104, Data: bytes.Repeat([]byte("batch-a-"), 8)},
		{TopicPartition: tp("clicks", 7), LeaderEpoch: 1, BaseOffset: 0, LastOffset: 0, Data: []byte("one batch")},
		{TopicPartition: tp("orders", 0), LeaderEpoch: 3, BaseOffset: 105, LastOffset: 110, Data: bytes.Repeat([]byte{0xAB}, 40)},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, codec := range []metadata.Codec{metadata.CodecNone, metadata.CodecZstd} {
		t.Run("codec="+codec.String(), func(t *testing.T) {
			in := sampleInputs()
			obj, entries, err := Encode(in, codec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeFooter(obj)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(entries) {
				t.Fatalf("decoded %d entries, encoded %d", len(got), len(entries))
			}
			for i := range got {
				if got[i] != entries[i] {
					t.Errorf("entry %d: decoded %+v, encoded %+v", i, got[i], entries[i])
				}
				if got[i].TopicPartition != in[i].TopicPartition || got[i].BaseOffset != in[i].BaseOffset ||
					got[i].LastOffset != in[i].LastOffset || got[i].LeaderEpoch != in[i].LeaderEpoch || got[i].Codec != codec {
					t.Errorf("entry %d does not describe its input: %+v", i, got[i])
				}
				stored, err := StoredBytes(obj, got[i])
				if err != nil {
					t.Fatal(err)
				}
				raw, err := ReadSlice(stored, got[i])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(raw, in[i].Data) {
					t.Errorf("slice %d: read %q, wrote %q", i, raw, in[i].Data)
				}
			}
			fe, size, err := ReadFooter(context.Background(), bytesReader(obj), "k")
			if err != nil {
				t.Fatal(err)
			}
			if size != int64(len(obj)) || len(fe) != len(entries) || fe[2] != entries[2] {
				t.Errorf("ReadFooter: size %d entries %d, want %d %d", size, len(fe), len(obj), len(entries))
			}
		})
	}
}

func TestGolden(t *testing.T) {
	for _, codec := range []metadata.Codec{metadata.CodecNone, metadata.CodecZstd} {
		t.Run("codec="+codec.String(), func(t *testing.T) {
			obj, _, err := Encode(sampleInputs(), codec)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "object_"+codec.String()+".hexdump")
			dump := []byte(hex.Dump(obj))
			if *update {
				if err := os.WriteFile(path, dump, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(dump, want) {
				t.Errorf("object format changed; if intended, run go test -update and bump Version if old readers break.\ngot:\n%s\nwant:\n%s", dump, want)
			}
		})
	}
}

func TestEncodeRefuses(t *testing.T) {
	ok := Input{TopicPartition: tp("t", 0), BaseOffset: 1, LastOffset: 1, Data: []byte("x")}
	mod := func(f func(*Input)) []Input { c := ok; f(&c); return []Input{c} }
	cases := []struct {
		name  string
		in    []Input
		codec metadata.Codec
	}{
		{"no slices", nil, metadata.CodecNone},
		{"empty data", mod(func(i *Input) { i.Data = nil }), metadata.CodecNone},
		{"empty topic", mod(func(i *Input) { i.Topic = "" }), metadata.CodecNone},
		{"long topic", mod(func(i *Input) { i.Topic = string(bytes.Repeat([]byte("t"), 250)) }), metadata.CodecNone},
		{"negative partition", mod(func(i *Input) { i.Partition = -1 }), metadata.CodecNone},
		{"last before base", mod(func(i *Input) { i.LastOffset = 0 }), metadata.CodecNone},
		{"partition out of order", []Input{ok, ok}, metadata.CodecNone},
		{"unknown codec", []Input{ok}, metadata.Codec(9)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := Encode(c.in, c.codec); !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("Encode: %v, want ErrInvalidInput", err)
			}
		})
	}
}

// refooter rewrites obj's footer with the entries changed by f and a fresh
// CRC, so a test reaches the entry checks behind the footer checksum.
func refooter(t *testing.T, obj []byte, f func([]metadata.SliceEntry)) []byte {
	t.Helper()
	entries, err := DecodeFooter(obj)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := ParseTrailer(obj[len(obj)-TrailerSize:])
	footerStart := len(obj) - TrailerSize - int(tr.FooterLen)
	f(entries)
	out := append([]byte(nil), obj[:footerStart]...)
	fs := len(out)
	out = binary.BigEndian.AppendUint32(out, uint32(len(entries)))
	for i := range entries {
		out = appendEntry(out, &entries[i])
	}
	footer := out[fs:]
	out = binary.BigEndian.AppendUint32(out, uint32(len(footer)))
	out = binary.BigEndian.AppendUint32(out, CRC32C(footer))
	out = binary.BigEndian.AppendUint16(out, Version)
	out = binary.BigEndian.AppendUint16(out, 0)
	return append(out, trailerMagic[:]...)
}

func TestDecodeRefusesCorruption(t *testing.T) {
	obj, _, err := Encode(sampleInputs(), metadata.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(off int) []byte {
		c := bytes.Clone(obj)
		c[off] ^= 0x01
		return c
	}
	n := len(obj)
	cases := []struct {
		name string
		obj  []byte
	}{
		{"empty", nil},
		{"header only", obj[:HeaderSize]},
		{"truncated tail", obj[:n-1]},
		{"truncated to half", obj[:n/2]},
		{"header magic", flip(0)},
		{"header version", flip(5)},
		{"header flags", flip(7)},
		{"trailer magic", flip(n - 1)},
		{"trailer version", flip(n - 7)},
		{"footer CRC", flip(n - 12)},
		{"footer length", flip(n - 16)},
		{"footer byte", flip(n - TrailerSize - 3)},
		{"extra byte before footer", append(append(bytes.Clone(obj[:HeaderSize]), 0), obj[HeaderSize:]...)},
		{"position gap", refooter(t, obj, func(e []metadata.SliceEntry) { e[1].Position++ })},
		{"overlap", refooter(t, obj, func(e []metadata.SliceEntry) { e[1].Position--; e[1].Length++ })},
		{"length past footer", refooter(t, obj, func(e []metadata.SliceEntry) { e[2].Length += 10; e[2].RawLength += 10 })},
		{"negative length", refooter(t, obj, func(e []metadata.SliceEntry) { e[0].Length = -1 })},
		{"huge length", refooter(t, obj, func(e []metadata.SliceEntry) { e[0].Length = 1 << 62; e[0].RawLength = 1 << 62 })},
		{"raw length mismatch", refooter(t, obj, func(e []metadata.SliceEntry) { e[0].RawLength++ })},
		{"unknown codec", refooter(t, obj, func(e []metadata.SliceEntry) { e[0].Codec = 7 })},
		{"offsets reversed", refooter(t, obj, func(e []metadata.SliceEntry) { e[0].LastOffset = e[0].BaseOffset - 1 })},
		{"partition offsets overlap", refooter(t, obj, func(e []metadata.SliceEntry) { e[2].BaseOffset = e[0].LastOffset })},
		{"negative epoch", refooter(t, obj, func(e []metadata.SliceEntry) { e[1].LeaderEpoch = -1 })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeFooter(c.obj)
			if !errors.Is(err, ErrCorruptObject) {
				t.Fatalf("DecodeFooter: %v, want ErrCorruptObject", err)
			}
		})
	}
}

func TestReadSliceRefuses(t *testing.T) {
	raw := bytes.Repeat([]byte("kafka "), 1000)
	obj, entries, err := Encode([]Input{{TopicPartition: tp("t", 0), Data: raw}}, metadata.CodecZstd)
	if err != nil {
		t.Fatal(err)
	}
	e := entries[0]
	stored, _ := StoredBytes(obj, e)

	// A bomb: a small frame that inflates far past the entry's raw length,
	// with the entry's CRC made to match so only the size bound stops it.
	enc, _ := zstd.NewWriter(nil)
	bomb := enc.EncodeAll(make([]byte, 64<<20), nil)
	_ = enc.Close()
	bombNoFCS := bytes.Clone(bomb)

	cases := []struct {
		name   string
		stored []byte
		e      metadata.SliceEntry
	}{
		{"short", stored[:len(stored)-1], e},
		{"bad crc", func() []byte { c := bytes.Clone(stored); c[len(c)/2] ^= 1; return c }(), e},
		{"raw length too small", stored, func() metadata.SliceEntry { x := e; x.RawLength--; return x }()},
		{"raw length too big", stored, func() metadata.SliceEntry { x := e; x.RawLength++; return x }()},
		{"raw length over max", stored, func() metadata.SliceEntry { x := e; x.RawLength = MaxRawLength + 1; return x }()},
		{"bomb", bomb, metadata.SliceEntry{TopicPartition: e.TopicPartition, Position: 8, Length: int64(len(bomb)), RawLength: 1024, Codec: metadata.CodecZstd, CRC32C: CRC32C(bomb)}},
		{"bomb without size check", stripFCS(t, bombNoFCS), func() metadata.SliceEntry {
			b := stripFCS(t, bombNoFCS)
			return metadata.SliceEntry{TopicPartition: e.TopicPartition, Position: 8, Length: int64(len(b)), RawLength: 1024, Codec: metadata.CodecZstd, CRC32C: CRC32C(b)}
		}()},
		{"not zstd", []byte("plain"), metadata.SliceEntry{Position: 8, Length: 5, RawLength: 5, Codec: metadata.CodecZstd, CRC32C: CRC32C([]byte("plain"))}},
		{"codec none raw mismatch", []byte("plain"), metadata.SliceEntry{Position: 8, Length: 5, RawLength: 6, Codec: metadata.CodecNone, CRC32C: CRC32C([]byte("plain"))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ReadSlice(c.stored, c.e); !errors.Is(err, ErrCorruptObject) {
				t.Fatalf("ReadSlice: %v, want ErrCorruptObject", err)
			}
		})
	}
}

// stripFCS re-encodes b's frame header without a frame content size, so the
// decoder cannot refuse a bomb from the header and must rely on its bound.
func stripFCS(t *testing.T, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithSingleSegment(false))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var buf bytes.Buffer
	enc.Reset(&buf)
	if _, err := enc.Write(make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if h.HasFCS {
		t.Skip("streaming encoder wrote a frame content size; FCS-less case not reachable")
	}
	return buf.Bytes()
}

// bytesReader serves GetRange over one object with objstore semantics.
type bytesReader []byte

func (b bytesReader) GetRange(_ context.Context, _ string, off, length int64) ([]byte, error) {
	n := int64(len(b))
	if off < 0 {
		if -off > n {
			off = -n
		}
		return bytes.Clone(b[n+off:]), nil
	}
	if off >= n {
		return nil, objstore.ErrInvalidRange
	}
	end := n
	if length >= 0 && off+length < n {
		end = off + length
	}
	return bytes.Clone(b[off:end]), nil
}

func TestReadFooterRefuses(t *testing.T) {
	obj, _, err := Encode(sampleInputs(), metadata.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := ParseTrailer(obj[len(obj)-TrailerSize:])
	cases := map[string][]byte{
		"only trailer":      obj[len(obj)-TrailerSize:],
		"footer cut":        obj[len(obj)-TrailerSize-int(tr.FooterLen)+1:],
		"trailer truncated": obj[:len(obj)-1],
		"tiny":              obj[:3],
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := ReadFooter(context.Background(), bytesReader(o), "k"); !errors.Is(err, ErrCorruptObject) {
				t.Fatalf("ReadFooter: %v, want ErrCorruptObject", err)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		_, _, err := ReadFooter(context.Background(), missing{}, "k")
		if !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("ReadFooter: %v, want ErrNotFound", err)
		}
	})
}

type missing struct{}

func (missing) GetRange(context.Context, string, int64, int64) ([]byte, error) {
	return nil, objstore.ErrNotFound
}

func FuzzDecodeObject(f *testing.F) {
	for _, codec := range []metadata.Codec{metadata.CodecNone, metadata.CodecZstd} {
		obj, _, err := Encode(sampleInputs(), codec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(obj)
		f.Add(obj[:len(obj)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, obj []byte) {
		entries, err := DecodeFooter(obj)
		if err != nil {
			if !errors.Is(err, ErrCorruptObject) {
				t.Fatalf("DecodeFooter: untyped error %v", err)
			}
			return
		}
		var r SliceReader
		defer r.Close()
		in := make([]Input, 0, len(entries))
		codec := entries[0].Codec
		for _, e := range entries {
			stored, err := StoredBytes(obj, e)
			if err != nil {
				t.Fatalf("decoded entry %+v outside object: %v", e, err)
			}
			raw, err := r.Read(stored, e)
			if err != nil {
				if !errors.Is(err, ErrCorruptObject) {
					t.Fatalf("Read: untyped error %v", err)
				}
				return
			}
			if e.Codec != codec {
				return // mixed codecs are decodable but Encode never writes them
			}
			in = append(in, Input{TopicPartition: e.TopicPartition, LeaderEpoch: e.LeaderEpoch,
				BaseOffset: e.BaseOffset, LastOffset: e.LastOffset, Data: bytes.Clone(raw)})
		}
		// A valid object round trips: re-encoding its slices gives the same
		// entries (positions included) for codec none, and for zstd the same
		// raw bytes back.
		obj2, entries2, err := Encode(in, codec)
		if err != nil {
			t.Fatalf("re-encode of a valid object: %v", err)
		}
		if codec == metadata.CodecNone {
			if !bytes.Equal(obj, obj2) {
				t.Fatalf("codec none object did not round trip")
			}
			return
		}
		for i, e := range entries2 {
			stored, _ := StoredBytes(obj2, e)
			raw, err := r.Read(stored, e)
			if err != nil || !bytes.Equal(raw, in[i].Data) {
				t.Fatalf("re-encoded slice %d: %v", i, err)
			}
		}
	})
}

func TestEncoderReuse(t *testing.T) {
	// One Encoder across calls: the offset-order check is per object, a
	// refused call leaves nothing behind, the output equals a fresh
	// Encode's even when written over an earlier object's buffer, and the
	// partition index is rebuilt when it would grow past maxIndexed.
	in := func(p int32, base, last int64) Input {
		return Input{TopicPartition: tp("t", p), LeaderEpoch: 1, BaseOffset: base, LastOffset: last, Data: []byte{byte(p), byte(base)}}
	}
	many := func(n int, base int64) []Input {
		out := make([]Input, n)
		for i := range out {
			out[i] = in(int32(i), base, base)
		}
		return out
	}
	cases := []struct {
		name string
		in   []Input
		ok   bool
	}{
		{"first", []Input{in(0, 0, 4), in(1, 0, 0), in(0, 5, 5)}, true},
		{"same offsets in the next object", []Input{in(0, 0, 4), in(1, 0, 0)}, true},
		{"out of order within an object", []Input{in(0, 5, 6), in(1, 1, 1), in(0, 3, 3)}, false},
		{"after a refusal", []Input{in(0, 3, 3), in(0, 4, 4)}, true},
		{"overlap within an object", []Input{in(2, 0, 9), in(2, 9, 9)}, false},
		{"more partitions than indexed", many(maxIndexed+10, 0), true},
		{"then a repeat", []Input{in(5, 1, 1), in(5, 1, 1)}, false},
		{"and again", many(300, 1), true},
	}
	var e Encoder
	defer e.Close()
	var buf []byte
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, entries, err := e.Append(buf, c.in, metadata.CodecNone)
			if !c.ok {
				if !errors.Is(err, ErrInvalidInput) {
					t.Fatalf("Append: %v, want ErrInvalidInput", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, wantEntries, err := Encode(c.in, metadata.CodecNone)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || len(entries) != len(wantEntries) || entries[len(entries)-1] != wantEntries[len(wantEntries)-1] {
				t.Fatal("a reused Encoder wrote a different object than a fresh one")
			}
			buf = got
		})
	}
	if len(e.index) > maxIndexed {
		t.Errorf("index holds %d partitions, bound %d", len(e.index), maxIndexed)
	}
}

// BenchmarkEncoderAppend encodes 256 KiB objects of slices of one size from
// 200 partitions into a reused buffer, the combiner worker's loop; floor
// is memmove plus CRC32C of the same slices.
func BenchmarkEncoderAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		n := 256 << 10 / size
		data := make([][]byte, 200)
		for p := range data {
			data[p] = make([]byte, size)
			for i := range data[p] {
				data[p][i] = byte(i * (p + 1))
			}
		}
		b.Run(fmt.Sprintf("slice=%dKiB/encode", size>>10), func(b *testing.B) {
			in := make([]Input, n)
			var e Encoder
			var buf []byte
			b.SetBytes(int64(n * size))
			b.ReportAllocs()
			off := int64(0)
			for i := 0; i < b.N; i++ {
				for j := range in {
					p := (i*n + j) % len(data)
					in[j] = Input{TopicPartition: tp("bench", int32(p)), LeaderEpoch: 1, BaseOffset: off, LastOffset: off, Data: data[p]}
					off++
				}
				var err error
				if buf, _, err = e.Append(buf, in, metadata.CodecNone); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("slice=%dKiB/floor", size>>10), func(b *testing.B) {
			dst := make([]byte, size)
			b.SetBytes(int64(n * size))
			var sum uint32
			for i := 0; i < b.N; i++ {
				for j := 0; j < n; j++ {
					copy(dst, data[(i*n+j)%len(data)])
					sum ^= CRC32C(dst)
				}
			}
			_ = sum
		})
	}
}

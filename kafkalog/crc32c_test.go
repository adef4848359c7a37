package kafkalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// shift by n zero bytes the slow way: the CRC register run over zeros
// without the final inversion is exactly multiplication by x^(8n).
func TestX8nIsShiftByZeroBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 21, 100, 255, 256, 257, 4096, 16363, 65535, 65536, 65537, 70000, 1 << 20, 1<<20 + 12345, 1<<24 + 1} {
		a, b := make([]byte, 1+rng.IntN(64)), make([]byte, n)
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		ca := crc32.Checksum(a, castagnoli)
		cab := crc32.Update(ca, castagnoli, b)
		cb := crc32.Checksum(b, castagnoli)
		if got := cab ^ multModP(x8n(n), ca); got != cb {
			t.Fatalf("n=%d: derived crc(B) %#08x, want %#08x", n, got, cb)
		}
	}
}

func runOfBatches(rng *rand.Rand, n int) []byte {
	var run []byte
	off := int64(0)
	epoch := 0
	for range n {
		epoch += rng.IntN(2) // epochs never go down in a log
		recs := 1 + rng.IntN(20)
		size := rng.IntN(2000)
		run = append(run, kafkalogtest.MakeBatchN(off, int32(epoch), recs, size, 1_700_000_000_000)...)
		off += int64(recs)
	}
	return run
}

// The one-pass check returns the run's CRC32C and refuses every single
// corrupted byte, wherever it is (batch CRCs cover bytes 21 on; the run's
// CRC covers the rest).
func TestValidateBatchesCRC32C(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 50 {
		run := runOfBatches(rng, 1+rng.IntN(8))
		crc, err := ValidateBatchesCRC32C(run)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if want := crc32.Checksum(run, castagnoli); crc != want {
			t.Fatalf("trial %d: crc %#08x, want %#08x", trial, crc, want)
		}
		for range 20 {
			bad := bytes.Clone(run)
			i := rng.IntN(len(bad))
			bad[i] ^= byte(1 + rng.IntN(255))
			got, err := ValidateBatchesCRC32C(bad)
			if err == nil && got == crc {
				t.Fatalf("trial %d: byte %d corrupted, accepted with the original CRC", trial, i)
			}
		}
	}
	if _, err := ValidateBatchesCRC32C(runOfBatches(rng, 2)[:100]); err == nil {
		t.Fatal("torn run accepted")
	}
}

// A verified append writes exactly what AppendAsFollower writes and keeps
// checking offsets: a run starting past the log end is refused.
func TestAppendVerifiedAsFollower(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	run := append(runOfBatches(rng, 6), producerRun(rng, 4, 300)...)
	// One run: the producer's batches continue the first six.
	for pos, next := 0, int64(0); pos < len(run); {
		h, err := ParseBatchHeader(run[pos:])
		if err != nil {
			t.Fatal(err)
		}
		SetBaseOffset(run[pos:], next)
		next += int64(h.LastOffsetDelta) + 1
		pos += h.Size()
	}
	if _, err := ValidateBatchesCRC32C(run); err != nil {
		t.Fatal(err)
	}
	a, b := newEnv(t, Config{}), newEnv(t, Config{})
	ia, err := a.log.AppendAsFollower(run)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := b.log.AppendVerifiedAsFollower(run)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ia, ib) {
		t.Fatalf("infos differ: %+v vs %+v", ia, ib)
	}
	ra, _ := a.log.Read(0, 1<<20)
	rb, _ := b.log.Read(0, 1<<20)
	if !bytes.Equal(ra, rb) {
		t.Fatal("verified append wrote other bytes")
	}
	if _, err := b.log.AppendVerifiedAsFollower(kafkalogtest.MakeBatchN(ib.LastOffset+5, 100, 1, 10, 0)); err == nil {
		t.Fatal("a gap was accepted")
	}
}

// FuzzValidateBatchesCRC32C: what the one-pass check accepts is whole
// batches back to back, each with a matching CRC32C and a header whose
// record count fits its lastOffsetDelta, and it returns the CRC32C of all
// of b; it is never stricter than the log's own full validation
// (splitBatches), only more lenient about the records inside, which it
// does not walk.
func FuzzValidateBatchesCRC32C(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Small seeds: the fuzzer mutates a 100 KiB seed a few times a minute.
	f.Add(kafkalogtest.MakeBatchN(0, 1, 2, 10, 0))
	f.Add(append(kafkalogtest.MakeBatchN(0, 1, 3, 5, 0), kafkalogtest.MakeBatchN(3, 2, 1, 20, 0)...))
	f.Add(producerRun(rng, 3, 20))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		crc, err := ValidateBatchesCRC32C(b)
		full := splitBatches(b, 1<<31-1, func(BatchHeader, []byte) error { return nil })
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("refused with an untyped error: %v", err)
			}
			if full == nil {
				t.Fatalf("refused (%v), but the full validation accepts it", err)
			}
			return
		}
		if want := crc32.Checksum(b, castagnoli); crc != want {
			t.Fatalf("crc %#08x, want %#08x", crc, want)
		}
		for pos := 0; pos < len(b); {
			h, err := ParseBatchHeader(b[pos:])
			if err != nil || pos+h.Size() > len(b) {
				t.Fatalf("accepted, but no whole batch at %d: %v", pos, err)
			}
			if got := BatchCRC(b[pos : pos+h.Size()]); got != h.CRC {
				t.Fatalf("accepted a batch at %d with crc %#08x, header says %#08x", pos, got, h.CRC)
			}
			if h.RecordCount < 1 || h.LastOffsetDelta < h.RecordCount-1 {
				t.Fatalf("accepted a batch at %d with %d records and lastOffsetDelta %d", pos, h.RecordCount, h.LastOffsetDelta)
			}
			pos += h.Size()
		}
	})
}

// producerRun is a run of n batches of one idempotent producer, some
// transactional, with record timestamps that differ and values of up to
// maxValue bytes.
func producerRun(rng *rand.Rand, n, maxValue int) []byte {
	var run []byte
	off, seq := int64(0), int32(0)
	for i := range n {
		recs := make([]kafkalogtest.Record, 1+rng.IntN(5))
		for j := range recs {
			recs[j] = kafkalogtest.Record{Value: make([]byte, rng.IntN(maxValue)), TimestampDelta: int64(rng.IntN(1000))}
		}
		attrs := int16(0)
		if i%2 == 1 {
			attrs = 16 // transactional
		}
		run = append(run, kafkalogtest.Encode(kafkalogtest.BatchSpec{BaseOffset: off, LeaderEpoch: 100, Attributes: attrs,
			BaseTimestamp: 1_700_000_000_000, ProducerID: 77, ProducerEpoch: 2, BaseSequence: seq, Records: recs})...)
		off += int64(len(recs))
		seq += int32(len(recs))
	}
	return run
}

// The one-pass check is Kafka's follower check, CRC and header: a batch
// whose records do not parse but whose CRC32C matches them (bytes a
// leader would have refused) passes it, and the full validation refuses
// it; a header that contradicts itself, or a CRC that does not match,
// fails both, with a typed error at the batch's position.
func TestValidateBatchesCRC32CChecksHeaderNotRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	good := runOfBatches(rng, 2)
	first, err := ParseBatchHeader(good)
	if err != nil {
		t.Fatal(err)
	}
	second := first.Size()
	recrc := func(b []byte, at int) {
		h, _ := ParseBatchHeader(b[at:])
		binary.BigEndian.PutUint32(b[at+offCRC:], BatchCRC(b[at:at+h.Size()]))
	}
	for _, tc := range []struct {
		name         string
		mangle       func(b []byte)
		followerOK   bool
		wantPosition int64
	}{
		{"records garbled under a matching crc", func(b []byte) {
			b[second+BatchHeaderSize] ^= 0x7f // the first record's length varint
			recrc(b, second)
		}, true, 0},
		{"record bytes changed, crc not", func(b []byte) { b[second+BatchHeaderSize+5] ^= 1 }, false, int64(second)},
		{"record count 0", func(b []byte) {
			binary.BigEndian.PutUint32(b[second+offRecordCount:], 0)
			recrc(b, second)
		}, false, int64(second)},
		{"lastOffsetDelta past the count", func(b []byte) {
			binary.BigEndian.PutUint32(b[second+offLastOffsetDelta:], binary.BigEndian.Uint32(b[second+offLastOffsetDelta:])+1)
			recrc(b, second)
		}, false, int64(second)},
		{"magic 1", func(b []byte) { b[second+offMagic] = 1 }, false, int64(second)},
		{"unknown codec", func(b []byte) {
			binary.BigEndian.PutUint16(b[second+offAttributes:], 5)
			recrc(b, second)
		}, false, int64(second)},
		{"batch length past the end", func(b []byte) {
			binary.BigEndian.PutUint32(b[second+offBatchLength:], binary.BigEndian.Uint32(b[second+offBatchLength:])+1)
		}, false, int64(second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(good)
			tc.mangle(b)
			_, err := ValidateBatchesCRC32C(b)
			full := splitBatches(b, 1<<31-1, func(BatchHeader, []byte) error { return nil })
			if full == nil {
				t.Fatal("the full validation accepts the mangled run")
			}
			if tc.followerOK {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *CorruptBatchError
			if !errors.As(err, &ce) {
				t.Fatalf("want a *CorruptBatchError, got %v", err)
			}
			if ce.Position != tc.wantPosition {
				t.Fatalf("position %d, want %d (%v)", ce.Position, tc.wantPosition, err)
			}
		})
	}
}

// BenchmarkSliceCheck: what a follower spends checking one 96 KiB slice
// of 16-record batches of 1 KiB records: the slice's CRC32C and then every
// batch (two passes, before), or both in one pass (ValidateBatchesCRC32C).
func BenchmarkSliceCheck(b *testing.B) {
	var run []byte
	for i := range 6 {
		run = append(run, kafkalogtest.MakeBatchN(int64(i*16), 1, 16, 1024, 1_700_000_000_000)...)
	}
	want := crc32.Checksum(run, castagnoli)
	b.Run("way=two-pass", func(b *testing.B) {
		b.SetBytes(int64(len(run)))
		b.ReportAllocs()
		for b.Loop() {
			if crc32.Checksum(run, castagnoli) != want {
				b.Fatal("crc")
			}
			if err := splitBatches(run, 1<<31-1, func(BatchHeader, []byte) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("way=one-pass", func(b *testing.B) {
		b.SetBytes(int64(len(run)))
		b.ReportAllocs()
		for b.Loop() {
			if crc, err := ValidateBatchesCRC32C(run); err != nil || crc != want {
				b.Fatal(crc, err)
			}
		}
	})
}

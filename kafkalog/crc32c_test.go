package kafkalog

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// shift by n zero bytes the slow way: the CRC register run over zeros
// without the final inversion is exactly multiplication by x^(8n).
func TestX8nIsShiftByZeroBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 21, 100, 4096, 16363, 1 << 20} {
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
	run := runOfBatches(rng, 6)
	a, b := newEnv(t, Config{}), newEnv(t, Config{})
	ia, err := a.log.AppendAsFollower(run)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := b.log.AppendVerifiedAsFollower(run)
	if err != nil {
		t.Fatal(err)
	}
	if ia.LastOffset != ib.LastOffset || ia.NumBatches != ib.NumBatches || ia.LastMaxTimestamp != ib.LastMaxTimestamp {
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

func FuzzValidateBatchesCRC32C(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	f.Add(runOfBatches(rng, 1))
	f.Add(runOfBatches(rng, 3))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		crc, err := ValidateBatchesCRC32C(b)
		if err != nil {
			return
		}
		if want := crc32.Checksum(b, castagnoli); crc != want {
			t.Fatalf("crc %#08x, want %#08x", crc, want)
		}
		if err := splitBatches(b, 1<<31-1, func(BatchHeader, []byte) error { return nil }); err != nil {
			t.Fatalf("accepted in one pass, refused batch by batch: %v", err)
		}
	})
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

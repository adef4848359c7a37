package kafkalog

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// benchBatch is a 16 KiB batch of 16 records of about 1 KiB.
func benchBatch() []byte {
	return kafkalogtest.MakeBatchN(0, 0, 16, 1024-8, 1_700_000_000_000)
}

// BenchmarkAppend compares AppendAsLeader (validation with CRC, offset
// assignment, epoch stamping, index; flushes off) with plain os.File
// writes of the same bytes to the same kind of file.
func BenchmarkAppend(b *testing.B) {
	bt := benchBatch()
	var osNs float64
	b.Run("impl=os.File", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "plain.log"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(int64(len(bt)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.Write(bt); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		osNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("impl=kafkalog", func(b *testing.B) {
		l, err := Open(b.TempDir(), Config{Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.SetBytes(int64(len(bt)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := l.AppendAsLeader(bt, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if osNs > 0 {
			b.ReportMetric(osNs/ns, "ratio-vs-os")
		}
	})
}

// BenchmarkRead compares Read (index lookup, header walk, whole-batch
// cut, a fresh caller-owned buffer per call) with os.File.ReadAt of the
// same ranges into a reused buffer.
func BenchmarkRead(b *testing.B) {
	bt := benchBatch()
	const batches = 2048 // 32 MiB
	for _, maxBytes := range []int{64 << 10, 1 << 20} {
		l, err := Open(b.TempDir(), Config{Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		all := bytes.Repeat(bt, 64)
		for i := 0; i < batches/64; i++ {
			if _, err := l.AppendAsLeader(all, 0); err != nil {
				b.Fatal(err)
			}
		}
		seg := l.Segments()[0]
		leo := l.LogEndOffset()
		n := int64(maxBytes / len(bt) * len(bt)) // whole batches per read
		var osNs float64
		b.Run("maxBytes="+strconv.Itoa(maxBytes)+"/impl=os.File", func(b *testing.B) {
			f, err := os.Open(seg.Path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, n)
			b.SetBytes(n)
			b.ReportAllocs()
			b.ResetTimer()
			pos := int64(0)
			for i := 0; i < b.N; i++ {
				if pos+n > seg.Size {
					pos = 0
				}
				if _, err := f.ReadAt(buf, pos); err != nil {
					b.Fatal(err)
				}
				pos += n
			}
			b.StopTimer()
			osNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run("maxBytes="+strconv.Itoa(maxBytes)+"/impl=kafkalog/api=ReadInto", func(b *testing.B) {
			b.SetBytes(n)
			b.ReportAllocs()
			b.ResetTimer()
			off := int64(0)
			var buf []byte
			for i := 0; i < b.N; i++ {
				if off+n/int64(len(bt))*16 > leo {
					off = 0
				}
				data, err := l.ReadInto(buf, off, maxBytes)
				buf = data
				if err != nil {
					b.Fatal(err)
				}
				off += int64(len(data)/len(bt)) * 16
			}
			b.StopTimer()
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if osNs > 0 {
				b.ReportMetric(osNs/ns, "ratio-vs-os")
			}
		})
		b.Run("maxBytes="+strconv.Itoa(maxBytes)+"/impl=kafkalog", func(b *testing.B) {
			b.SetBytes(n)
			b.ReportAllocs()
			b.ResetTimer()
			off := int64(0)
			for i := 0; i < b.N; i++ {
				if off+n/int64(len(bt))*16 > leo {
					off = 0
				}
				data, err := l.Read(off, maxBytes)
				if err != nil {
					b.Fatal(err)
				}
				off += int64(len(data)/len(bt)) * 16
			}
			b.StopTimer()
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if osNs > 0 {
				b.ReportMetric(osNs/ns, "ratio-vs-os")
			}
		})
		l.Close()
	}
}

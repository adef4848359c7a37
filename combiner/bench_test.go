package combiner

import (
	"context"
	"fmt"
	"hash/crc32"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/kwal/kwal/internal/clock"
	"github.com/kwal/kwal/metadata"
)

// dropPublisher deletes each object once "published", so the in-memory
// store stays small however long the benchmark runs.
type dropPublisher struct{ s *memStore }

func (p dropPublisher) PublishObject(ctx context.Context, o UploadedObject) error {
	return p.s.Delete(ctx, o.Key)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIngest: 200 partitions, 1 KiB records, 10 ms interval, 256 KiB
// objects, into the in-memory store. The floor is memmove plus CRC32C of
// the same bytes, single-threaded, measured in the same run; "ratio" is
// our MB per CPU-second (all goroutines, GC included) over the floor's MB/s.
func BenchmarkIngest(b *testing.B) {
	const parts, record = 200, 1 << 10
	for _, recs := range []int{1, 16} {
		b.Run(fmt.Sprintf("records=%d", recs), func(b *testing.B) {
			size := recs * record
			data := make([][]byte, parts)
			for p := range data {
				data[p] = make([]byte, size)
				for i := range data[p] {
					data[p][i] = byte(i * (p + 1))
				}
			}
			// Floor: the same bytes, memmove + CRC32C.
			tab := crc32.MakeTable(crc32.Castagnoli)
			dst := make([]byte, size)
			floorN := max(b.N, 2000)
			fs := time.Now()
			var sum uint32
			for i := 0; i < floorN; i++ {
				copy(dst, data[i%parts])
				sum ^= crc32.Checksum(dst, tab)
			}
			floorMBs := float64(floorN*size) / time.Since(fs).Seconds() / 1e6
			_ = sum

			store := newMemStore(clock.Real{})
			c, err := New(Config{BrokerID: 1, Writer: StoreWriter{Store: store}, Publisher: dropPublisher{store},
				Interval: 10 * time.Millisecond, UploadBytes: 256 << 10})
			if err != nil {
				b.Fatal(err)
			}
			next := make([]int64, parts)
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, t0 := cpuTime(), time.Now()
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				p := i % parts
				s := Slice{TopicPartition: metadata.TopicPartition{Topic: "bench", Partition: int32(p)}, LeaderEpoch: 1,
					BaseOffset: next[p], LastOffset: next[p] + int64(recs) - 1, Data: data[p]}
				next[p] += int64(recs)
				if err := c.Submit(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.Close(ctx); err != nil {
				b.Fatal(err)
			}
			wall, cpu := time.Since(t0), cpuTime()-cpu0
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			mb := float64(b.N*size) / 1e6
			perCore := mb / cpu.Seconds()
			b.ReportMetric(perCore, "MB/cpu-s")
			b.ReportMetric(floorMBs, "floor-MB/s")
			b.ReportMetric(perCore/floorMBs, "ratio")
			b.ReportMetric(float64(c.Metrics().ObjectsPub)/wall.Seconds(), "objects/s")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/mb, "allocs/MB")
		})
	}
}

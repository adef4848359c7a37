package combiner

import (
	"context"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// dropPublisher deletes each object once "published", so the writer stays
// small however long the benchmark runs.
type dropPublisher struct {
	del func(ctx context.Context, key string) error
}

func (p dropPublisher) PublishObject(ctx context.Context, o UploadedObject) error {
	return p.del(ctx, o.Key)
}

// trailerWriter is a create-only ObjectWriter that keeps only each object's
// trailer, which is all the combiner ever reads back (the ambiguous-PUT
// check). It does not touch the body, so a benchmark through it measures
// the combiner's own work: with a real store the body's bytes are copied
// once more (into a socket, a file or, for the in-memory store, a fresh
// buffer), which is the store's cost, not the combiner's.
type trailerWriter struct {
	mu    sync.Mutex
	tails map[string][objformat.TrailerSize]byte
}

var _ ObjectWriter = (*trailerWriter)(nil)

func (w *trailerWriter) PutObject(ctx context.Context, key string, body []byte) error {
	if len(body) < objformat.TrailerSize {
		return fmt.Errorf("put %s: %d bytes: %w", key, len(body), objstore.ErrInvalidKey)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.tails[key]; ok {
		return fmt.Errorf("put %s: %w", key, objstore.ErrExists)
	}
	w.tails[key] = [objformat.TrailerSize]byte(body[len(body)-objformat.TrailerSize:])
	return nil
}

func (w *trailerWriter) ReadObjectTail(_ context.Context, key string, n int64) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.tails[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, objstore.ErrNotFound)
	}
	return append([]byte(nil), t[max(0, objformat.TrailerSize-int(n)):]...), nil
}

func (w *trailerWriter) delete(_ context.Context, key string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.tails, key)
	return nil
}

// cpuTime is the CPU time of the whole process: every goroutine, the
// garbage collector and the runtime included.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIngest: 200 partitions, 1 KiB records, 10 ms interval, 256 KiB
// objects. writer=mem is the in-memory store, which copies each object
// into a fresh buffer; writer=trailer keeps only trailers (see
// trailerWriter), so it measures the combiner alone.
//
// The floor is memmove plus CRC32C of the same bytes, slice by slice,
// single-threaded, measured in CPU time in the same run. "MB/cpu-s" is our
// MB per CPU-second of the whole process (all goroutines, GC included), so
// it is per core however many goroutines the combiner runs; "ratio" is
// that over the floor.
func BenchmarkIngest(b *testing.B) {
	const parts, record = 200, 1 << 10
	type writer struct {
		name string
		new  func() (ObjectWriter, Publisher)
	}
	writers := []writer{
		{"mem", func() (ObjectWriter, Publisher) {
			s := newMemStore(clock.Real{})
			return StoreWriter{Store: s}, dropPublisher{s.Delete}
		}},
		{"trailer", func() (ObjectWriter, Publisher) {
			w := &trailerWriter{tails: make(map[string][objformat.TrailerSize]byte)}
			return w, dropPublisher{w.delete}
		}},
	}
	for _, wr := range writers {
		for _, recs := range []int{1, 16} {
			b.Run(fmt.Sprintf("writer=%s/records=%d", wr.name, recs), func(b *testing.B) {
				benchIngest(b, parts, recs*record, recs, wr.new)
			})
		}
	}
}

func benchIngest(b *testing.B, parts, size, recs int, newWriter func() (ObjectWriter, Publisher)) {
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
	floorN := max(b.N, 64<<20/size)
	fc := cpuTime()
	var sum uint32
	for i := 0; i < floorN; i++ {
		copy(dst, data[i%parts])
		sum ^= crc32.Checksum(dst, tab)
	}
	floorMBs := float64(floorN*size) / (cpuTime() - fc).Seconds() / 1e6
	_ = sum

	w, pub := newWriter()
	c, err := New(Config{BrokerID: 1, Writer: w, Publisher: pub, Interval: 10 * time.Millisecond, UploadBytes: 256 << 10})
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
}

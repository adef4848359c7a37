package objstoretest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kwal/kwal/objstore"
)

// BenchLatency measures per-request latency of the two requests the remote
// WAL lives on: a 256 KiB create-only PUT (a combined object) and a 16 KiB
// ranged GET (a follower reading one partition's slice). It reports p50 and
// p99 in milliseconds beside ns/op, as sub-benchmarks op=put/size=256KiB and
// op=get/size=16KiB.
func BenchLatency(b *testing.B, s objstore.Store) {
	ctx := context.Background()
	prefix := RandomPrefix()
	b.Run("op=put/size=256KiB", func(b *testing.B) {
		body := pattern(256 << 10)
		lat := make([]time.Duration, 0, b.N)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		run := RandomPrefix() // b.Loop benchmarks run once per -count; keys must not repeat
		i := 0
		for b.Loop() {
			key := fmt.Sprintf("%sput/%s%09d", prefix, run, i)
			i++
			start := time.Now()
			if err := s.Put(ctx, key, body, objstore.PutOptions{IfNoneMatch: true}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		reportPercentiles(b, lat)
	})
	b.Run("op=get/size=16KiB", func(b *testing.B) {
		key := prefix + "get/object"
		if err := s.Put(ctx, key, pattern(1<<20), objstore.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		const size = 16 << 10
		lat := make([]time.Duration, 0, b.N)
		b.SetBytes(size)
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			off := (i * size) % (1 << 20)
			i++
			start := time.Now()
			got, err := s.GetRange(ctx, key, off, size)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
			if len(got) != size {
				b.Fatalf("GetRange returned %d bytes, want %d", len(got), size)
			}
		}
		reportPercentiles(b, lat)
	})
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		i := int(p * float64(len(lat)-1))
		return float64(lat[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

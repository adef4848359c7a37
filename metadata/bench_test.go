package metadata

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/clock"
)

// typicalObject: a 256 KiB combined object whose bytes are spread evenly
// over n partitions of 4 topics, 1 KiB records, zstd.
func typicalObject(n int) *ObjectMetadata {
	const objBytes = 256 << 10
	per := int64(objBytes / n)
	o := &ObjectMetadata{ID: testID(1), Bucket: "kwal-wal-use1-az4--x-s3", Key: "wal/0001/7f3a9c2e-6c1d-4a8e-9f0b-2d5e8c7a1b3f",
		BrokerID: 1, State: CopySegmentFinished, EventTimestampMs: 1_700_000_000_000}
	pos := int64(0)
	for p := 0; p < n; p++ {
		recs := max(1, per/1024)
		base := int64(12_345_678 + p*1000)
		o.Entries = append(o.Entries, SliceEntry{
			TopicPartition: TopicPartition{Topic: fmt.Sprintf("events.service-%d", p%4), Partition: int32(p)},
			LeaderEpoch:    7, BaseOffset: base, LastOffset: base + recs - 1,
			Position: pos, Length: per / 3, RawLength: per, Codec: CodecZstd, CRC32C: uint32(p) * 2654435761,
		})
		pos += per / 3
	}
	return o
}

// BenchmarkMetadataCost reports the metadata bytes (record keys and values)
// per MiB of user data and the events per object, for a 256 KiB object
// split over the default 50 metadata partitions.
func BenchmarkMetadataCost(b *testing.B) {
	for _, n := range []int{1, 10, 50, 100, 200} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			o := typicalObject(n)
			var raw int64
			for _, e := range o.Entries {
				raw += e.RawLength
			}
			b.ReportAllocs()
			var bytes, events int
			var buf []byte
			for b.Loop() {
				bytes, events = 0, 0
				for _, p := range Split(o, 50) {
					var err error
					buf, err = Encode(buf[:0], p)
					if err != nil {
						b.Fatal(err)
					}
					bytes += len(buf) + objectKeyLen
					events++
				}
			}
			b.ReportMetric(float64(bytes)*float64(1<<20)/float64(raw), "metaB/MiB")
			b.ReportMetric(float64(events), "events/object")
			b.ReportMetric(float64(bytes)/float64(n), "metaB/slice")
		})
	}
}

func BenchmarkStateApply(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			o := typicalObject(n)
			b.ReportAllocs()
			s := NewState()
			i := 0
			for b.Loop() {
				o.ID[0], o.ID[1], o.ID[2] = byte(i), byte(i>>8), byte(i>>16)
				for k := range o.Entries {
					o.Entries[k].BaseOffset += 1000
					o.Entries[k].LastOffset += 1000
				}
				i++
				if err := s.Apply(o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBootstrap fills the metadata topic on an embedded kfake with
// events×entries slice entries and measures the time a consumer of every
// metadata partition takes to be ready. Run with -benchtime=1x.
func BenchmarkBootstrap(b *testing.B) {
	for _, c := range []struct{ events, entries int }{{1000, 100}, {10000, 100}} {
		b.Run(fmt.Sprintf("entries=%d", c.events*c.entries), func(b *testing.B) {
			e := startCluster(b)
			ctx := context.Background()
			cfg := TopicConfig{Bootstrap: e.Bootstrap()}
			if err := cfg.Validate(); err != nil {
				b.Fatal(err)
			}
			pub := newPublisher(b, cfg)
			n, err := pub.Partitions(ctx)
			if err != nil {
				b.Fatal(err)
			}
			// For each metadata partition, c.entries user partitions that map there.
			pools := make([][]TopicPartition, n)
			for p, full := int32(0), 0; full < int(n); p++ {
				tp := TopicPartition{Topic: "bench", Partition: p}
				mp := MetadataPartition(tp, n)
				if len(pools[mp]) < c.entries {
					pools[mp] = append(pools[mp], tp)
					if len(pools[mp]) == c.entries {
						full++
					}
				}
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Bootstrap...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerBatchMaxBytes(1<<20))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			var recs []*kgo.Record
			var valueBytes int
			for i := 0; i < c.events; i++ {
				mp := int32(i) % n
				o := &ObjectMetadata{ID: testID(0), MetadataPartition: mp, Key: fmt.Sprintf("wal/%08d", i),
					Bucket: "b", BrokerID: 1, State: CopySegmentFinished, EventTimestampMs: int64(i)}
				o.ID[0], o.ID[1], o.ID[2] = byte(i), byte(i>>8), byte(i>>16)
				for k, tp := range pools[mp] {
					base := int64(i) * 10
					o.Entries = append(o.Entries, SliceEntry{TopicPartition: tp, LeaderEpoch: 1,
						BaseOffset: base, LastOffset: base + 9, Position: int64(k) * 2600, Length: 2600, RawLength: 2600})
				}
				v, err := Encode(nil, o)
				if err != nil {
					b.Fatal(err)
				}
				valueBytes += len(v)
				recs = append(recs, &kgo.Record{Topic: cfg.Topic, Partition: mp, Key: ObjectRecordKey(o.Ref()), Value: v})
				if len(recs) == 500 || i == c.events-1 {
					if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
						b.Fatal(err)
					}
					recs = recs[:0]
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				st := NewState()
				cons, err := StartConsumer(ctx, ConsumerConfig{TopicConfig: cfg}, st, clock.Real{}, quietLogger())
				if err != nil {
					b.Fatal(err)
				}
				<-cons.Ready()
				d, _ := cons.BootstrapDuration()
				total += d
				if got := st.Stats().Slices; got != c.events*c.entries {
					b.Fatalf("indexed %d slices, want %d", got, c.events*c.entries)
				}
				cons.Close()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "bootstrap_s")
			b.ReportMetric(float64(valueBytes)/float64(c.events*c.entries), "B/entry")
			b.ReportMetric(float64(valueBytes)/(1<<20), "topic_MiB")
		})
	}
}

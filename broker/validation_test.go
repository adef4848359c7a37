package broker

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/internal/logbuf"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batches compressed by a real client with every codec are accepted and
// read back; the corrupt compressed batches are refused with the
// Kafka error code, and nothing reaches the leader's log or a follower's.
func TestProduceValidatesCompressedBatches(t *testing.T) {
	logs := &logbuf.Buffer{}
	c := startCluster(t, []string{"az1", "az2"}, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, &testLogWriter{t: t}), &slog.HandlerOptions{Level: slog.LevelWarn}))
		cfg.MaxUncompressedBatchBytes = 1 << 20
	})
	cl := newClient(t, c)
	createTopic(t, cl, "v", 1, 2, nil)
	ts, _ := c.ctrl.Topic("v")
	leader := c.broker(ts.Partitions[0].Leader)
	tp := TopicPartition{Topic: "v", Partition: 0}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	codecs := []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	n := 0
	for _, codec := range codecs {
		p := newClient(t, c, kgo.ProducerBatchCompression(codec), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
		var recs []*kgo.Record
		for range 6 {
			recs = append(recs, &kgo.Record{Topic: "v", Value: value(n)})
			n++
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("%v: %v", codec, err)
		}
	}
	l, _ := leader.PartitionLog(tp)
	leo := l.LogEndOffset()
	if leo != int64(n) {
		t.Fatalf("log end %d after %d records", leo, n)
	}
	consumer := newClient(t, c, kgo.ConsumeTopics("v"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < n; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != string(value(got)) || r.Offset != int64(got) {
				t.Fatalf("record %d: %q at %d", got, r.Value, r.Offset)
			}
			got++
		})
	}

	one := kafkalogtest.Records(kafkalogtest.BatchSpec{Records: []kafkalogtest.Record{{Value: []byte("x")}}})
	three := kafkalogtest.Records(kafkalogtest.BatchSpec{Records: []kafkalogtest.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}})
	big := kafkalogtest.Records(kafkalogtest.BatchSpec{Records: []kafkalogtest.Record{{Value: make([]byte, 2<<20)}}})
	batch := func(codec int, compressed []byte, count, lastDelta int32) []byte {
		return kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: int16(codec), RawRecords: compressed, RecordCount: count, LastOffsetDelta: lastDelta, BaseTimestamp: 1})
	}
	type produceCase struct {
		name  string
		batch []byte
		want  *kerr.Error
	}
	var cases []produceCase
	// Every corrupt compressed batch, whatever the codec, is
	// CORRUPT_MESSAGE: garbage under a valid CRC, a record count the
	// stream does not hold, a lastOffsetDelta that disagrees with the
	// records (the 2^31-1 moved the log end by two billion), a cut
	// stream, trailing bytes and a decompression bomb.
	for _, codec := range []int{kafkalogtest.Gzip, kafkalogtest.Snappy, kafkalogtest.LZ4, kafkalogtest.Zstd} {
		n := []string{1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}[codec]
		z := func(raw []byte) []byte { return kafkalogtest.Compress(codec, raw) }
		cut := z(three)
		cases = append(cases,
			produceCase{n + " with a valid CRC and garbage inside", batch(codec, []byte("\x1f\x8b garbage, not a compressed stream"), 1, 0), kerr.CorruptMessage},
			produceCase{n + " claiming 1000 records holding one", batch(codec, z(one), 1000, 999), kerr.CorruptMessage},
			produceCase{n + " with lastOffsetDelta 2^31-1 over one record", batch(codec, z(one), 1, math.MaxInt32), kerr.CorruptMessage},
			produceCase{n + " with lastOffsetDelta 1 over three records", batch(codec, z(three), 3, 1), kerr.CorruptMessage},
			produceCase{n + " with lastOffsetDelta 9 over three records claiming ten", batch(codec, z(three), 10, 9), kerr.CorruptMessage},
			produceCase{n + " claiming one record holding three", batch(codec, z(three), 1, 0), kerr.CorruptMessage},
			produceCase{n + " cut short", batch(codec, cut[:len(cut)-3], 3, 2), kerr.CorruptMessage},
			produceCase{n + " decompressing past kwal.batch.max.uncompressed.bytes", batch(codec, z(big), 1, 0), kerr.CorruptMessage},
		)
	}
	cases = append(cases,
		// Kafka's INVALID_RECORD for an uncompressed header whose offset
		// range disagrees with its count ("Inconsistent batch offset range").
		produceCase{"uncompressed with lastOffsetDelta 2^31-1", batch(0, one, 1, math.MaxInt32), kerr.InvalidRecord},
		produceCase{"a client batch claiming LogAppendTime", kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: 8, BaseTimestamp: 1, Records: []kafkalogtest.Record{{Value: []byte("x")}}}), kerr.InvalidTimestamp},
		produceCase{"a client control batch", kafkalogtest.Encode(kafkalogtest.BatchSpec{Attributes: 32, BaseTimestamp: 1, Records: []kafkalogtest.Record{{Value: []byte("x")}}}), kerr.InvalidRecord},
	)
	for _, tc := range cases {
		got := produceRaw(ctx, t, cl, leader, tp, tc.batch)
		if got.ErrorCode != tc.want.Code {
			t.Errorf("%s: error %v, want %v", tc.name, kerr.ErrorForCode(got.ErrorCode), tc.want)
		}
		if got.ErrorMessage == nil || *got.ErrorMessage == "" {
			t.Errorf("%s: no error message", tc.name)
		}
		if got.BaseOffset != -1 {
			t.Errorf("%s: base offset %d for a refused batch", tc.name, got.BaseOffset)
		}
	}
	// One WARN line per refusal, naming the partition.
	if got := strings.Count(logs.String(), "produce refused"); got < len(cases) {
		t.Errorf("%d \"produce refused\" log lines for %d refused batches:\n%s", got, len(cases), logs.String())
	}
	if got := l.LogEndOffset(); got != leo {
		t.Fatalf("leader log end %d after refused batches, want %d", got, leo)
	}
	// Followers see only what the leader appended: wait until they hold
	// the good records, then check they hold nothing more.
	for _, b := range c.brokers {
		fl, _ := b.PartitionLog(tp)
		waitFor(t, "follower catch-up", 10*time.Second, func() bool { return fl.LogEndOffset() >= leo }, c.sources()...)
		if fl.LogEndOffset() != leo {
			t.Fatalf("broker %d log end %d, want %d", b.cfg.BrokerID, fl.LogEndOffset(), leo)
		}
	}
}

// produceRaw sends records (bytes as given, no client checks) to tp on
// broker b with acks=1.
func produceRaw(ctx context.Context, t *testing.T, cl *kgo.Client, b *Broker, tp TopicPartition, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return produceRawTo(t, ctx, cl.Broker(int(b.cfg.BrokerID)), tp, 1, records)
}

// produceRawTo sends one partition's records as given to br.
func produceRawTo(t *testing.T, ctx context.Context, br *kgo.Broker, tp TopicPartition, acks int16, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = tp.Partition
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// A partition number the topic does not have is UNKNOWN_TOPIC_OR_PARTITION
// (not retriable), not NOT_LEADER_OR_FOLLOWER, for Produce, Fetch and
// ListOffsets; a partition the broker does not hold stays
// NOT_LEADER_OR_FOLLOWER.
func TestUnknownPartitionOfExistingTopic(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2"}, nil)
	cl := newClient(t, c)
	createTopic(t, cl, "u", 2, 1, nil)
	ts, _ := c.ctrl.Topic("u")
	b := c.broker(ts.Partitions[0].Leader)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	batch := kafkalogtest.MakeBatch(0, 0, [][]byte{[]byte("x")}, 1)
	for _, part := range []int32{99999, 2, -1} {
		tp := TopicPartition{Topic: "u", Partition: part}
		if got := produceRaw(ctx, t, cl, b, tp, batch); got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("produce to %v: %v", tp, kerr.ErrorForCode(got.ErrorCode))
		}
		f := kmsg.NewPtrFetchRequest()
		f.MaxWaitMillis, f.MaxBytes = 0, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "u", ts.ID // v13+ name topics by id
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = part, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		fr, err := f.RequestWith(ctx, cl.Broker(int(b.cfg.BrokerID)))
		if err != nil {
			t.Fatal(err)
		}
		if code := fr.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("fetch %v: %v", tp, kerr.ErrorForCode(code))
		}
		lo := kmsg.NewPtrListOffsetsRequest()
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "u"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = part, -1
		lt.Partitions = append(lt.Partitions, lp)
		lo.Topics = append(lo.Topics, lt)
		lr, err := lo.RequestWith(ctx, cl.Broker(int(b.cfg.BrokerID)))
		if err != nil {
			t.Fatal(err)
		}
		if code := lr.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("list offsets %v: %v", tp, kerr.ErrorForCode(code))
		}
	}
	// A real partition led elsewhere: the client's metadata is stale.
	for _, ps := range ts.Partitions {
		other := c.broker(ps.Leader)
		for _, ob := range c.brokers {
			if ob != other {
				if _, held := ob.PartitionLog(TopicPartition{Topic: "u", Partition: ps.Partition}); held {
					continue
				}
				got := produceRaw(ctx, t, cl, ob, TopicPartition{Topic: "u", Partition: ps.Partition}, batch)
				if got.ErrorCode != kerr.NotLeaderForPartition.Code {
					t.Errorf("produce to partition %d on broker %d: %v", ps.Partition, ob.cfg.BrokerID, kerr.ErrorForCode(got.ErrorCode))
				}
			}
		}
	}
}

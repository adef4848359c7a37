package broker

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The topic configs clients set at creation are accepted and honoured on
// every replica; an unknown key or a value kwal cannot honour is refused
// with INVALID_CONFIG naming the key.
func TestTopicConfigsHonoured(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, func(cfg *Config) { cfg.RetentionCheckInterval = 20 * time.Millisecond })
	cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(1), kgo.DisableIdempotentWrite())
	adm := kadm.NewClient(cl)

	for key, val := range map[string]string{
		"no.such.key":            "1",
		"compression.type":       "gzip",
		"message.timestamp.type": "WallClock",
		"retention.bytes":        "-2",
		"max.message.bytes":      "0",
		"segment.ms":             "0",
	} {
		resp, err := adm.CreateTopic(adminCtx(t), 1, 1, map[string]*string{key: &val}, "refused-"+strings.ReplaceAll(key, ".", "-"))
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, key) {
			t.Errorf("create with %s=%s: %v %q, want INVALID_CONFIG naming the key", key, val, err, resp.ErrMessage)
		}
	}

	// max.message.bytes and LogAppendTime.
	createTopic(t, cl, "stamped", 1, 3, map[string]string{
		"max.message.bytes": "1000", "message.timestamp.type": "LogAppendTime", "compression.type": "producer",
		"segment.ms": "3600000",
	})
	err := cl.ProduceSync(adminCtx(t), &kgo.Record{Topic: "stamped", Value: bytes.Repeat([]byte("x"), 2000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("2000 B into max.message.bytes=1000: %v, want MESSAGE_TOO_LARGE", err)
	}
	appended := c.clk.Now() // the clock stands still until retention below
	created := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := cl.ProduceSync(adminCtx(t), &kgo.Record{Topic: "stamped", Value: []byte("small"), Timestamp: created}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	recs := consumeAll(t, c, "stamped", 1)
	if r := recs[0]; r.Attrs.TimestampType() != 1 || r.Timestamp.UnixMilli() != appended.UnixMilli() {
		t.Fatalf("LogAppendTime record: type %d timestamp %v (produced with %v)", r.Attrs.TimestampType(), r.Timestamp, created)
	}
	ts, _ := c.ctrl.Topic("stamped")
	tp := TopicPartition{Topic: "stamped", Partition: 0}
	ll, _ := c.broker(ts.Partitions[0].Leader).PartitionLog(tp)
	want, _ := ll.Read(0, 1<<20)
	for _, rid := range ts.Partitions[0].Replicas {
		l, _ := c.broker(rid).PartitionLog(tp)
		waitFor(t, "follower caught up", 10*time.Second, func() bool { return l.LogEndOffset() == 1 }, c.sources()...)
		got, _ := l.Read(0, 1<<20)
		if !bytes.Equal(got, want) {
			t.Fatalf("broker %d holds different bytes than the leader", rid)
		}
	}

	// retention.bytes deletes old segments on every replica.
	createTopic(t, cl, "bounded", 1, 3, map[string]string{"retention.bytes": "2048", "segment.bytes": "1024"})
	for i := range 60 {
		produceTo(t, cl, "bounded", 0, bytes.Repeat([]byte{byte(i)}, 200))
	}
	ts, _ = c.ctrl.Topic("bounded")
	// Retention deletes only below a replica's high watermark: once every
	// replica knows all 60 are committed, one retention check deletes.
	for _, rid := range ts.Partitions[0].Replicas {
		b := c.broker(rid)
		waitFor(t, "the high watermark at 60 on every replica", 10*time.Second, func() bool {
			st, _ := b.PartitionStatus(TopicPartition{Topic: "bounded", Partition: 0})
			return st.HighWatermark == 60
		}, c.sources()...)
	}
	c.clk.Advance(20 * time.Millisecond)
	for _, rid := range ts.Partitions[0].Replicas {
		b := c.broker(rid)
		waitFor(t, "retention.bytes to delete old segments", 20*time.Second, func() bool {
			st, _ := b.PartitionStatus(TopicPartition{Topic: "bounded", Partition: 0})
			return st.LogStart > 40 && st.LogEnd == 60
		}, c.sources()...)
	}
	start := consumeAll(t, c, "bounded", 1)[0].Offset
	if start <= 40 {
		t.Fatalf("a consumer from the start begins at %d", start)
	}
}

// Kafka's produce rule for compacted topics: a batch with a record without
// a key is refused with INVALID_RECORD and nothing is appended; keyed
// records are taken. AlterConfigs turning compaction on applies the rule
// to the open partition.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1), kgo.DisableIdempotentWrite())
	adm := kadm.NewClient(cl)
	createTopic(t, cl, "compacted", 1, 1, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, cl, "plain", 1, 1, nil)
	produce := func(topic string, key []byte) error {
		return cl.ProduceSync(adminCtx(t), &kgo.Record{Topic: topic, Key: key, Value: []byte("v")}).FirstErr()
	}
	if err := produce("compacted", nil); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record into a compacted topic: %v, want INVALID_RECORD", err)
	}
	if err := produce("compacted", []byte("k")); err != nil {
		t.Fatal(err)
	}
	if err := produce("compacted", []byte{}); err != nil {
		t.Fatalf("an empty (not null) key: %v", err)
	}
	if st, _ := c.brokers[0].PartitionStatus(TopicPartition{Topic: "compacted"}); st.LogEnd != 2 {
		t.Fatalf("log end %d, want 2 (the refused batch appended nothing)", st.LogEnd)
	}
	if err := produce("plain", nil); err != nil {
		t.Fatal(err)
	}
	v := "compact,delete"
	if r, err := adm.AlterTopicConfigs(adminCtx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &v}}, "plain"); err != nil || r[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, r)
	}
	if err := produce("plain", nil); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record after compaction was turned on: %v, want INVALID_RECORD", err)
	}
}

// max.message.bytes above the broker-wide message.max.bytes (1 MiB) is
// effective: a 3 MiB topic takes a 2.5 MiB batch (replicated byte for
// byte, consumed whole) and refuses a 3.5 MiB one with MESSAGE_TOO_LARGE,
// and a topic without the config refuses 1.5 MiB. The request frame is
// bounded by socket.request.max.bytes only.
func TestMaxMessageBytesAboveOneMiB(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, nil)
	cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(1), kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchMaxBytes(8<<20), kgo.BrokerMaxWriteBytes(16<<20), kgo.FetchMaxPartitionBytes(1<<20))
	createTopic(t, cl, "big", 1, 3, map[string]string{"max.message.bytes": "3145728"})
	createTopic(t, cl, "small", 1, 3, nil)
	big := bytes.Repeat([]byte("b"), 5<<19) // 2.5 MiB
	if err := cl.ProduceSync(adminCtx(t), &kgo.Record{Topic: "big", Value: big}).FirstErr(); err != nil {
		t.Fatalf("2.5 MiB into max.message.bytes=3 MiB: %v", err)
	}
	if err := cl.ProduceSync(adminCtx(t), &kgo.Record{Topic: "big", Value: bytes.Repeat([]byte("c"), 7<<19)}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("3.5 MiB into max.message.bytes=3 MiB: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := cl.ProduceSync(adminCtx(t), &kgo.Record{Topic: "small", Value: bytes.Repeat([]byte("s"), 3<<19)}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("1.5 MiB into the default max.message.bytes: %v, want MESSAGE_TOO_LARGE", err)
	}
	recs := consumeAll(t, c, "big", 1)
	if !bytes.Equal(recs[0].Value, big) {
		t.Fatalf("consumed %d bytes, produced %d", len(recs[0].Value), len(big))
	}
	ts, _ := c.ctrl.Topic("big")
	tp := TopicPartition{Topic: "big"}
	ll, _ := c.broker(ts.Partitions[0].Leader).PartitionLog(tp)
	want, _ := ll.Read(0, 8<<20)
	for _, rid := range ts.Partitions[0].Replicas {
		l, _ := c.broker(rid).PartitionLog(tp)
		got, _ := l.Read(0, 8<<20)
		if !bytes.Equal(got, want) || l.LogEndOffset() != 1 {
			t.Fatalf("broker %d holds %d bytes up to %d, the leader %d", rid, len(got), l.LogEndOffset(), len(want))
		}
	}
}

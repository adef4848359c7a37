package rwnode

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A remotewal topic whose max.message.bytes is far above 1 MiB takes
// batches up to it: each is one slice larger than the follower's ranged
// GET and the remote WAL's slice size, and still reaches every follower
// byte for byte (acks=all completes only then).
func TestRemoteWALBatchesAboveOneMiB(t *testing.T) {
	store := mem.New()
	c := startRemoteWALCluster(t, []string{"az1", "az2", "az1"}, store)
	admin := newClient(t, c)
	const topic = "wal-large"
	createTopic(t, admin, topic, 1, 3, map[string]string{broker.TopicConfigRemoteWAL: "true", "max.message.bytes": "16777216"})
	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.ProduceRequestTimeout(30*time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16<<20), kgo.BrokerMaxWriteBytes(32<<20))
	for i, size := range []int{5 << 19, 9 << 20, 100} {
		v := bytes.Repeat([]byte{byte('a' + i)}, size)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := prod.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("acks=all produce of %d bytes: %v", size, err)
		}
	}
	ts, _ := c.ctrl.Topic(topic)
	ps := ts.Partitions[0]
	tp := broker.TopicPartition{Topic: topic}
	ll, _ := c.broker(ps.Leader).PartitionLog(tp)
	want := segmentBytes(t, ll.Segments(), ll.ReadSegmentRange)
	for _, rid := range ps.Replicas {
		fl, _ := c.broker(rid).PartitionLog(tp)
		if fl.LogEndOffset() != 3 || !bytes.Equal(segmentBytes(t, fl.Segments(), fl.ReadSegmentRange), want) {
			t.Errorf("broker %d: log end %d, not byte-identical to the leader's", rid, fl.LogEndOffset())
		}
	}
}

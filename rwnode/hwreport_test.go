package rwnode

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/objstore/mem"
)

// TestFollowerHighWatermarkFollowsItsAppends: a remote-WAL follower's log
// grows from object storage while its replica fetch long-polls the
// leader, so its log end must reach the leader by a report of its own,
// and the HW come back with the answer, not when the long poll ends. The
// fetch wait is an hour here: every record must still be below the
// follower's HW soon after the follower appended it (the wait is on the
// follower's change feed, bounded only against a hang).
func TestFollowerHighWatermarkFollowsItsAppends(t *testing.T) {
	c := startRemoteWALClusterBrokers(t, []string{"az1", "az2"}, mem.New(), nil, func(cfg *broker.Config) {
		cfg.ReplicaFetchWaitMax = time.Hour
		cfg.ReplicaLagTimeMax = 2 * time.Hour
	})
	admin := newClient(t, c)
	const topic = "hw-reports"
	createTopic(t, admin, topic, 1, 2, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	ts, _ := c.ctrl.Topic(topic)
	ps := ts.Partitions[0]
	var follower *broker.Broker
	for _, id := range ps.Replicas {
		if id != ps.Leader {
			follower = c.broker(id)
		}
	}
	tp := broker.TopicPartition{Topic: topic}
	prod := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 5 {
		r, err := prod.ProduceSync(ctx, &kgo.Record{Value: value(i)}).First()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		for {
			changed := follower.Changed()
			st, ok := follower.PartitionStatus(tp)
			if ok && st.HighWatermark > r.Offset {
				break
			}
			select {
			case <-changed:
			case <-ctx.Done():
				lst, _ := c.broker(ps.Leader).PartitionStatus(tp)
				t.Fatalf("record %d at offset %d: follower at %+v, leader log end %d HW %d", i, r.Offset, st, lst.LogEnd, lst.HighWatermark)
			}
		}
	}
}

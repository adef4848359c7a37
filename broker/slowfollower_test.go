package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSlowFollowerHoldsAcksAllOnlyUntilLagLimit: with RF 3 and
// min.insync.replicas=2, one follower stalls while an acks=all produce
// waits for it. The produce waits for the whole ISR, so it is not answered
// while the stalled follower may still be in sync, and it is answered,
// with success, once the leader's ISR check (every half lag limit) has
// dropped the follower: the stalled follower holds it back no longer than
// replica.lag.time.max.ms and one check period, however long it stays
// stalled. Real clock: the lower bound is exact, the upper one has room
// for a loaded machine.
func TestSlowFollowerHoldsAcksAllOnlyUntilLagLimit(t *testing.T) {
	const lag = time.Second
	c := startCluster(t, []string{"az1", "az2", "az3"}, func(cfg *Config) {
		onRealClock(cfg) // see doc.go: a parked follower fetch on the manual clock
		cfg.ReplicaLagTimeMax = lag
		cfg.ReplicaFetchWaitMax = 50 * time.Millisecond
		cfg.MinInsyncReplicas = 2
		cfg.DefaultReplicationFactor = 3
	})
	admin := newClient(t, c)
	const topic = "slow"
	createTopic(t, admin, topic, 1, 3, nil)
	tp := TopicPartition{Topic: topic, Partition: 0}
	ts, _ := c.ctrl.Topic(topic)
	leaderID := ts.Partitions[0].Leader
	var slow *Broker
	for _, b := range c.brokers {
		if b.cfg.BrokerID != leaderID {
			slow = b
		}
	}
	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordDeliveryTimeout(30*time.Second))
	ctx := context.Background()
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: value(0)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitISR(t, c.ctrl, tp, 3, "a full ISR", 10*time.Second)
	slow.fetchers.remove(tp) // the follower stalls, caught up until now
	start := time.Now()
	err := prod.ProduceSync(ctx, &kgo.Record{Value: value(1)}).FirstErr()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("acks=all with a stalled follower: %v after %v", err, took)
	}
	st, _ := c.broker(leaderID).PartitionStatus(tp)
	t.Logf("acks=all answered %v after a follower stalled (replica.lag.time.max.ms %v); ISR now %v", took.Round(time.Millisecond), lag, st.State.ISR)
	if len(st.State.ISR) != 2 {
		t.Fatalf("answered with ISR %v: the stalled follower should have left it first", st.State.ISR)
	}
	// The follower's last fetch was at most one fetch wait before start.
	if took < lag-100*time.Millisecond {
		t.Fatalf("answered %v after the stall, before the follower could have left the ISR (lag limit %v)", took, lag)
	}
	if limit := lag + lag/2 + 5*time.Second; took > limit {
		t.Fatalf("a stalled follower held acks=all for %v, beyond replica.lag.time.max.ms=%v plus a check period (and slack)", took, lag)
	}
}

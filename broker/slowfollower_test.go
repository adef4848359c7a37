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
// while the stalled follower may still be in sync (up to
// replica.lag.time.max.ms of clock time after the stall), and it is
// answered, with success, once the leader's ISR check has dropped the
// follower: the checks run at a fixed rate every half lag limit
// (isrLoop), so by the lag limit plus one check interval, however long it
// stays stalled. The other follower keeps fetching while the manual clock
// moves (advanceFetching), so it stays in the ISR.
func TestSlowFollowerHoldsAcksAllOnlyUntilLagLimit(t *testing.T) {
	const lag = time.Second
	c := startCluster(t, []string{"az1", "az2", "az3"}, func(cfg *Config) {
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
	var slow, active *Broker
	for _, b := range c.brokers {
		if b.cfg.BrokerID != leaderID {
			active, slow = slow, b
		}
	}
	leader := c.broker(leaderID)
	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordDeliveryTimeout(30*time.Second))
	ctx := context.Background()
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: value(0)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitISR(t, c.ctrl, tp, 3, "a full ISR", 10*time.Second)
	// The clock has not moved since the brokers started: the follower
	// stalls caught up, at start.
	slow.fetchers.remove(tp)
	start := c.clk.Now()
	answered := make(chan error, 1)
	go func() { answered <- prod.ProduceSync(ctx, &kgo.Record{Value: value(1)}).FirstErr() }()
	waitFor(t, "the produce appended on the leader", 10*time.Second, func() bool {
		st, _ := leader.PartitionStatus(tp)
		return st.LogEnd == 2
	}, leader)
	// Up to the lag limit the stalled follower is in sync (it is out only
	// once more than the limit has passed): the ISR is whole and the
	// produce held.
	c.advanceFetching(t, leader, tp, lag, active.cfg.BrokerID)
	if isr := isrOf(t, c.ctrl, tp); len(isr) != 3 {
		t.Fatalf("ISR %v %v after the stall: the follower left before replica.lag.time.max.ms=%v", isr, c.clk.Since(start), lag)
	}
	select {
	case err := <-answered:
		t.Fatalf("acks=all answered (%v) %v after the stall, before the follower could have left the ISR (lag limit %v)", err, c.clk.Since(start), lag)
	default:
	}
	// One check interval more: a check has run past the limit.
	c.advanceFetching(t, leader, tp, leader.isrCheckInterval(), active.cfg.BrokerID)
	var err error
	select {
	case err = <-answered:
	case <-time.After(10 * time.Second): // a hang guard only: no time passes on the broker's clock
		t.Fatalf("a stalled follower held acks=all %v of the broker's clock after the stall, beyond replica.lag.time.max.ms=%v plus a check interval %v", c.clk.Since(start), lag, leader.isrCheckInterval())
	}
	if err != nil {
		t.Fatalf("acks=all with a stalled follower: %v", err)
	}
	st, _ := leader.PartitionStatus(tp)
	t.Logf("acks=all answered by %v of the broker's clock after a follower stalled (replica.lag.time.max.ms %v); ISR now %v", c.clk.Since(start), lag, st.State.ISR)
	if len(st.State.ISR) != 2 {
		t.Fatalf("answered with ISR %v: the stalled follower should have left it first", st.State.ISR)
	}
}

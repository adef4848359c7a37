package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/clock"
)

// TestSlowFollowerHoldsAcksAllOnlyUntilLagLimit: with RF 3 and
// min.insync.replicas=2, one follower stops fetching while an acks=all
// produce waits for it. The produce must not be answered before the
// follower has lagged replica.lag.time.max.ms (it is still in the ISR,
// and acks=all waits for the whole ISR), and must be answered, with
// success, once the leader's ISR check has dropped it: at most the lag
// limit plus one check period (half of it) on the brokers' clock, however
// long the follower stays stalled. Time moves only on the manual clock.
func TestSlowFollowerHoldsAcksAllOnlyUntilLagLimit(t *testing.T) {
	const lag = 4 * time.Second
	m := clock.NewManual(t0)
	c := startCluster(t, []string{"az1", "az2", "az3"}, func(cfg *Config) {
		cfg.Clock = m
		cfg.ReplicaLagTimeMax = lag
		cfg.ReplicaFetchWaitMax = 100 * time.Millisecond
		cfg.MinInsyncReplicas = 2
		cfg.DefaultReplicationFactor = 3
		cfg.BrokerHeartbeatInterval, cfg.BrokerSessionTimeout = time.Hour, 2*time.Hour
		cfg.LeaderImbalanceCheckInterval = 24 * time.Hour
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
		kgo.ProduceRequestTimeout(time.Hour), kgo.RecordDeliveryTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: value(0)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	slow.fetchers.remove(tp) // the follower stalls
	start := m.Now()
	done := make(chan error, 1)
	prod.Produce(ctx, &kgo.Record{Value: value(1)}, func(_ *kgo.Record, err error) { done <- err })
	// Held while the follower may still catch up: every decision so far saw
	// a clock below the lag limit.
	for m.Now().Sub(start) < lag-200*time.Millisecond {
		m.Advance(100 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("acks=all answered (%v) after %v, with an in-sync follower stalled for less than replica.lag.time.max.ms=%v",
				err, m.Now().Sub(start), lag)
		default:
		}
		time.Sleep(time.Millisecond) // let the brokers' goroutines see the tick (not a wait for state)
	}
	// Past the limit plus one ISR check period, the clock stops: the
	// produce must be answered without it moving further.
	for m.Now().Sub(start) < lag+lag/2+100*time.Millisecond {
		m.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("acks=all after the stalled follower left the ISR: %v", err)
		}
	case <-time.After(30 * time.Second):
		st, _ := c.broker(leaderID).PartitionStatus(tp)
		t.Fatalf("acks=all still waiting %v of broker clock after a follower stalled (lag limit %v): %+v", m.Now().Sub(start), lag, st)
	}
	if st, _ := c.broker(leaderID).PartitionStatus(tp); len(st.State.ISR) != 2 {
		t.Fatalf("ISR %v, want the stalled follower out", st.State.ISR)
	}
}

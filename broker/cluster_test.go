package broker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A 3-broker cluster in two racks: an idempotent acks=all producer and a
// consumer in a follower's rack. Every record arrives once and in order,
// from the preferred read replica, and acks=all answers only after every
// follower's log end passed the record.
func TestClusterAcksAllAndFetchFromFollower(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, nil)
	admin := newClient(t, c)
	const topic = "orders"
	createTopic(t, admin, topic, 1, 3, nil)
	ts, _ := c.ctrl.Topic(topic)
	ps := ts.Partitions[0]
	leader := c.broker(ps.Leader)
	var follower *Broker
	for _, r := range ps.Replicas {
		if b := c.broker(r); r != ps.Leader && b.cfg.Rack != leader.cfg.Rack {
			follower = b
		}
	}
	if follower == nil {
		for _, r := range ps.Replicas {
			if r != ps.Leader {
				follower = c.broker(r)
			}
		}
	}
	if follower.cfg.Rack == leader.cfg.Rack {
		t.Fatalf("assignment put all replicas in rack %s: %+v", leader.cfg.Rack, ps)
	}
	tp := TopicPartition{Topic: topic, Partition: 0}

	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	const n = 300
	var (
		mu       sync.Mutex
		problems []string
		wg       sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		prod.Produce(context.Background(), &kgo.Record{Value: value(i)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				problems = append(problems, err.Error())
				mu.Unlock()
				return
			}
			// acks=all: every follower must already hold the record.
			for _, rid := range ps.Replicas {
				l, _ := c.broker(rid).PartitionLog(tp)
				if leo := l.LogEndOffset(); leo <= r.Offset {
					mu.Lock()
					problems = append(problems, "acked before broker "+string(rune('0'+rid))+" had the record")
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %s", len(problems), problems[0])
	}

	cons := newClient(t, c, kgo.Rack(follower.cfg.Rack),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var got [][]byte
	var offsets []int64
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(got), n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, r.Value)
			offsets = append(offsets, r.Offset)
		})
	}
	for i := range n {
		if string(got[i]) != string(value(i)) || offsets[i] != int64(i) {
			t.Fatalf("record %d: offset %d value %q", i, offsets[i], got[i])
		}
	}
	if len(got) != n {
		t.Fatalf("got %d records, want %d", len(got), n)
	}
	leaderIdx := slices.Index(c.brokers, leader)
	followerIdx := slices.Index(c.brokers, follower)
	if b := consumeBytes(c.ledgers[followerIdx], "consume"); b == 0 {
		t.Errorf("the follower in the consumer's rack served no consumer bytes")
	}
	if b := consumeBytes(c.ledgers[leaderIdx], "consume"); b != 0 {
		t.Errorf("the leader served %d consumer bytes; the preferred read replica should have", b)
	}
	if b := consumeBytes(c.ledgers[leaderIdx], "replica-fetch"); b == 0 {
		t.Errorf("no replica-fetch bytes recorded on the leader")
	}
	for _, rid := range ps.Replicas {
		st, _ := c.broker(rid).PartitionStatus(tp)
		if st.LogEnd != n {
			t.Errorf("broker %d log end %d, want %d", rid, st.LogEnd, n)
		}
	}
}

// A follower that stops fetching leaves the ISR once the leader's log end
// has moved past it for replica.lag.time.max.ms (at the log end it stays
// in sync, as in Kafka); acks=all with min.insync.replicas=3 is then
// refused with NOT_ENOUGH_REPLICAS, and the follower rejoins when it
// fetches again.
func TestClusterISRShrinkAndExpand(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az3"}, func(cfg *Config) {
		cfg.ReplicaLagTimeMax = 300 * time.Millisecond
		cfg.ReplicaFetchWaitMax = 50 * time.Millisecond
		cfg.MinInsyncReplicas = 3
		cfg.DefaultReplicationFactor = 3 // min.insync.replicas may not exceed it
	})
	admin := newClient(t, c)
	const topic = "isr"
	createTopic(t, admin, topic, 1, 3, nil)
	tp := TopicPartition{Topic: topic, Partition: 0}
	ts, _ := c.ctrl.Topic(topic)
	leaderID := ts.Partitions[0].Leader
	var lagging *Broker
	for _, b := range c.brokers {
		if b.cfg.BrokerID != leaderID {
			lagging = b
		}
	}
	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordRetries(0), kgo.RequestRetries(0))
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: value(0)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lagging.fetchers.remove(tp) // the follower stops fetching
	one := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite())
	if err := one.ProduceSync(context.Background(), &kgo.Record{Value: value(1)}).FirstErr(); err != nil {
		t.Fatal(err) // acks=1: the log end moves past the stopped follower
	}
	// The clock has not moved: the stopped follower was last caught up
	// now. It is dropped at the first ISR check strictly after
	// replica.lag.time.max.ms from here (the checks are at a fixed rate,
	// isrLoop), at most one check interval later; the other follower
	// keeps fetching all along, so it stays.
	var active int32
	for _, b := range c.brokers {
		if b != lagging && b.cfg.BrokerID != leaderID {
			active = b.cfg.BrokerID
		}
	}
	leader := c.broker(leaderID)
	stopped := c.clk.Now()
	short := leader.cfg.ReplicaLagTimeMax
	c.advanceFetching(t, leader, tp, short, active)
	if isr := isrOf(t, c.ctrl, tp); len(isr) != 3 {
		t.Fatalf("ISR %v at replica.lag.time.max.ms after the follower stopped: not yet lagging (lag > the limit)", isr)
	}
	c.advanceFetching(t, leader, tp, leader.isrCheckInterval(), active)
	waitISR(t, c.ctrl, tp, 2, "ISR shrink", 10*time.Second) // a hang guard only
	t.Logf("ISR shrunk by %v of clock time after the follower stopped (lag limit %v, check interval %v)", c.clk.Since(stopped), short, leader.isrCheckInterval())
	err := prod.ProduceSync(context.Background(), &kgo.Record{Value: value(2)}).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("produce with a shrunk ISR: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	p := lagging.partition(tp)
	ts, _ = c.ctrl.Topic(topic)
	lagging.fetchers.add(p, leaderID, ts.Partitions[0].LeaderEpoch)
	waitISR(t, c.ctrl, tp, 3, "ISR expand", 10*time.Second)
}

// isrOf is tp's ISR as the controller has it now.
func isrOf(t testing.TB, ctrl Controller, tp TopicPartition) []int32 {
	t.Helper()
	ts, _ := ctrl.Topic(tp.Topic)
	for _, ps := range ts.Partitions {
		if ps.Partition == tp.Partition {
			return ps.ISR
		}
	}
	t.Fatalf("controller has no %s", tp)
	return nil
}

// waitISR waits for the controller to notify an ISR of n replicas for tp:
// no polling, the wait ends on the notification (d bounds a hung test).
func waitISR(t *testing.T, ctrl Controller, tp TopicPartition, n int, what string, d time.Duration) {
	t.Helper()
	has := func(ts TopicState) bool {
		for _, ps := range ts.Partitions {
			if ts.Name == tp.Topic && ps.Partition == tp.Partition && len(ps.ISR) == n {
				return true
			}
		}
		return false
	}
	ch := make(chan struct{}, 1)
	cancel := ctrl.Subscribe(func(ts TopicState) {
		if has(ts) {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	defer cancel()
	if ts, ok := ctrl.Topic(tp.Topic); ok && has(ts) {
		return // before we subscribed
	}
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out waiting for %s", what)
	}
}

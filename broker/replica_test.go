package broker

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClassicTruncationAfterLeaderChanges drives the fetcher's
// replica.Follower machines through two leader changes, each leaving the
// replicas divergent (KIP-101): records a deposed leader appended with
// acks=1 and nobody fetched are cut from it by leader epoch, and every
// replica ends byte-identical. The waits are acks=all produces, which the
// new leader answers only once every ISR member truncated and fetched.
func TestClassicTruncationAfterLeaderChanges(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az3"}, func(cfg *Config) {
		cfg.ReplicaLagTimeMax = time.Minute // nobody leaves the ISR meanwhile
		cfg.ReplicaFetchWaitMax = 50 * time.Millisecond
	})
	admin := newClient(t, c)
	const topic = "diverge"
	createTopic(t, admin, topic, 1, 3, nil)
	tp := TopicPartition{Topic: topic, Partition: 0}
	ctx := context.Background()
	n := 0
	produce := func(acks kgo.Acks, count int) {
		t.Helper()
		cl := newClient(t, c, kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
		defer cl.Close()
		for range count {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value(n)}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", n, err)
			}
			n++
		}
	}
	leaderOf := func() int32 {
		ts, _ := c.ctrl.Topic(topic)
		return ts.Partitions[0].Leader
	}
	others := func(leader int32) []int32 {
		var out []int32
		for _, b := range c.brokers {
			if b.cfg.BrokerID != leader {
				out = append(out, b.cfg.BrokerID)
			}
		}
		return out
	}

	produce(kgo.AllISRAcks(), 5)
	for round := range 2 {
		old := leaderOf()
		next := others(old)[0]
		for _, id := range others(old) {
			c.broker(id).fetchers.remove(tp) // the followers stop fetching
		}
		produce(kgo.LeaderAck(), 3) // only the old leader has these
		if st, _ := c.broker(old).PartitionStatus(tp); st.LogEnd != int64(n) {
			t.Fatalf("round %d: old leader log end %d, want %d", round, st.LogEnd, n)
		}
		n -= 3 // the new leader never had them
		if _, err := c.ctrl.ElectLeader(tp, next); err != nil {
			t.Fatal(err)
		}
		produce(kgo.AllISRAcks(), 2)
	}

	var ref []byte
	var refID int32
	for _, b := range c.brokers {
		p := b.partition(tp)
		st := p.status()
		if st.LogEnd != int64(n) {
			t.Errorf("broker %d log end %d, want %d", b.cfg.BrokerID, st.LogEnd, n)
			continue
		}
		data, err := p.log.Read(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref, refID = data, b.cfg.BrokerID
			continue
		}
		if !bytes.Equal(data, ref) {
			t.Errorf("broker %d's log differs from broker %d's", b.cfg.BrokerID, refID)
		}
		if a, r := p.log.EpochEntries(), c.broker(refID).partition(tp).log.EpochEntries(); !slices.Equal(a, r) {
			t.Errorf("broker %d epochs %v, broker %d %v", b.cfg.BrokerID, a, refID, r)
		}
	}
}

// TestPurgatoriesRunOnConfigClock: a fetch long poll of an hour on a broker
// whose Config.Clock is manual is answered when that clock passes the hour,
// not before and not on the wall clock (the purgatories are built with
// cfg.Clock).
func TestPurgatoriesRunOnConfigClock(t *testing.T) {
	m := clock.NewManual(time.Unix(1_700_000_000, 0))
	c := startCluster(t, []string{"az1"}, func(cfg *Config) { cfg.Clock = m })
	cl := newClient(t, c)
	const topic = "longpoll"
	createTopic(t, cl, topic, 1, 1, nil)
	ts, _ := c.ctrl.Topic(topic)
	req := consumerFetchAtStart(topic, ts.ID, time.Hour)

	type answer struct {
		resp *kmsg.FetchResponse
		err  error
	}
	done := make(chan answer, 1)
	start := m.Now()
	go func() {
		r, err := cl.Broker(1).Request(context.Background(), req)
		resp, _ := r.(*kmsg.FetchResponse)
		done <- answer{resp, err}
	}()
	// The test cannot see the fetch enter the purgatory, so it moves the
	// manual clock an hour at a time until the answer comes; the wall
	// clock only bounds a hung test.
	deadline := time.After(20 * time.Second)
	for {
		select {
		case a := <-done:
			if a.err != nil {
				t.Fatal(a.err)
			}
			if waited := m.Now().Sub(start); waited < time.Hour {
				t.Fatalf("long poll answered after %v of the broker's clock, want an hour", waited)
			}
			p := a.resp.Topics[0].Partitions[0]
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil || len(p.RecordBatches) != 0 {
				t.Fatalf("answer: %v, %d bytes", err, len(p.RecordBatches))
			}
			return
		case <-deadline:
			t.Fatal("a one-hour long poll was not answered as the broker's manual clock moved")
		case <-time.After(20 * time.Millisecond):
			m.Advance(time.Hour)
		}
	}
}

// TestFetchWithoutWaitAnsweredAtOnce: a fetch with max.wait.ms=0 that
// finds nothing (a remotewal follower's log end report, a fallback fetch,
// a consumer polling) is answered without the broker's clock moving: the
// purgatory expires a zero timeout at once. The log end reports rely on
// it. The manual clock never moves here; the wall clock only bounds a
// hung test.
func TestFetchWithoutWaitAnsweredAtOnce(t *testing.T) {
	m := clock.NewManual(time.Unix(1_700_000_000, 0))
	c := startCluster(t, []string{"az1"}, func(cfg *Config) { cfg.Clock = m })
	cl := newClient(t, c)
	const topic = "nowait"
	createTopic(t, cl, topic, 1, 1, nil)
	ts, _ := c.ctrl.Topic(topic)
	req := consumerFetchAtStart(topic, ts.ID, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := cl.Broker(1).Request(ctx, req)
	if err != nil {
		t.Fatalf("fetch with max wait 0: %v (the broker's clock did not move)", err)
	}
	p := r.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
		t.Fatalf("answer: %v, %d bytes, HW %d", err, len(p.RecordBatches), p.HighWatermark)
	}
}

// consumerFetchAtStart is a consumer's Fetch v11 of partition 0 of topic
// at offset 0, waiting up to maxWait for one byte.
func consumerFetchAtStart(topic string, id [16]byte, maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes = int32(maxWait.Milliseconds()), 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id // the client sends v13+: by id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = 0, 0, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

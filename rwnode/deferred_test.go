package rwnode

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/remotewal"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Brokers whose replicators are not ready (their builds fail, as when
// the metadata topic's own cluster is not answering yet) still start
// remotewal partitions and take acks=1 produces; once each build succeeds
// the leaders and follows the broker started are replayed, the records
// written before are uploaded from where the leader started, acks=all
// produces complete, and every follower's log is byte-identical to the
// leader's. A follow stopped before readiness is not resurrected.
func TestDeferredReplicatorReplaysStartsWhenReady(t *testing.T) {
	store := mem.New()
	emb, err := metadata.StartEmbedded(t.TempDir(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	var gates []chan error
	var defs []*DeferredReplicator
	c := startCluster(t, []string{"az1", "az2", "az1"}, func(cfg *broker.Config, c *testCluster) {
		gate := make(chan error)
		rc := RemoteWALReplicatorConfig{
			BrokerID: cfg.BrokerID, Rack: cfg.Rack,
			Store:    ledger.Wrap(store, cfg.Ledger),
			Metadata: metadata.TopicConfig{Bootstrap: emb.Bootstrap(), Partitions: 4},
			Tasks:    remotewal.Config{Interval: 2 * time.Millisecond, UploadBytes: 64 << 10},
			Combiner: combiner.Config{Interval: 5 * time.Millisecond, UploadBytes: 128 << 10},
			Ledger:   cfg.Ledger,
			Logger:   quietLogger(),
		}
		// Each attempt waits for the test's word: an error fails it,
		// nil builds the replicator. Retries wait 0 (the gate paces them).
		d := NewDeferredReplicator(func() (*RemoteWALReplicator, error) {
			if err := <-gate; err != nil {
				return nil, err
			}
			return NewRemoteWALReplicator(rc)
		}, 0, clock.Real{}, quietLogger())
		t.Cleanup(func() {
			close(gate)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := d.Close(ctx); err != nil {
				t.Errorf("close deferred replicator %d: %v", cfg.BrokerID, err)
			}
		})
		gates, defs = append(gates, gate), append(defs, d)
		cfg.Replicator = d
		cfg.RemoteWAL.SystemEnable = true
	})
	admin := newClient(t, c)
	const topic = "deferred"
	createTopic(t, admin, topic, 1, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	ts, _ := c.ctrl.Topic(topic)
	tp := broker.TopicPartition{Topic: topic}
	leaderIdx := int(ts.Partitions[0].Leader - 1)
	waitFor(t, "the leader recorded as pending", 10*time.Second, func() bool {
		defs[leaderIdx].mu.Lock()
		defer defs[leaderIdx].mu.Unlock()
		_, ok := defs[leaderIdx].mu.leads[tp]
		return ok
	}, c.sources()...)
	// A follow that starts and stops before readiness is forgotten.
	ghost := broker.TopicPartition{Topic: "ghost"}
	defs[leaderIdx].StopLeader(ghost)
	if err := defs[leaderIdx].StartLeader(ghost, nil, 1, 0); err != nil {
		t.Fatal(err)
	}
	defs[leaderIdx].StopLeader(ghost)

	acks1 := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
	for i := range 50 {
		if err := acks1.ProduceSync(context.Background(), &kgo.Record{Value: value(i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for i, d := range defs {
		if d.Replicator() != nil {
			t.Fatalf("broker %d's replicator ready before its build succeeded", i+1)
		}
		gates[i] <- errors.New("metadata topic not reachable yet")
		gates[i] <- errors.New("still not")
		gates[i] <- nil
	}
	for _, d := range defs {
		<-d.Ready()
	}
	if r := defs[leaderIdx].Replicator(); r != nil {
		r.mu.Lock()
		_, ghosted := r.mu.leads[metadata.TopicPartition{Topic: "ghost"}]
		r.mu.Unlock()
		if ghosted {
			t.Fatal("a leader stopped before readiness was replayed")
		}
	}
	all := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.ProduceRequestTimeout(20*time.Second))
	for i := 50; i < 100; i++ {
		if err := all.ProduceSync(context.Background(), &kgo.Record{Value: value(i)}).FirstErr(); err != nil {
			t.Fatalf("acks=all after readiness: %v", err)
		}
	}
	ll, _ := c.broker(ts.Partitions[0].Leader).PartitionLog(tp)
	want := segmentBytes(t, ll.Segments(), ll.ReadSegmentRange)
	for _, rid := range ts.Partitions[0].Replicas {
		fl, _ := c.broker(rid).PartitionLog(tp)
		waitFor(t, "the follower at the leader's log end", 10*time.Second, func() bool { return fl.LogEndOffset() == 100 }, c.sources()...)
		if !bytes.Equal(segmentBytes(t, fl.Segments(), fl.ReadSegmentRange), want) {
			t.Errorf("broker %d's log is not byte-identical to the leader's", rid)
		}
	}
}

// broker.RemoteWALMetadataTopic names the metadata package's topic.
func TestRemoteWALMetadataTopicName(t *testing.T) {
	if broker.RemoteWALMetadataTopic != metadata.DefaultTopic {
		t.Fatalf("broker says %q, metadata %q", broker.RemoteWALMetadataTopic, metadata.DefaultTopic)
	}
}

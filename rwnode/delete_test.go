package rwnode

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
)

// Delete a remotewal topic while a producer writes to it, then create it
// again under the same name and produce to it: once the delete returned,
// every object of the old topic leaves the store (with WAL retention at
// its 10-minute default, so it is the deletion that collects them, not
// retention), every broker's metadata shows the partitions deleted, the
// new topic starts at offset 0 on every replica, and a consumer of the new
// topic reads only its records, once and in order.
func TestRemoteWALDeleteAndRecreateUnderLoad(t *testing.T) {
	store := mem.New()
	c := startRemoteWALClusterBrokers(t, []string{"az1", "az2", "az2"}, store, func(rc *RemoteWALReplicatorConfig) {
		rc.MaintenanceInterval = 50 * time.Millisecond
	}, func(cfg *broker.Config) { cfg.DisableAutoCreateTopics = true })
	admin := newClient(t, c)
	adm := kadm.NewClient(admin)
	const topic = "rw-doomed"
	rwCfg := map[string]string{broker.TopicConfigRemoteWAL: "true"}
	createTopic(t, admin, topic, 2, 3, rwCfg)

	countObjects := func() int {
		k := 0
		if err := objstore.ListAll(context.Background(), store, "", func(objstore.ObjectInfo) error { k++; return nil }); err != nil {
			t.Fatal(err)
		}
		return k
	}

	// Generation 1: a producer that keeps writing through the delete.
	prod1 := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordDeliveryTimeout(2*time.Second), kgo.ProducerLinger(time.Millisecond))
	var acked atomic.Int64
	ctx1, stop1 := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx1.Err() == nil; i++ {
			prod1.Produce(ctx1, &kgo.Record{Value: []byte(fmt.Sprintf("gen1-%06d", i))}, func(_ *kgo.Record, err error) {
				if err == nil {
					acked.Add(1)
					c.feed.Signal()
				}
			})
			if i%50 == 49 {
				_ = prod1.Flush(ctx1)
			}
		}
	}()
	waitFor(t, "generation 1 acknowledged and uploaded", 30*time.Second, func() bool { return acked.Load() >= 400 && countObjects() > 0 }, c.sources()...)
	t.Logf("before the delete: %d records acknowledged, %d objects in the store", acked.Load(), countObjects())

	deleteStart := time.Now()
	resp, err := adm.DeleteTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp[topic].Err; err != nil {
		t.Fatalf("delete: %v", err)
	}
	stop1()
	wg.Wait()
	prod1.Close()
	t.Logf("generation 1: %d records acknowledged in all", acked.Load())

	waitFor(t, "no object of the deleted topic left in the store", 20*time.Second, func() bool { return countObjects() == 0 }, c.sources()...)
	t.Logf("store empty %v after DeleteTopics was sent", time.Since(deleteStart).Round(time.Millisecond))
	for _, r := range c.replicators {
		for p := int32(0); p < 2; p++ {
			tp := metadata.TopicPartition{Topic: topic, Partition: p}
			waitFor(t, "the deletion reached every broker's metadata", 10*time.Second, func() bool {
				st, ok := r.State().PartitionDeleteState(tp)
				return ok && st == metadata.DeletePartitionFinished && len(r.State().Slices(tp, 0)) == 0
			}, c.sources()...)
		}
		waitFor(t, "every object of the deleted topic dropped from metadata", 10*time.Second, func() bool {
			for _, o := range r.State().Objects() {
				if o.MinState() < metadata.DeleteSegmentFinished {
					return false
				}
			}
			return true
		}, c.sources()...)
	}

	// Generation 2 under the same name.
	createTopic(t, admin, topic, 2, 3, rwCfg)
	ts, _ := c.ctrl.Topic(topic)
	for _, ps := range ts.Partitions {
		for _, rid := range ps.Replicas {
			st, ok := c.broker(rid).PartitionStatus(broker.TopicPartition{Topic: topic, Partition: ps.Partition})
			if !ok || st.LogStart != 0 || st.LogEnd != 0 {
				t.Fatalf("broker %d partition %d of the new topic: %+v (present %v), want empty at 0", rid, ps.Partition, st, ok)
			}
		}
	}
	prod2 := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	const n2 = 300
	var recs []*kgo.Record
	for i := range n2 {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("gen2-%06d", i))})
	}
	if err := prod2.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Every replica, leaders and followers (rebuilt from the store), holds
	// generation 2 only, from offset 0.
	for _, ps := range ts.Partitions {
		tp := broker.TopicPartition{Topic: topic, Partition: ps.Partition}
		ll, _ := c.broker(ps.Leader).PartitionLog(tp)
		for _, rid := range ps.Replicas {
			l, _ := c.broker(rid).PartitionLog(tp)
			waitFor(t, "followers caught up on the new topic", 20*time.Second, func() bool { return l.LogEndOffset() == ll.LogEndOffset() }, c.sources()...)
			if l.LogStartOffset() != 0 {
				t.Fatalf("broker %d partition %d starts at %d", rid, ps.Partition, l.LogStartOffset())
			}
			data, err := l.Read(0, 64<<20)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(data, []byte("gen1-")) {
				t.Fatalf("broker %d partition %d of the new topic holds generation-1 bytes", rid, ps.Partition)
			}
		}
	}
	// A consumer in the followers' rack reads generation 2 only, in order.
	cons := newClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Rack("az2"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	next := map[int32]int64{}
	seen := 0
	for seen < n2 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of the new topic", seen, n2)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !bytes.HasPrefix(r.Value, []byte("gen2-")) {
				t.Fatalf("the new topic served %q at %d/%d", r.Value, r.Partition, r.Offset)
			}
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			seen++
		})
	}

	// DeleteRecords on the remotewal topic: acknowledged once every
	// replica (the followers fed from the store) moved its log start.
	os := kadm.Offsets{}
	for p, n := range next {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: n / 2})
	}
	dr, err := adm.DeleteRecords(context.Background(), os)
	if err != nil {
		t.Fatal(err)
	}
	for p, n := range next {
		got, _ := dr.Lookup(topic, p)
		if got.Err != nil || got.LowWatermark != n/2 {
			t.Fatalf("delete records of partition %d before %d: %+v", p, n/2, got)
		}
		for _, rid := range ts.Partitions[p].Replicas {
			st, _ := c.broker(rid).PartitionStatus(broker.TopicPartition{Topic: topic, Partition: p})
			if st.LogStart != n/2 {
				t.Fatalf("broker %d partition %d starts at %d after the acknowledged delete, want %d", rid, p, st.LogStart, n/2)
			}
		}
	}
}

package rwnode

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
)

// cutController is a broker's view of the controller that can be cut off:
// once cut, the broker hears of no more changes (a leader partitioned from
// the controller, still serving).
type cutController struct {
	broker.Controller
	cut atomic.Bool
}

func (c *cutController) Subscribe(fn func(broker.TopicState)) func() {
	return c.Controller.Subscribe(func(ts broker.TopicState) {
		if !c.cut.Load() {
			fn(ts)
		}
	})
}

// putRecorder records the keys put while recording is on.
type putRecorder struct {
	objstore.Store
	recording atomic.Bool
	mu        sync.Mutex
	seen      map[string]bool
}

func (s *putRecorder) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	if s.recording.Load() {
		s.mu.Lock()
		s.seen[key] = true
		s.mu.Unlock()
	}
	return s.Store.Put(ctx, key, body, opts)
}

func (s *putRecorder) keys() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.seen))
	for k := range s.seen {
		out[k] = true
	}
	return out
}

type logRecord struct {
	offset int64
	epoch  int32
	value  string
}

// logRecords decodes every record of an uncompressed log.
func logRecords(t *testing.T, l *kafkalog.Log) []logRecord {
	t.Helper()
	var out []logRecord
	all := segmentBytes(t, l.Segments(), l.ReadSegmentRange)
	err := kafkalog.SplitBatches(all, func(h kafkalog.BatchHeader, batch []byte) error {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(batch); err != nil {
			return err
		}
		if h.Compression() != 0 {
			return fmt.Errorf("batch at %d is compressed", h.BaseOffset)
		}
		src := rb.Records
		for range rb.NumRecords {
			n, k := binary.Varint(src)
			if k <= 0 || int(n)+k > len(src) {
				return fmt.Errorf("bad record length in batch at %d", h.BaseOffset)
			}
			var r kmsg.Record
			if err := r.ReadFrom(src[:k+int(n)]); err != nil {
				return err
			}
			out = append(out, logRecord{offset: h.BaseOffset + int64(r.OffsetDelta), epoch: rb.PartitionLeaderEpoch, value: string(r.Value)})
			src = src[k+int(n):]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rep is broker id's replicator.
func (c *testCluster) rep(id int32) *RemoteWALReplicator { return c.replicators[id-1] }

func logEnd(b *broker.Broker, tp broker.TopicPartition) int64 {
	l, ok := b.PartitionLog(tp)
	if !ok {
		return -1
	}
	return l.LogEndOffset()
}

// maxIndexed is the highest LastOffset r's metadata index holds for tp.
func maxIndexed(r *RemoteWALReplicator, tp broker.TopicPartition) int64 {
	last := int64(-1)
	for _, s := range r.State().Slices(mtp(tp), 0) {
		last = max(last, s.LastOffset)
	}
	return last
}

func produceOne(t *testing.T, cl *kgo.Client, topic, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", v, err)
	}
}

// TestRemoteWALKIPFailover is KIP-1176's failover example, in process: RF
// 3; leader B1 has offsets 0–10 uploaded and published, B2 is at 5 (log
// end 6), B3 at 7 (log end 8); B1 dies with its AZ's store. Elected, B2
// continues at 6: B3 truncates to 6, the dead range says every entry of
// B1's epoch from 6 on is dead, and nothing of B1's past 5 is ever in a
// log or served. Elected, B3 continues at 8: B2 catches up to 8 (from B3,
// since B1's objects are gone) and B1's 8–10 are dead.
func TestRemoteWALKIPFailover(t *testing.T) {
	for _, elect := range []int32{2, 3} {
		t.Run(fmt.Sprintf("elect=B%d", elect), func(t *testing.T) { runKIPFailover(t, elect) })
	}
}

func runKIPFailover(t *testing.T, elect int32) {
	// One store per AZ; B1's (az1) can be lost with it.
	var az1Down atomic.Bool
	stores := map[string]objstore.Store{"az1": downStore{Store: mem.New(), down: &az1Down}, "az2": mem.New(), "az3": mem.New()}
	c := startRemoteWALClusterWith(t, []string{"az1", "az2", "az3"}, nil, func(rc *RemoteWALReplicatorConfig) {
		rc.Store, rc.Stores = nil, NewStoreSet(stores, "", nil)
	})
	topic := "kip"
	tp, oldEpoch := ledByB1(t, c, topic)
	b1, b2, b3 := c.broker(1), c.broker(2), c.broker(3)

	all := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	one := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	for i := range 6 {
		produceOne(t, all, topic, string(value(i)))
	}
	waitFor(t, "every replica at 6", 20*time.Second, func() bool {
		return logEnd(b1, tp) == 6 && logEnd(b2, tp) == 6 && logEnd(b3, tp) == 6
	}, c.sources()...)
	c.rep(2).StopFollower(tp) // B2 stays at 5
	for i := 6; i < 8; i++ {
		produceOne(t, one, topic, string(value(i)))
	}
	waitFor(t, "B3 at 8", 20*time.Second, func() bool { return logEnd(b3, tp) == 8 }, c.sources()...)
	c.rep(3).StopFollower(tp) // B3 stays at 7
	for i := 8; i < 11; i++ {
		produceOne(t, one, topic, string(value(i)))
	}
	waitFor(t, "B1's 0–10 uploaded and published", 20*time.Second, func() bool {
		return maxIndexed(c.rep(2), tp) == 10 && maxIndexed(c.rep(3), tp) == 10
	}, c.sources()...)
	if logEnd(b2, tp) != 6 || logEnd(b3, tp) != 8 {
		t.Fatalf("before the failover B2 at %d, B3 at %d; want 6 and 8", logEnd(b2, tp), logEnd(b3, tp))
	}

	// B1's AZ is lost: the broker and its store.
	az1Down.Store(true)
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.rep(1).Close(ctx); err != nil {
		t.Fatal(err)
	}

	survivors := []*broker.Broker{b2, b3}
	leader, other := b2, b3
	start := int64(6)
	if elect == 3 {
		leader, other, start = b3, b2, 8
	}
	ps, err := c.ctrl.ElectLeader(tp, elect)
	if err != nil {
		t.Fatal(err)
	}
	// What liveness will do: the dead broker leaves the ISR.
	if _, err := c.ctrl.AlterISR(tp, ps.LeaderEpoch, ps.PartitionEpoch, []int32{2, 3}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other survivor at the new leader's log end", 20*time.Second, func() bool {
		return logEnd(other, tp) == start && logEnd(leader, tp) == start
	}, c.sources()...)
	for _, b := range survivors {
		st := c.rep(b.Info().ID).State()
		waitFor(t, fmt.Sprintf("broker %d to see the dead range", b.Info().ID), 20*time.Second, func() bool {
			from, ok := st.DeadFrom(mtp(tp), oldEpoch)
			return ok && from == start
		}, c.sources()...)
		if got := st.DeadRanges(mtp(tp)); len(got) == 0 || got[len(got)-1].LeaderEpoch != ps.LeaderEpoch {
			t.Fatalf("broker %d dead ranges %+v, want one of epoch %d", b.Info().ID, got, ps.LeaderEpoch)
		}
		for _, s := range st.Slices(mtp(tp), 0) {
			if s.LeaderEpoch < ps.LeaderEpoch && s.BaseOffset >= start {
				t.Fatalf("broker %d still indexes dead slice [%d, %d] of epoch %d", b.Info().ID, s.BaseOffset, s.LastOffset, s.LeaderEpoch)
			}
		}
	}

	// The others can see the event before the publisher has counted its
	// acknowledgement.
	waitFor(t, "the new leader to count its dead range", 10*time.Second, func() bool { return c.rep(elect).recon.deadRanges.Load() >= 1 }, c.sources()...)
	if n := c.rep(elect).recon.deadRanges.Load(); n != 1 {
		t.Fatalf("the new leader counts %d dead ranges published, want 1", n)
	}
	// The partition continues at start with the new epoch.
	for i := range 3 {
		produceOne(t, all, topic, fmt.Sprintf("after-%d", i))
	}
	want := start + 3
	waitFor(t, "both survivors at the new end", 20*time.Second, func() bool {
		return logEnd(leader, tp) == want && logEnd(other, tp) == want
	}, c.sources()...)
	// The new leader's remote-WAL task started at its log end with the new
	// epoch: its first slice starts at start, in the new epoch.
	waitFor(t, "the new leader's first slice to be indexed", 20*time.Second, func() bool {
		for _, sl := range c.rep(other.Info().ID).State().Slices(mtp(tp), start) {
			if sl.LeaderEpoch == ps.LeaderEpoch {
				return sl.BaseOffset == start
			}
		}
		return false
	}, c.sources()...)
	// Published up to the new end: the leader's own index (fed from the
	// metadata topic, which holds only published slices) has the new
	// epoch's slice ending there (PublishedOffset moves after the last
	// event a test can wait on).
	waitFor(t, "the new leader's task to publish up to the new end", 20*time.Second, func() bool {
		for _, sl := range c.rep(leader.Info().ID).State().Slices(mtp(tp), start) {
			if sl.LeaderEpoch == ps.LeaderEpoch && sl.LastOffset == want-1 {
				return true
			}
		}
		return false
	}, c.sources()...)
	var first []logRecord
	for _, b := range survivors {
		l, _ := b.PartitionLog(tp)
		recs := logRecords(t, l)
		if int64(len(recs)) != want {
			t.Fatalf("broker %d holds %d records, want %d", b.Info().ID, len(recs), want)
		}
		for _, r := range recs {
			wantV := string(value(int(r.offset)))
			if r.offset >= start {
				wantV = fmt.Sprintf("after-%d", r.offset-start)
				if r.epoch != ps.LeaderEpoch {
					t.Errorf("broker %d offset %d has epoch %d, want %d", b.Info().ID, r.offset, r.epoch, ps.LeaderEpoch)
				}
			}
			if r.value != wantV {
				t.Errorf("broker %d offset %d holds %q, want %q", b.Info().ID, r.offset, r.value, wantV)
			}
		}
		if first == nil {
			first = recs
		} else if fmt.Sprint(first) != fmt.Sprint(recs) {
			t.Errorf("survivors' logs differ:\n%v\n%v", first, recs)
		}
		ll, _ := leader.PartitionLog(tp)
		if !strings.EqualFold(fmt.Sprintf("%x", segmentBytes(t, l.Segments(), l.ReadSegmentRange)),
			fmt.Sprintf("%x", segmentBytes(t, ll.Segments(), ll.ReadSegmentRange))) {
			t.Errorf("broker %d's log is not byte-identical to the new leader's", b.Info().ID)
		}
	}
	// Served: a consumer reading from each survivor's rack sees the
	// continued log and nothing of B1's past the new leader's log end.
	for _, b := range survivors {
		cons := newClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.Rack(b.Info().Rack))
		got := consumeValues(t, cons, int(want))
		for off, v := range got {
			wantV := string(value(off))
			if int64(off) >= start {
				wantV = fmt.Sprintf("after-%d", int64(off)-start)
			}
			if v != wantV {
				t.Errorf("consumer in %s: offset %d is %q, want %q", b.Info().Rack, off, v, wantV)
			}
		}
	}
}

// ledByB1 creates a one-partition remotewal topic of RF 3, makes broker 1
// its leader and returns the partition and that leader epoch.
func ledByB1(t *testing.T, c *testCluster, topic string) (broker.TopicPartition, int32) {
	t.Helper()
	tp := broker.TopicPartition{Topic: topic, Partition: 0}
	createTopic(t, newClient(t, c), topic, 1, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	if ts, _ := c.ctrl.Topic(topic); ts.Partitions[0].Leader != 1 {
		if _, err := c.ctrl.ElectLeader(tp, 1); err != nil {
			t.Fatal(err)
		}
	}
	ts, _ := c.ctrl.Topic(topic)
	waitFor(t, "B1 to lead", 10*time.Second, func() bool { return leaderOf(c.broker(1), tp) }, c.sources()...)
	return tp, ts.Partitions[0].LeaderEpoch
}

func leaderOf(b *broker.Broker, tp broker.TopicPartition) bool {
	st, ok := b.PartitionStatus(tp)
	return ok && st.IsLeader
}

// consumeValues polls until n records arrived and returns their values by
// offset.
func consumeValues(t *testing.T, cl *kgo.Client, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := make([]string, n)
	seen := 0
	for seen < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", seen, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < int64(n) {
				out[r.Offset] = string(r.Value)
				seen++
			}
		})
	}
	return out
}

// A deposed leader still running, cut off from the controller, keeps taking
// produce and uploading slices of its old epoch after the new leader's
// election: none of it is indexed or appended by any follower, it
// acknowledges no acks=all produce, and retention deletes its objects (all
// dead) at once, long before the retention time.
func TestRemoteWALZombieLeaderUploadsNeverAppended(t *testing.T) {
	store := mem.New()
	zombiePuts := &putRecorder{Store: store, seen: map[string]bool{}}
	var b1ctrl *cutController
	c := startRemoteWALClusterBrokers(t, []string{"az1", "az2", "az3"}, store, func(rc *RemoteWALReplicatorConfig) {
		rc.Retention = metadata.RetentionPolicy{Retention: time.Hour}
		rc.MaintenanceInterval = 20 * time.Millisecond
		if rc.BrokerID == 1 {
			zombiePuts.Store = rc.Store
			rc.Store = zombiePuts
		}
	}, func(cfg *broker.Config) {
		if cfg.BrokerID == 1 {
			b1ctrl = &cutController{Controller: cfg.Controller}
			cfg.Controller = b1ctrl
		}
	})
	topic := "zombie"
	tp, oldEpoch := ledByB1(t, c, topic)
	b1, b2, b3 := c.broker(1), c.broker(2), c.broker(3)
	all := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 5 {
		produceOne(t, all, topic, string(value(i)))
	}
	waitFor(t, "every replica at 5", 20*time.Second, func() bool {
		return logEnd(b1, tp) == 5 && logEnd(b2, tp) == 5 && logEnd(b3, tp) == 5
	}, c.sources()...)

	// B1 is cut off from the controller, then B2 is elected.
	b1ctrl.cut.Store(true)
	zombiePuts.recording.Store(true)
	ps, err := c.ctrl.ElectLeader(tp, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctrl.AlterISR(tp, ps.LeaderEpoch, ps.PartitionEpoch, []int32{2, 3}); err != nil {
		t.Fatal(err)
	}
	if !leaderOf(b1, tp) {
		t.Fatal("B1 learned of the election: not a zombie")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// kgo sends a raw ProduceRequest with its client's acks.
	rawOne := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	rawAll := newClient(t, c)
	produceTo := func(acks int16, vals ...string) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		var recs [][]byte
		for _, v := range vals {
			recs = append(recs, []byte(v))
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = acks, 300
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = kafkalogtest.MakeBatch(0, -1, recs, time.Now().UnixMilli())
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		raw := rawAll
		if acks == 1 {
			raw = rawOne
		}
		resp, err := req.RequestWith(ctx, raw.Broker(1))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	for i := range 4 {
		if r := produceTo(1, fmt.Sprintf("zombie-%d", i)); r.ErrorCode != 0 {
			t.Fatalf("zombie refused acks=1 produce %d: %+v", i, r)
		}
	}
	if r := produceTo(-1, "zombie-acks-all"); r.ErrorCode == 0 {
		t.Fatalf("the zombie acknowledged an acks=all produce at offset %d after the new leader's election", r.BaseOffset)
	}
	// The zombie's slices reach its store and the metadata topic... The
	// task's published offset moves in the slice's Done callback, after
	// the last event a test can wait on (remotewal's stage observer runs
	// just before it): the wait ends on the next change of the cluster
	// (the followers' fetches of B2 are one, every long poll at most).
	waitFor(t, "the zombie to publish its uploads", 20*time.Second, func() bool {
		off, err := c.rep(1).WritePath().Manager.PublishedOffset(mtp(tp))
		return err == nil && off == 10
	}, c.sources()...)
	zombieKeys := zombiePuts.keys()
	if len(zombieKeys) == 0 {
		t.Fatal("the zombie uploaded nothing")
	}
	// ...and after them (the metadata partition is ordered) the new leader's.
	for i := range 3 {
		produceOne(t, all, topic, fmt.Sprintf("after-%d", i))
	}
	waitFor(t, "B3 to follow B2", 20*time.Second, func() bool { return logEnd(b3, tp) == 8 }, c.sources()...)
	// Each survivor's metadata consumer applies its partition in order: once
	// it indexed B2's slices up to 7, it applied the zombie's events too.
	waitFor(t, "the survivors to index the new leader's slices", 20*time.Second, func() bool {
		return maxIndexed(c.rep(2), tp) == 7 && maxIndexed(c.rep(3), tp) == 7
	}, c.sources()...)
	for _, b := range []*broker.Broker{b2, b3} {
		for _, s := range c.rep(b.Info().ID).State().Slices(mtp(tp), 0) {
			if s.LeaderEpoch == oldEpoch && s.BaseOffset >= 5 {
				t.Errorf("broker %d indexes the zombie's slice [%d, %d]", b.Info().ID, s.BaseOffset, s.LastOffset)
			}
		}
		l, _ := b.PartitionLog(tp)
		for _, r := range logRecords(t, l) {
			if strings.HasPrefix(r.value, "zombie") {
				t.Errorf("broker %d appended the zombie's %q at %d", b.Info().ID, r.value, r.offset)
			}
		}
	}
	// The zombie's objects hold only dead entries: deleted within a few
	// maintenance runs although the retention time is an hour; the live
	// objects stay.
	stored := func() (zombie, live int) {
		if err := objstore.ListAll(context.Background(), store, "", func(o objstore.ObjectInfo) error {
			if zombieKeys[o.Key] {
				zombie++
			} else {
				live++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return zombie, live
	}
	waitFor(t, "retention to delete the zombie's dead objects", 20*time.Second, func() bool { z, _ := stored(); return z == 0 }, c.sources()...)
	if _, live := stored(); live == 0 {
		t.Fatal("retention deleted live objects before their retention time")
	}
}

// Retention after leadership moves: objects uploaded by a broker that no
// longer leads (and by brokers that led for a while in between) are all
// deleted once every in-sync replica has their entries, so the store ends
// empty while every broker stays up.
func TestRemoteWALRetentionAfterLeadershipMoves(t *testing.T) {
	store := mem.New()
	c := startRemoteWALClusterWith(t, []string{"az1", "az2", "az3"}, store, func(rc *RemoteWALReplicatorConfig) {
		rc.Retention = metadata.RetentionPolicy{Retention: time.Millisecond}
		rc.MaintenanceInterval = 20 * time.Millisecond
	})
	topic := "moves"
	admin := newClient(t, c)
	createTopic(t, admin, topic, 2, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	n := 0
	produce := func(k int) {
		for range k {
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: value(n)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	uploaders := map[int32]bool{}
	produce(100)
	for _, leader := range []int32{1, 2, 3, 1} {
		for p := range int32(2) {
			if _, err := c.ctrl.ElectLeader(broker.TopicPartition{Topic: topic, Partition: p}, leader); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, fmt.Sprintf("broker %d to lead both partitions", leader), 10*time.Second, func() bool {
			return leaderOf(c.broker(leader), broker.TopicPartition{Topic: topic, Partition: 0}) &&
				leaderOf(c.broker(leader), broker.TopicPartition{Topic: topic, Partition: 1})
		}, c.sources()...)
		produce(100)
		for _, o := range c.rep(1).State().Objects() {
			uploaders[o.BrokerID] = true
		}
	}
	countObjects := func() int {
		k := 0
		if err := objstore.ListAll(context.Background(), store, "", func(objstore.ObjectInfo) error { k++; return nil }); err != nil {
			t.Fatal(err)
		}
		return k
	}
	waitFor(t, "retention to empty the store", 30*time.Second, func() bool { return countObjects() == 0 }, c.sources()...)
	if len(uploaders) < 2 {
		t.Fatalf("objects came from brokers %v only: leadership did not move uploads", uploaders)
	}
	for p := range int32(2) {
		tp := broker.TopicPartition{Topic: topic, Partition: p}
		le := logEnd(c.broker(1), tp)
		for _, b := range c.brokers {
			if got := logEnd(b, tp); got != le {
				t.Errorf("broker %d holds %d of %d offsets of partition %d", b.Info().ID, got, le, p)
			}
		}
	}
	if total := logEnd(c.broker(1), broker.TopicPartition{Topic: topic, Partition: 0}) + logEnd(c.broker(1), broker.TopicPartition{Topic: topic, Partition: 1}); total != int64(n) {
		t.Fatalf("logs hold %d records, want %d", total, n)
	}
}

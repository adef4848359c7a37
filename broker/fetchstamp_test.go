package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/kwal/kwal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchStampOrdersFollowerLogEnds: a remote-WAL follower's log end
// report travels on a connection of its own and may reach the leader
// before the long poll sent ahead of it. On the wire, through the
// leader's Fetch handler: a report (newer stamp, log end 10) handled
// before the older fetch (log end 4) keeps the leader's view at 10, so
// the HW does not stall; after a truncation the follower's next fetch
// (newer stamp, lower offset) lowers it, so the HW never passes what the
// follower has; a malformed stamp is refused.
// stampTest is a two-broker cluster with one RF 2 partition and an acks=1
// producer to it: the leader, its partition, and the follower's index in
// c.brokers.
type stampTest struct {
	c       *testCluster
	leader  *Broker
	fi      int
	tp      TopicPartition
	p       *partition
	produce func(n int)
}

func newStampTest(t *testing.T, topic string) stampTest {
	t.Helper()
	c := startCluster(t, []string{"az1", "az2"}, nil)
	createTopic(t, newClient(t, c), topic, 1, 2, nil)
	st := stampTest{c: c, fi: -1, tp: TopicPartition{Topic: topic, Partition: 0}}
	ts, _ := c.ctrl.Topic(topic)
	st.leader = c.broker(ts.Partitions[0].Leader)
	for i, b := range c.brokers {
		if b != st.leader {
			st.fi = i
		}
	}
	st.p = st.leader.partition(st.tp)
	prod := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
	st.produce = func(n int) {
		t.Helper()
		for i := range n {
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: value(i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st
}

func TestFetchStampOrdersFollowerLogEnds(t *testing.T) {
	const topic = "stamps"
	st := newStampTest(t, topic)
	leader, follower, tp, p, produce := st.leader, st.c.brokers[st.fi], st.tp, st.p, st.produce
	produce(10)
	id := follower.cfg.BrokerID
	waitFor(t, "the follower caught up", 10*time.Second, func() bool {
		return p.log.HighWatermark() == 10
	}, leader)
	follower.fetchers.remove(tp) // from here on the test is the follower
	// The follower's own incarnation, at sequence numbers past any its
	// fetcher used: a round of its fetcher still in flight is older.
	inc, base := follower.incarnation, uint64(1)<<40

	conn, err := dialWire(leader.cfg.Dial, leader.Addr(), "test-follower", 5*time.Second, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.close()
	fetch := func(offset int64, tag []byte) *kmsg.FetchResponse {
		t.Helper()
		req := replicaFetchAt(p, topic, id, offset)
		if tag != nil {
			req.UnknownTags.Set(TagFetchStamp, tag)
		}
		r, err := conn.roundTrip(req, time.Now().Add(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return r.(*kmsg.FetchResponse)
	}
	stamped := func(seq uint64, offset int64) {
		t.Helper()
		resp := fetch(offset, binary.AppendUvarint(binary.AppendUvarint(nil, inc), base+seq))
		if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("fetch at %d: %v / %v", offset, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
		}
	}
	followerLEO := func() int64 { return p.status().FollowerLEO[id] }

	produce(5)     // log end 15: the follower has 10
	stamped(2, 12) // the report of 12, read after the fetch below
	stamped(1, 10) // the long poll at 10, handled after the report
	if got := followerLEO(); got != 12 {
		t.Fatalf("after a report of 12 and an older fetch at 10 the leader sees the follower at %d, want 12", got)
	}
	if hw := p.log.HighWatermark(); hw != 12 {
		t.Fatalf("HW %d, want 12: the older fetch stalled it", hw)
	}
	// Truncated to 11 (a divergence, in this same epoch): the next fetch
	// carries a newer stamp and a lower offset.
	stamped(3, 11)
	if got := followerLEO(); got != 11 {
		t.Fatalf("after a truncation to 11 the leader sees the follower at %d, want 11", got)
	}
	stamped(2, 15) // a late report of something older changes nothing
	if got := followerLEO(); got != 11 {
		t.Fatalf("a stale stamp raised the follower to %d, want 11", got)
	}
	if hw := p.log.HighWatermark(); hw != 12 {
		t.Fatalf("HW %d, want 12 (never back, never past the follower's log end as it was told)", hw)
	}
	stamped(4, 15)
	if hw := p.log.HighWatermark(); hw != 15 {
		t.Fatalf("HW %d once the follower has 15, want 15", hw)
	}
	// A malformed stamp is refused, and changes nothing.
	if resp := fetch(0, []byte{0x80}); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("malformed stamp: error %v, want INVALID_REQUEST", kerr.ErrorForCode(resp.ErrorCode))
	}
	if got := followerLEO(); got != 15 {
		t.Fatalf("after a refused fetch the follower is at %d, want 15", got)
	}
}

func TestFetchStampRoundTrip(t *testing.T) {
	for _, s := range []replica.FetchStamp{{}, {Incarnation: 1, Seq: 1}, {Incarnation: ^uint64(0), Seq: 1 << 40},
		{Incarnation: 3, Seq: 9, BrokerEpoch: 1176}, {Incarnation: 1, Seq: 0, BrokerEpoch: math.MaxInt64}} {
		req := kmsg.NewPtrFetchRequest()
		setFetchStamp(req, s)
		got, err := fetchStampOf(&req.UnknownTags)
		if err != nil || got != s {
			t.Fatalf("%+v: got %+v, %v", s, got, err)
		}
	}
	req := kmsg.NewPtrFetchRequest()
	if got, err := fetchStampOf(&req.UnknownTags); err != nil || !got.IsZero() {
		t.Fatalf("no tag: %+v, %v", got, err)
	}
	// A stamp of two uvarints (a broker that sends no epoch) has epoch 0.
	req.UnknownTags.Set(TagFetchStamp, []byte{7, 3})
	if got, err := fetchStampOf(&req.UnknownTags); err != nil || got != (replica.FetchStamp{Incarnation: 7, Seq: 3}) {
		t.Fatalf("two uvarints: %+v, %v", got, err)
	}
	tooBig := binary.AppendUvarint([]byte{1, 2}, math.MaxInt64+1)
	for _, bad := range [][]byte{nil, {0x80}, {1}, {1, 2, 0x80}, {1, 2, 3, 4}, tooBig} {
		req := kmsg.NewPtrFetchRequest()
		req.UnknownTags.Set(TagFetchStamp, bad)
		if _, err := fetchStampOf(&req.UnknownTags); !errors.Is(err, errBadFetchStamp) {
			t.Fatalf("%x: %v, want errBadFetchStamp", bad, err)
		}
	}
}

// FuzzFetchStamp: any tag bytes give a stamp that encodes back to them,
// or errBadFetchStamp; never a panic.
func FuzzFetchStamp(f *testing.F) {
	f.Add([]byte{1, 1})
	f.Add([]byte{0x80})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x05})
	f.Fuzz(func(t *testing.T, v []byte) {
		req := kmsg.NewPtrFetchRequest()
		req.UnknownTags.Set(TagFetchStamp, v)
		s, err := fetchStampOf(&req.UnknownTags)
		if err != nil {
			if !errors.Is(err, errBadFetchStamp) {
				t.Fatal(err)
			}
			return
		}
		back := kmsg.NewPtrFetchRequest()
		setFetchStamp(back, s)
		again, err := fetchStampOf(&back.UnknownTags)
		if err != nil || again != s {
			t.Fatalf("%x: %+v does not round-trip (%+v, %v)", v, s, again, err)
		}
	})
}

// A fetch of a follower's dead process that reaches the leader after the
// restarted process was heard from (a TCP retransmission once a partition
// heals) is stale: the stamps' broker epochs order the two processes, so
// it neither raises the leader's view of the follower nor the HW over
// what the follower has.
func TestFetchStampOfADeadProcessIsStale(t *testing.T) {
	const topic = "restarted"
	st := newStampTest(t, topic)
	c, leader, fi, tp, p, produce := st.c, st.leader, st.fi, st.tp, st.p, st.produce
	hwIs := func(want int64) func() bool { return func() bool { return p.log.HighWatermark() == want } }
	produce(10)
	waitFor(t, "the follower has 10", 10*time.Second, hwIs(10), leader)

	dead := c.brokers[fi]
	id := dead.cfg.BrokerID
	deadInc, deadEpoch := dead.incarnation, dead.BrokerEpoch()
	if deadEpoch <= 0 {
		t.Fatalf("the follower has no registration epoch (%d)", deadEpoch)
	}
	c.stopBroker(t, fi)
	c.startBroker(t, fi)
	follower := c.brokers[fi]
	if follower.BrokerEpoch() <= deadEpoch {
		t.Fatalf("the restarted follower registered at epoch %d, not after %d", follower.BrokerEpoch(), deadEpoch)
	}
	// The new process is heard from: the HW reaches 15 only once it
	// fetched there.
	produce(5)
	waitFor(t, "the restarted follower has 15", 10*time.Second, hwIs(15), leader)
	follower.fetchers.remove(tp) // from here on the test is the follower
	produce(5)                   // log end 20; the follower has 15

	conn, err := dialWire(leader.cfg.Dial, leader.Addr(), "test-follower", 5*time.Second, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.close()
	fetch := func(s replica.FetchStamp, offset int64) {
		t.Helper()
		req := replicaFetchAt(p, topic, id, offset)
		setFetchStamp(req, s)
		r, err := conn.roundTrip(req, time.Now().Add(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		resp := r.(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("fetch at %d: %v / %v", offset, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
		}
	}
	followerLEO := func() int64 { return p.status().FollowerLEO[id] }

	// The dead process's fetch at 20, at a sequence past any it used.
	fetch(replica.FetchStamp{Incarnation: deadInc, Seq: 1 << 40, BrokerEpoch: deadEpoch}, 20)
	if got := followerLEO(); got != 15 {
		t.Fatalf("a fetch of the dead process moved the leader's view of the follower to %d, want 15", got)
	}
	if hw := p.log.HighWatermark(); hw != 15 {
		t.Fatalf("HW %d after a fetch of the dead process, want 15 (the follower has 15)", hw)
	}
	// The live process's own fetch there counts.
	fetch(replica.FetchStamp{Incarnation: follower.incarnation, Seq: 1 << 40, BrokerEpoch: follower.BrokerEpoch()}, 20)
	if got, hw := followerLEO(), p.log.HighWatermark(); got != 20 || hw != 20 {
		t.Fatalf("after the live process's fetch at 20: follower at %d, HW %d, want 20 and 20", got, hw)
	}
}

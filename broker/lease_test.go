package broker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cutController is a MemController whose heartbeats from some brokers are
// lost, as when those brokers are cut off from the metadata Kafka.
type cutController struct {
	*MemController
	mu  sync.Mutex
	cut map[int32]bool
}

func (c *cutController) setCut(id int32, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut[id] = cut
}

func (c *cutController) Heartbeat(id int32, epoch int64) (bool, error) {
	c.mu.Lock()
	cut := c.cut[id]
	c.mu.Unlock()
	if cut {
		return true, errors.New("test: cut off from the controller")
	}
	return c.MemController.Heartbeat(id, epoch)
}

// TestLeaseSelfFencing: a leader that cannot heartbeat for the session
// timeout refuses produces (NOT_LEADER_OR_FOLLOWER) before anyone else is
// elected; the controller then fences it and elects the follower; when it
// reaches the controller again it registers a new life and follows. Time
// moves only through the manual clock.
func TestLeaseSelfFencing(t *testing.T) {
	const session = 9 * time.Second
	clk := clock.NewManual(t0)
	mem := NewMemController(nil, 1000)
	mem.EnableLiveness(LivenessConfig{SessionTimeout: session, Clock: clk, Logger: testLogger(t, slog.LevelWarn)})
	ctrl := &cutController{MemController: mem, cut: map[int32]bool{}}
	var brokers []*Broker
	for id := int32(1); id <= 2; id++ {
		b, err := New(Config{
			BrokerID: id, Rack: "az1", Listener: "127.0.0.1:0", LogDir: t.TempDir(),
			Controller: ctrl, Ledger: ledger.New(), Logger: testLogger(t, slog.LevelWarn), Clock: clk,
			// The loop heartbeats when the test moves the clock; the test
			// also sends heartbeats itself, so that they are known to have
			// happened at a given time.
			BrokerHeartbeatInterval: time.Second, BrokerSessionTimeout: session,
			LeaderImbalanceCheckInterval: 24 * time.Hour, ReplicaLagTimeMax: 24 * time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		brokers = append(brokers, b)
	}
	ts, err := mem.CreateTopic(TopicSpec{Name: "lease", Partitions: 1, ReplicationFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	ps := ts.Partitions[0]
	leader, follower := brokers[ps.Leader-1], brokers[2-ps.Leader]
	cl, err := kgo.NewClient(kgo.SeedBrokers(leader.Addr(), follower.Addr()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce := func(to *Broker) int16 { return produceOne(t, ctx, cl, to, "lease", 1) }
	if code := produce(leader); code != 0 {
		t.Fatalf("produce to a leader with a lease: %v", kerr.ErrorForCode(code))
	}
	ctrl.setCut(leader.cfg.BrokerID, true)
	clk.Advance(session / 2)
	leader.heartbeat()
	follower.heartbeat()
	if code := produce(leader); code != 0 {
		t.Fatalf("produce half a session after the last heartbeat: %v", kerr.ErrorForCode(code))
	}
	clk.Advance(session / 2)
	leader.heartbeat() // still cut: the lease ran out at registration + session
	if code := produce(leader); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a leader whose lease ran out: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}
	// The controller has not fenced it yet (its session counts from the
	// last heartbeat the controller heard): self-fencing came first.
	if got := mem.CheckLiveness(); len(got) != 0 {
		t.Fatalf("controller fenced %v before the session timeout", got)
	}
	clk.Advance(time.Millisecond)
	follower.heartbeat()
	if got := mem.CheckLiveness(); len(got) != 1 || got[0].ID != leader.cfg.BrokerID {
		t.Fatalf("fenced %v, want the cut-off leader %d", got, leader.cfg.BrokerID)
	}
	st, _ := follower.PartitionStatus(TopicPartition{Topic: "lease", Partition: 0})
	if !st.IsLeader || st.State.LeaderEpoch != ps.LeaderEpoch+1 {
		t.Fatalf("follower after the fence: %+v", st)
	}
	if code := produce(follower); code != 0 {
		t.Fatalf("produce to the new leader: %v", kerr.ErrorForCode(code))
	}
	// Back in touch: the old life is fenced, so it registers a new one
	// and follows; its lease is valid again but it leads nothing.
	oldEpoch := leader.BrokerEpoch()
	ctrl.setCut(leader.cfg.BrokerID, false)
	leader.heartbeat()
	if leader.BrokerEpoch() <= oldEpoch {
		t.Fatalf("broker epoch %d after re-registering, was %d", leader.BrokerEpoch(), oldEpoch)
	}
	if st, _ := leader.PartitionStatus(TopicPartition{Topic: "lease", Partition: 0}); st.IsLeader {
		t.Fatalf("deposed leader leads again: %+v", st)
	}
	if code := produce(leader); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to the deposed leader: %v", kerr.ErrorForCode(code))
	}
}

// TestPreferredLeaderReturns: with liveness on (a short session on the
// manual clock; the test sends the heartbeats and runs the session check),
// a preferred leader that lost leadership and is in the ISR is elected
// back by its own rebalance check; one that is fenced is not, and a
// partition with no live replica in its ISR has no leader.
func TestPreferredLeaderReturns(t *testing.T) {
	const session, rebalance = time.Second, 200 * time.Millisecond
	c := startCluster(t, []string{"az1", "az2", "az3"}, func(cfg *Config) {
		cfg.BrokerSessionTimeout, cfg.BrokerHeartbeatInterval = session, session-time.Millisecond
		cfg.LeaderImbalanceCheckInterval = rebalance
	})
	c.ctrl.EnableLiveness(LivenessConfig{SessionTimeout: session, Clock: c.clk, Logger: testLogger(t, slog.LevelWarn)})
	for _, b := range c.brokers {
		b.heartbeat() // learns that sessions are watched; a lease of one session
	}
	cl := newClient(t, c)
	createTopic(t, cl, "pref", 1, 3, nil)
	tp := TopicPartition{Topic: "pref", Partition: 0}
	ts, _ := c.ctrl.Topic("pref")
	pref := ts.Partitions[0].Replicas[0]
	// A one-replica topic on the preferred broker: leaderless once it is
	// fenced.
	lone, err := c.ctrl.CreateTopic(TopicSpec{Name: "lone", Partitions: 3, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	var loneP int32 = -1
	for _, ps := range lone.Partitions {
		if ps.Leader == pref {
			loneP = ps.Partition
		}
	}
	if loneP < 0 {
		t.Fatalf("no partition of lone on broker %d: %+v", pref, lone.Partitions)
	}
	if _, err := c.ctrl.ElectLeader(tp, ts.Partitions[0].Replicas[1]); err != nil {
		t.Fatal(err)
	}
	c.clk.Advance(rebalance) // the rebalance checks run
	waitFor(t, "the preferred leader back", 20*time.Second, func() bool {
		ts, _ := c.ctrl.Topic("pref")
		return ts.Partitions[0].Leader == pref
	}, c.sources()...)
	ts, _ = c.ctrl.Topic("pref")
	if ts.Partitions[0].LeaderEpoch != 2 {
		t.Fatalf("leader epoch %d after moving away and back, want 2", ts.Partitions[0].LeaderEpoch)
	}
	// Stop the preferred broker: fenced after the session, a new leader,
	// and no rebalance can elect the fenced one back.
	if err := c.broker(pref).Close(); err != nil {
		t.Fatal(err)
	}
	c.clk.Advance(session + time.Millisecond)
	for _, b := range c.brokers {
		if b.cfg.BrokerID != pref {
			b.heartbeat()
		}
	}
	if fenced := c.ctrl.CheckLiveness(); len(fenced) != 1 || fenced[0].ID != pref {
		t.Fatalf("session check fenced %+v, want only broker %d", fenced, pref)
	}
	waitFor(t, "a leader other than the stopped one", 20*time.Second, func() bool {
		ts, _ := c.ctrl.Topic("pref")
		return ts.Partitions[0].Leader != pref && ts.Partitions[0].Leader >= 0
	}, c.sources()...)
	ts, _ = c.ctrl.Topic("pref")
	if slices.Contains(ts.Partitions[0].ISR, pref) {
		t.Fatalf("fenced broker %d still in the ISR: %+v", pref, ts.Partitions[0])
	}
	// Its lone replica: no leader, said so in Metadata (LEADER_NOT_AVAILABLE,
	// the fenced replica offline), the ISR kept for a clean return.
	other := c.brokers[0]
	if other.cfg.BrokerID == pref {
		other = c.brokers[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("lone")
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(other.cfg.BrokerID)))
	if err != nil {
		t.Fatal(err)
	}
	mp := resp.Topics[0].Partitions[loneP]
	if mp.Leader != -1 || mp.ErrorCode != kerr.LeaderNotAvailable.Code || !slices.Equal(mp.ISR, []int32{pref}) || !slices.Equal(mp.OfflineReplicas, []int32{pref}) {
		t.Fatalf("metadata of a partition whose only replica is fenced: leader %d error %v ISR %v offline %v",
			mp.Leader, kerr.ErrorForCode(mp.ErrorCode), mp.ISR, mp.OfflineReplicas)
	}
}

// TestControlledShutdown: Shutdown fences the broker's own registration,
// so its partitions have new leaders when it returns, without waiting for
// the session to expire; the stopped broker does not register again.
func TestControlledShutdown(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az3"}, func(cfg *Config) {
		cfg.BrokerSessionTimeout, cfg.BrokerHeartbeatInterval = time.Hour, time.Minute
	})
	c.ctrl.EnableLiveness(LivenessConfig{SessionTimeout: time.Hour, Logger: testLogger(t, slog.LevelWarn)})
	for _, b := range c.brokers {
		b.heartbeat() // learns that sessions are watched
	}
	ts, err := c.ctrl.CreateTopic(TopicSpec{Name: "cs", Partitions: 3, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	victim := c.broker(ts.Partitions[0].Leader)
	epoch := victim.BrokerEpoch()
	if err := victim.Shutdown(); err != nil {
		t.Fatal(err)
	}
	after, _ := c.ctrl.Topic("cs")
	for i, ps := range after.Partitions {
		if ps.Leader == victim.cfg.BrokerID || slices.Contains(ps.ISR, victim.cfg.BrokerID) {
			t.Fatalf("partition %d %+v: shut-down broker still leads or is in sync", i, ps)
		}
		if ts.Partitions[i].Leader == victim.cfg.BrokerID && ps.LeaderEpoch != ts.Partitions[i].LeaderEpoch+1 {
			t.Fatalf("partition %d: leader epoch %d, want bumped", i, ps.LeaderEpoch)
		}
	}
	for _, r := range c.ctrl.Registrations() {
		if r.ID == victim.cfg.BrokerID && (!r.Fenced || r.Epoch != epoch) {
			t.Fatalf("registration after shutdown: %+v (epoch was %d)", r, epoch)
		}
	}
	victim.heartbeat() // a late heartbeat must not bring it back
	for _, r := range c.ctrl.Registrations() {
		if r.ID == victim.cfg.BrokerID && !r.Fenced {
			t.Fatalf("shut-down broker registered again: %+v", r)
		}
	}
}

// produceOne sends one acks produce of one record to partition 0 of topic
// on broker to only, and returns the partition's error code.
func produceOne(t *testing.T, ctx context.Context, cl *kgo.Client, to *Broker, topic string, acks int16) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = kafkalogtest.Encode(kafkalogtest.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1,
		Records: []kafkalogtest.Record{{Value: []byte("v")}}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(to.cfg.BrokerID)))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

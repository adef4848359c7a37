package broker

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// heldApplier makes a KafkaController lag behind its log, as the
// controller inside a paused (SIGSTOP) broker does: while holding, the
// records it consumes are kept back, unapplied, and the arrival of one
// record key is signalled; release applies them in order.
type heldApplier struct {
	mu      sync.Mutex
	holding bool
	held    []*kgo.Record
	apply   func(*kgo.Record)
	watch   string
	seen    chan struct{}
}

func (h *heldApplier) hook(r *kgo.Record, apply func(*kgo.Record)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.apply = apply
	if !h.holding {
		apply(r)
		return
	}
	h.held = append(h.held, r)
	if h.seen != nil && string(r.Key) == h.watch {
		close(h.seen)
		h.seen = nil
	}
}

// hold starts keeping records back; the channel closes when a record
// keyed watch has been consumed (and kept back).
func (h *heldApplier) hold(watch string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holding, h.watch, h.seen = true, watch, make(chan struct{})
	return h.seen
}

func (h *heldApplier) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.held {
		h.apply(r)
	}
	h.held, h.holding = nil, false
}

// newHeldKafkaController is a KafkaController with liveness on whose
// applier h can hold back. Its session timeout is long and its clock
// manual, so that it fences nobody by itself: the test fences.
func newHeldKafkaController(t *testing.T, emb *metadata.Embedded, id string, clk clock.Clock, h *heldApplier) *KafkaController {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := KafkaControllerConfig{
		Bootstrap: emb.Bootstrap(), Logger: quietLogger(), RequestTimeout: 20 * time.Second,
		InstanceID: id, SessionTimeout: time.Hour, Clock: clk,
	}
	if h != nil {
		cfg.applyHook = h.hook
	}
	c, err := NewKafkaController(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestKafkaControllerHeartbeatBehindFence: another controller fences a
// broker's registration while the broker's own controller has not applied
// that fence yet (the broker was paused). The broker's next heartbeat,
// written after the fence, must be refused: it is judged where it lands
// in the log, not against the stale view of the controller that sent it.
// Judged on the stale view, it was acknowledged, and the resumed broker
// renewed its lease on a leadership it had lost (issue 11).
func TestKafkaControllerHeartbeatBehindFence(t *testing.T) {
	emb := startKfake(t)
	clk := clock.NewManual(t0)
	var held heldApplier
	zombie := newHeldKafkaController(t, emb, "zombie", clk, &held)
	other := newHeldKafkaController(t, emb, "other", clk, nil)
	info := BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9001, Rack: "az1"}
	reg, err := zombie.RegisterBroker(info)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zombie.Heartbeat(1, reg.Epoch); err != nil {
		t.Fatalf("heartbeat of a live registration: %v", err)
	}
	seen := held.hold("heartbeat/1")
	if res, err := other.fence(1, reg.Epoch); err != nil || res.err != nil {
		t.Fatalf("fence: %v %v", err, res.err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := zombie.Heartbeat(1, reg.Epoch)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("heartbeat answered (err %v) before its controller applied it: judged on a view without the fence", err)
	case <-seen:
	}
	held.release()
	if err := <-done; !errors.Is(err, ErrBrokerFenced) {
		t.Fatalf("heartbeat written after the fence of its registration: err %v, want ErrBrokerFenced", err)
	}
	// A new life heartbeats normally.
	reg2, err := zombie.RegisterBroker(info)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zombie.Heartbeat(1, reg2.Epoch); err != nil {
		t.Fatalf("heartbeat of the new registration: %v", err)
	}
	if _, err := zombie.Heartbeat(1, reg.Epoch); !errors.Is(err, ErrBrokerFenced) {
		t.Fatalf("heartbeat of the superseded registration: %v, want ErrBrokerFenced", err)
	}
}

// TestZombieLeaderResumesBehindFence is the multi-process zombie test
// (integration/TestFailoverZombieLeader) in one process, deterministic:
// two brokers, each with its own KafkaController on one kfake, a manual
// clock. The leader of a remotewal partition stops (its controller holds
// back what it consumes); the other controller fences it and the follower
// is elected. Then the clock passes the zombie's lease end and its
// heartbeat loop runs, before its controller has caught up: that
// heartbeat must not renew its lease on the old leadership (it lands
// behind the fence, so the zombie registers a new life and follows), its
// slice task must be parked as soon as it sees its lease gone, and it must
// acknowledge no produce.
func TestZombieLeaderResumesBehindFence(t *testing.T) {
	const session = 9 * time.Second
	emb := startKfake(t)
	clk := clock.NewManual(t0)
	held := map[int32]*heldApplier{}
	ctrls := map[int32]*KafkaController{}
	recs := map[int32]*recReplicator{}
	beats := map[int32]chan struct{}{}
	brokers := map[int32]*Broker{}
	for id := int32(1); id <= 2; id++ {
		held[id] = &heldApplier{}
		ctrls[id] = newHeldKafkaController(t, emb, "ctrl-"+strconv.Itoa(int(id)), clk, held[id])
		recs[id] = newRecReplicator()
		beats[id] = make(chan struct{}, 16)
		b, err := New(Config{
			BrokerID: id, Rack: "az" + strconv.Itoa(int(id)), Listener: "127.0.0.1:0", LogDir: t.TempDir(),
			Controller: ctrls[id], Ledger: ledger.New(), Logger: testLogger(t, slog.LevelWarn), Clock: clk,
			Replicator: recs[id], RemoteWAL: RemoteWALConfig{SystemEnable: true},
			BrokerHeartbeatInterval: session - time.Second, BrokerSessionTimeout: session,
			LeaderImbalanceCheckInterval: 24 * time.Hour, ReplicaLagTimeMax: 24 * time.Hour,
			afterHeartbeat: func() { beats[id] <- struct{}{} },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		brokers[id] = b
	}
	// Broker 2 registered through its own controller: ctrl-1 must have
	// applied that registration before it can place two replicas.
	waitFor(t, "ctrl-1 to know both brokers", 30*time.Second, func() bool { return len(ctrls[1].Brokers()) == 2 }, ctrls[1])
	ts, err := ctrls[1].CreateTopic(TopicSpec{Name: "zombie", Partitions: 1, ReplicationFactor: 2,
		Configs: map[string]string{TopicConfigRemoteWAL: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "zombie", Partition: 0}
	ps := ts.Partitions[0]
	zid := ps.Leader
	nid := 3 - zid
	zombie, next := brokers[zid], brokers[nid]
	// A heartbeat is answered once its controller has applied it, and so
	// every record before it: then each broker has taken up the topic.
	for _, b := range brokers {
		b.heartbeat()
	}
	if !recs[zid].leads(tp) {
		st, _ := zombie.PartitionStatus(tp)
		t.Fatalf("the leader's remote-WAL slice task did not start: %+v, created %+v", st, ps)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(zombie.Addr(), next.Addr()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code := produceOne(t, ctx, cl, zombie, "zombie", 1); code != 0 {
		t.Fatalf("produce to the leader: %v", kerr.ErrorForCode(code))
	}

	// The zombie's controller consumes nothing more (the zombie is
	// paused); the other controller fences it, and its partition moves.
	seen := held[zid].hold("heartbeat/" + strconv.Itoa(int(zid)))
	zombieEpoch := zombie.BrokerEpoch()
	if res, err := ctrls[nid].fence(zid, zombieEpoch); err != nil || res.err != nil {
		t.Fatalf("fence: %v %v", err, res.err)
	}
	if st, _ := next.PartitionStatus(tp); !st.IsLeader || st.State.LeaderEpoch != ps.LeaderEpoch+1 {
		t.Fatalf("after the fence, broker %d: %+v", nid, st)
	}
	// Past the zombie's lease end: both heartbeat loops run; the zombie's
	// controller still lacks the fence.
	clk.Advance(session + time.Millisecond)
	<-beats[nid]
	select {
	case <-beats[zid]:
		// Answered without waiting for its own record: the checks below
		// show what the zombie did with that answer.
	case <-seen:
		if recs[zid].leads(tp) {
			t.Error("a leader whose lease ran out still runs its remote-WAL slice task")
		}
		if code := produceOne(t, ctx, cl, zombie, "zombie", 1); code != kerr.NotLeaderForPartition.Code {
			t.Errorf("produce to a leader whose lease ran out: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
		}
		held[zid].release()
		<-beats[zid]
	}
	held[zid].release()
	if zombie.BrokerEpoch() == zombieEpoch {
		t.Fatalf("the zombie's heartbeat behind its fence was acknowledged: it kept broker epoch %d (and renewed its lease) instead of registering again", zombieEpoch)
	}
	if st, _ := zombie.PartitionStatus(tp); st.IsLeader || st.State.LeaderEpoch <= ps.LeaderEpoch {
		t.Fatalf("the resumed zombie: %+v", st)
	}
	if recs[zid].leads(tp) {
		t.Fatal("the deposed leader runs its remote-WAL slice task")
	}
	if code := produceOne(t, ctx, cl, zombie, "zombie", 1); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to the deposed leader: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}
	if code := produceOne(t, ctx, cl, next, "zombie", 1); code != 0 {
		t.Fatalf("produce to the new leader: %v", kerr.ErrorForCode(code))
	}
}

// TestLeaseExpiryParksRemoteWAL: a remotewal leader whose heartbeats stop
// being acknowledged, but which the controller has not fenced, parks its
// slice task when its lease runs out and restarts it, at the same leader
// epoch, when a heartbeat is acknowledged again.
func TestLeaseExpiryParksRemoteWAL(t *testing.T) {
	const session = 9 * time.Second
	clk := clock.NewManual(t0)
	mem := NewMemController(nil, 1000)
	mem.EnableLiveness(LivenessConfig{SessionTimeout: session, Clock: clk, Logger: testLogger(t, slog.LevelWarn)})
	ctrl := &cutController{MemController: mem, cut: map[int32]bool{}}
	rec := newRecReplicator()
	beats := make(chan struct{}, 16)
	b, err := New(Config{
		BrokerID: 1, Rack: "az1", Listener: "127.0.0.1:0", LogDir: t.TempDir(),
		Controller: ctrl, Ledger: ledger.New(), Logger: testLogger(t, slog.LevelError), Clock: clk,
		Replicator: rec, RemoteWAL: RemoteWALConfig{SystemEnable: true},
		BrokerHeartbeatInterval: session - time.Second, BrokerSessionTimeout: session,
		LeaderImbalanceCheckInterval: 24 * time.Hour, ReplicaLagTimeMax: 24 * time.Hour,
		afterHeartbeat: func() { beats <- struct{}{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := mem.CreateTopic(TopicSpec{Name: "park", Partitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{TopicConfigRemoteWAL: "true"}}); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "park", Partition: 0}
	if !rec.leads(tp) {
		t.Fatal("slice task not started")
	}
	ctrl.setCut(1, true)
	clk.Advance(session) // the loop's heartbeat is lost; the lease ends
	<-beats
	if rec.leads(tp) {
		t.Fatal("slice task still running after the lease ran out")
	}
	ctrl.setCut(1, false)
	b.heartbeat()
	if !rec.leads(tp) {
		t.Fatal("slice task not restarted when the lease was renewed at the same leader epoch")
	}
}

// leads reports whether the broker has a slice task running for tp.
func (r *recReplicator) leads(tp TopicPartition) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.mu.leads[tp]
	return ok
}

package broker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// recReplicator is a Replicator that only records what the broker hands
// it, so a test can drive the FollowerReplica handles itself.
type recReplicator struct {
	started chan FollowerReplica
	mu      struct {
		sync.Mutex
		leads   map[TopicPartition]int32 // leader epoch
		stopped []TopicPartition         // StopFollower calls
	}
}

var _ Replicator = (*recReplicator)(nil)

func newRecReplicator() *recReplicator {
	r := &recReplicator{started: make(chan FollowerReplica, 16)}
	r.mu.leads = map[TopicPartition]int32{}
	return r
}

func (r *recReplicator) StartLeader(tp TopicPartition, _ *kafkalog.Log, leaderEpoch int32, _ int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.leads[tp] = leaderEpoch
	return nil
}

func (r *recReplicator) StopLeader(tp TopicPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.mu.leads, tp)
}

func (r *recReplicator) StartFollower(h FollowerReplica) error {
	r.started <- h
	return nil
}

func (r *recReplicator) StopFollower(tp TopicPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.stopped = append(r.mu.stopped, tp)
}

func nextHandle(t *testing.T, r *recReplicator) FollowerReplica {
	t.Helper()
	select {
	case h := <-r.started:
		return h
	case <-time.After(20 * time.Second):
		t.Fatal("the broker never started a remote-WAL follow")
		return nil
	}
}

// The handle a follower's Replicator gets is the whole seam: it names the
// follow (partition, leader epoch, leader address and rack), appends the
// leader's bytes as follower, truncates, dials the leader, and refuses to
// append once the replica moved past its follow — here because the
// follower was elected leader — so a replicator holding a stale handle
// cannot write into a log it no longer follows.
func TestFollowerReplicaHandle(t *testing.T) {
	recs := map[int32]*recReplicator{}
	c := startCluster(t, []string{"az1", "az2"}, func(cfg *Config) {
		r := newRecReplicator()
		recs[cfg.BrokerID] = r
		cfg.Replicator = r
		cfg.RemoteWAL.SystemEnable = true
	})
	admin := newClient(t, c)
	createTopic(t, admin, "h", 1, 2, map[string]string{TopicConfigRemoteWAL: "true"})
	ts, _ := c.ctrl.Topic("h")
	ps := ts.Partitions[0]
	tp := TopicPartition{Topic: "h", Partition: 0}
	var fid int32
	for _, r := range ps.Replicas {
		if r != ps.Leader {
			fid = r
		}
	}
	h := nextHandle(t, recs[fid])
	leader := c.broker(ps.Leader)
	if h.TopicPartition() != tp || h.LeaderEpoch() != ps.LeaderEpoch {
		t.Fatalf("handle of %v at epoch %d, want %v at %d", h.TopicPartition(), h.LeaderEpoch(), tp, ps.LeaderEpoch)
	}
	if got, want := h.Leader(), (ReplicaLeader{ID: ps.Leader, Addr: leader.Info().Addr(), Rack: leader.Info().Rack}); got != want {
		t.Fatalf("Leader() = %+v, want %+v", got, want)
	}

	// The leader's bytes, appended through the handle, as a replicator
	// reading them back from object storage would.
	prod := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("h"))
	for i := range 3 {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: value(i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ll, _ := leader.PartitionLog(tp)
	var batches []byte
	for _, s := range ll.Segments() {
		b, err := ll.ReadSegmentRange(s.BaseOffset, 0, s.Size)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b...)
	}
	if _, err := h.AppendAsFollower(batches); err != nil {
		t.Fatal(err)
	}
	if h.LogEndOffset() != ll.LogEndOffset() {
		t.Fatalf("follower log end %d after the append, leader's %d", h.LogEndOffset(), ll.LogEndOffset())
	}
	if e, ok := h.LatestEpoch(); !ok || e != ps.LeaderEpoch || len(h.EpochEntries()) != 1 {
		t.Fatalf("epochs after the append: latest %d %v, entries %+v", e, ok, h.EpochEntries())
	}
	// A duplicate append is refused by the log, and changes nothing.
	if _, err := h.AppendAsFollower(batches); err == nil {
		t.Fatal("the same batches appended twice")
	}
	if err := h.Truncate(1); err != nil || h.LogEndOffset() != 1 {
		t.Fatalf("truncate to 1: %v, log end %d", err, h.LogEndOffset())
	}
	h.Notify()

	conn, err := h.Dial(h.Leader().Addr, "handle-test", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	resp, err := conn.RoundTrip(req, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if av := resp.(*kmsg.ApiVersionsResponse); av.ErrorCode != 0 || len(av.ApiKeys) == 0 {
		t.Fatalf("ApiVersions through the handle's connection: %+v", av)
	}

	// Elect the follower: its handle is stale from then on.
	nps, err := c.ctrl.ElectLeader(tp, fid)
	if err != nil {
		t.Fatal(err)
	}
	before := h.LogEndOffset()
	if _, err := h.AppendAsFollower(kafkalogtest.MakeBatchN(before, ps.LeaderEpoch, 1, 10, 1)); !errors.Is(err, ErrStaleFollow) {
		t.Fatalf("append through a stale handle: %v, want ErrStaleFollow", err)
	}
	if h.LogEndOffset() != before {
		t.Fatalf("a refused append moved the log end from %d to %d", before, h.LogEndOffset())
	}
	recs[fid].mu.Lock()
	epoch, leads := recs[fid].mu.leads[tp]
	stopped := len(recs[fid].mu.stopped)
	recs[fid].mu.Unlock()
	if !leads || epoch != nps.LeaderEpoch || stopped == 0 {
		t.Fatalf("new leader: StartLeader epoch %d (called %v), want %d; StopFollower calls %d", epoch, leads, nps.LeaderEpoch, stopped)
	}
	// The old leader now follows at the new epoch, with a handle of its own.
	h2 := nextHandle(t, recs[ps.Leader])
	if h2.LeaderEpoch() != nps.LeaderEpoch || h2.Leader().ID != fid {
		t.Fatalf("old leader's follow: epoch %d leader %d, want %d and %d", h2.LeaderEpoch(), h2.Leader().ID, nps.LeaderEpoch, fid)
	}
}

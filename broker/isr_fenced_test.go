package broker

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterCounter is a MemController that records every AlterISR asked.
type alterCounter struct {
	*MemController
	mu      sync.Mutex
	asked   [][]int32
	refused int
}

func (c *alterCounter) AlterISR(tp TopicPartition, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error) {
	ps, err := c.MemController.AlterISR(tp, leaderEpoch, partitionEpoch, isr)
	c.mu.Lock()
	c.asked = append(c.asked, slices.Clone(isr))
	if err != nil {
		c.refused++
	}
	c.mu.Unlock()
	return ps, err
}

func (c *alterCounter) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.asked), c.refused
}

// TestFencedReplicaNotProposedForISR: a follower paused past its session
// is fenced and leaves the ISR; resumed, it fetches again (caught up)
// before it has registered again. The leader must not propose it for the
// ISR while its registration is fenced (the controller would refuse every
// proposal: the "alter ISR refused" lines of issue 12), and must once it
// has registered a new life.
func TestFencedReplicaNotProposedForISR(t *testing.T) {
	const session = 9 * time.Second
	clk := clock.NewManual(t0)
	mem := NewMemController(nil, 1000)
	mem.EnableLiveness(LivenessConfig{SessionTimeout: session, Clock: clk, Logger: testLogger(t, slog.LevelWarn)})
	ctrl := &alterCounter{MemController: mem}
	b, err := New(Config{
		BrokerID: 1, Rack: "az1", Listener: "127.0.0.1:0", LogDir: t.TempDir(),
		Controller: ctrl, Ledger: ledger.New(), Logger: testLogger(t, slog.LevelWarn), Clock: clk,
		BrokerHeartbeatInterval: time.Second, BrokerSessionTimeout: session,
		LeaderImbalanceCheckInterval: 24 * time.Hour, ReplicaLagTimeMax: 24 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	// Broker 2 is played by the test: it registers, then falls silent.
	if _, err := mem.RegisterBroker(BrokerInfo{ID: 2, Host: "127.0.0.1", Port: 1, Rack: "az2"}); err != nil {
		t.Fatal(err)
	}
	ts, err := mem.CreateTopic(TopicSpec{Name: "fenced", Partitions: 1, ReplicationFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "fenced", Partition: 0}
	if ts.Partitions[0].Leader != 1 {
		if _, err := mem.ElectLeader(tp, 1); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(session + time.Millisecond)
	b.heartbeat()
	if got := mem.CheckLiveness(); len(got) != 1 || got[0].ID != 2 {
		t.Fatalf("fenced %v, want broker 2", got)
	}
	waitFor(t, "broker 2 out of the ISR at the leader", 10*time.Second, func() bool {
		st, ok := b.PartitionStatus(tp)
		return ok && st.IsLeader && !slices.Contains(st.State.ISR, 2)
	}, b, mem)

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	replicaFetch := func() {
		t.Helper()
		st, _ := b.PartitionStatus(tp)
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = 11, 2, 1<<20, -1
		req.ReplicaState.ID = 2 // kgo sends v15+: the replica id is there
		rt := kmsg.NewFetchRequestTopic()
		ts, _ := b.ctrl.Topic(tp.Topic)
		rt.Topic, rt.TopicID = tp.Topic, ts.ID // and v13+ name topics by id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = 0, 0, st.State.LeaderEpoch, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("replica fetch: %v", kerr.ErrorForCode(code))
		}
	}
	// The resumed, still fenced broker fetches, caught up, again and again.
	for range 20 {
		replicaFetch()
	}
	if asked, refused := ctrl.counts(); asked != 0 || refused != 0 {
		t.Fatalf("the leader proposed a fenced replica for the ISR %d times (%d refused)", asked, refused)
	}
	// Registered again: its next caught-up fetch brings it back.
	if _, err := mem.RegisterBroker(BrokerInfo{ID: 2, Host: "127.0.0.1", Port: 1, Rack: "az2"}); err != nil {
		t.Fatal(err)
	}
	replicaFetch()
	waitFor(t, "broker 2 back in the ISR", 10*time.Second, func() bool {
		st, _ := b.PartitionStatus(tp)
		return slices.Contains(st.State.ISR, 2)
	}, b, mem)
	if asked, refused := ctrl.counts(); asked != 1 || refused != 0 {
		t.Fatalf("after re-registering: %d proposals, %d refused; want one, accepted", asked, refused)
	}
}

package broker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/kafkalog/faultfs"
	"github.com/kwal/kwal/objstore/ledger"
)

// lossyReports is a MemController whose first log-dir reports are lost,
// as when the metadata Kafka does not answer; every attempt is signalled.
type lossyReports struct {
	*MemController
	mu       sync.Mutex
	lose     int
	attempts chan int32
}

func (c *lossyReports) ReportLogDirOffline(id int32, epoch int64) error {
	c.attempts <- id
	c.mu.Lock()
	lose := c.lose > 0
	c.lose--
	c.mu.Unlock()
	if lose {
		return errors.New("test: the report was lost")
	}
	return c.MemController.ReportLogDirOffline(id, epoch)
}

func registrationOf(c Controller, id int32) BrokerRegistration {
	for _, r := range c.Registrations() {
		if r.ID == id {
			return r
		}
	}
	return BrokerRegistration{}
}

// TestLogDirOfflineHandsOffLeadership: the leader's log dir turns
// read-only. With the clock standing still (no heartbeat, no session
// timeout), its first failed append reports the dir offline and the
// partition has a new leader from the rest of the ISR, without the old
// one in the ISR; the old leader stays registered and heartbeating but is
// elected nowhere, even as the first replica; fenced, it does not
// register again until it restarts onto a healthy dir. With the first report lost, the next heartbeat carries it:
// the hand-off takes at most one broker.heartbeat.interval.ms.
func TestLogDirOfflineHandsOffLeadership(t *testing.T) {
	for _, lost := range []int{0, 1} {
		t.Run(map[int]string{0: "immediate", 1: "first-report-lost"}[lost], func(t *testing.T) {
			testLogDirHandOff(t, lost)
		})
	}
}

func testLogDirHandOff(t *testing.T, lost int) {
	const (
		session  = 9 * time.Second
		interval = 2 * time.Second
	)
	clk := clock.NewManual(t0)
	mem := NewMemController(nil, 1000)
	mem.EnableLiveness(LivenessConfig{SessionTimeout: session, Clock: clk, Logger: testLogger(t, slog.LevelWarn)})
	ctrl := &lossyReports{MemController: mem, lose: lost, attempts: make(chan int32, 16)}
	disks := map[int32]*faultfs.ReadOnlyFS{}
	cfgs := map[int32]Config{}
	brokers := map[int32]*Broker{}
	start := func(id int32) {
		cfg, ok := cfgs[id]
		if !ok {
			dir := t.TempDir()
			disks[id] = faultfs.NewReadOnlyFS(dir)
			cfg = Config{
				BrokerID: id, Rack: "az1", Listener: "127.0.0.1:0", LogDir: dir, LogFS: disks[id],
				Controller: ctrl, Ledger: ledger.New(), Logger: testLogger(t, slog.LevelWarn), Clock: clk,
				BrokerHeartbeatInterval: interval, BrokerSessionTimeout: session,
				LeaderImbalanceCheckInterval: 24 * time.Hour, ReplicaLagTimeMax: 24 * time.Hour,
				DisableAutoLeaderRebalance: true,
			}
			cfgs[id] = cfg
		}
		b, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		brokers[id] = b
		t.Cleanup(func() { b.Close() })
	}
	for id := int32(1); id <= 3; id++ {
		start(id)
	}
	ts, err := mem.CreateTopic(TopicSpec{Name: "disk", Partitions: 1, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "disk", Partition: 0}
	ps := ts.Partitions[0]
	old := ps.Leader
	// kgo sends a raw Produce with its own acks: acks=1 here.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[1].Addr(), brokers[2].Addr(), brokers[3].Addr()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code := produceOne(t, ctx, cl, brokers[old], "disk", 1); code != 0 {
		t.Fatalf("produce before the fault: %v", kerr.ErrorForCode(code))
	}
	disks[old].SetBroken(true)
	if code := produceOne(t, ctx, cl, brokers[old], "disk", 1); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce onto the read-only dir: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	// Bounds a hung test only: the report is made at once.
	attempt := func() int32 {
		select {
		case id := <-ctrl.attempts:
			return id
		case <-time.After(20 * time.Second):
			t.Fatal("no log-dir report reached the controller")
			return 0
		}
	}
	if got := attempt(); got != old {
		t.Fatalf("report from broker %d, want %d", got, old)
	}
	current := func() PartitionState {
		ts, _ := mem.Topic("disk")
		return ts.Partitions[0]
	}
	if lost > 0 {
		// The report was lost: nothing moved; the next heartbeat, one
		// interval on, reports again.
		if cur := current(); cur.Leader != old {
			t.Fatalf("leader moved without a report: %+v", cur)
		}
		clk.Advance(interval)
		if got := attempt(); got != old {
			t.Fatalf("second report from broker %d, want %d", got, old)
		}
	}
	waitFor(t, "a new leader", 20*time.Second, func() bool { return current().Leader != old }, mem)
	now := current()
	if now.Leader == NoLeader || slices.Contains(now.ISR, old) || now.LeaderEpoch != ps.LeaderEpoch+1 {
		t.Fatalf("after the report: %+v; want a new leader from the ISR without %d at epoch %d", now, old, ps.LeaderEpoch+1)
	}
	if reg := registrationOf(mem, old); reg.Fenced || !reg.LogDirOffline {
		t.Fatalf("registration of %d: %+v, want live with its log dir offline", old, reg)
	}
	waitFor(t, "the new leader to apply its leadership", 20*time.Second, func() bool {
		st, _ := brokers[now.Leader].PartitionStatus(tp)
		return st.IsLeader && st.State.LeaderEpoch == now.LeaderEpoch
	}, brokers[now.Leader])
	if code := produceOne(t, ctx, cl, brokers[now.Leader], "disk", 1); code != 0 {
		t.Fatalf("produce to the new leader: %v", kerr.ErrorForCode(code))
	}
	// A session later, still heartbeating: live, still ineligible, and
	// the preferred-leader election of its partition (old may be first)
	// is refused.
	for range session / interval {
		clk.Advance(interval)
		for _, b := range brokers {
			b.heartbeat()
		}
	}
	if got := mem.CheckLiveness(); len(got) != 0 {
		t.Fatalf("fenced %v though every broker heartbeats", got)
	}
	cur := current()
	if _, err := mem.ElectPreferred(tp, cur.LeaderEpoch, cur.PartitionEpoch); cur.Replicas[0] == old && !errors.Is(err, ErrNotElectable) {
		t.Fatalf("preferred election of the offline broker: %v, want ErrNotElectable", err)
	}
	if _, err := mem.AlterISR(tp, cur.LeaderEpoch, cur.PartitionEpoch, append(slices.Clone(cur.ISR), old)); !errors.Is(err, ErrIneligibleReplica) {
		t.Fatalf("ISR with the offline broker: %v, want ErrIneligibleReplica", err)
	}
	if cur = current(); cur.Leader == old || slices.Contains(cur.ISR, old) {
		t.Fatalf("the offline broker is back: %+v", cur)
	}
	// Fenced meanwhile (as when its session is lost), it does not
	// register again while its dir is offline: a Kafka broker whose only
	// log dir failed has shut down.
	epoch := brokers[old].BrokerEpoch()
	if err := mem.ShutdownBroker(old, epoch); err != nil {
		t.Fatal(err)
	}
	brokers[old].heartbeat()
	brokers[old].heartbeat()
	if reg := registrationOf(mem, old); !reg.Fenced || reg.Epoch != epoch {
		t.Fatalf("registration after a fence with the dir offline: %+v, want epoch %d still fenced (no new life)", reg, epoch)
	}
	// Restarted onto a healthy dir: a new life, eligible again.
	brokers[old].Close()
	disks[old].SetBroken(false)
	start(old)
	if reg := registrationOf(mem, old); reg.Fenced || reg.LogDirOffline {
		t.Fatalf("registration after the restart: %+v, want live and online", reg)
	}
	// (Its catching up is not run here: on the manual clock the
	// replica fetchers' socket deadlines are already past. The
	// controller accepts it back in the ISR, as its leader proposes once
	// it has caught up.)
	cur = current()
	if _, err := mem.AlterISR(tp, cur.LeaderEpoch, cur.PartitionEpoch, append(slices.Clone(cur.ISR), old)); err != nil {
		t.Fatalf("ISR with the restarted broker: %v", err)
	}
}

package broker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestSessionTracker(t *testing.T) {
	const timeout = 9 * time.Second
	regs := func(rs ...BrokerRegistration) map[int32]BrokerRegistration {
		m := map[int32]BrokerRegistration{}
		for _, r := range rs {
			m[r.ID] = r
		}
		return m
	}
	type step struct {
		register, heard *BrokerRegistration // at time at
		at              time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
		regs  map[int32]BrokerRegistration
		now   time.Duration
		want  []int32
	}{
		{"fresh registration is alive until its timeout", []step{{register: &BrokerRegistration{ID: 1, Epoch: 5}}},
			regs(BrokerRegistration{ID: 1, Epoch: 5}), timeout, nil},
		{"silent past the timeout expires", []step{{register: &BrokerRegistration{ID: 1, Epoch: 5}}},
			regs(BrokerRegistration{ID: 1, Epoch: 5}), timeout + time.Millisecond, []int32{1}},
		{"a heartbeat renews", []step{{register: &BrokerRegistration{ID: 1, Epoch: 5}}, {heard: &BrokerRegistration{ID: 1, Epoch: 5}, at: 5 * time.Second}},
			regs(BrokerRegistration{ID: 1, Epoch: 5}), 14 * time.Second, nil},
		{"a heartbeat of an earlier life does not count", []step{
			{register: &BrokerRegistration{ID: 1, Epoch: 5}},
			{register: &BrokerRegistration{ID: 1, Epoch: 9}, at: time.Second},
			{heard: &BrokerRegistration{ID: 1, Epoch: 5}, at: 8 * time.Second}},
			regs(BrokerRegistration{ID: 1, Epoch: 9}), 10*time.Second + time.Millisecond, []int32{1}},
		{"an older registration applied late does not replace a newer one", []step{
			{register: &BrokerRegistration{ID: 1, Epoch: 9}},
			{register: &BrokerRegistration{ID: 1, Epoch: 5}, at: 8 * time.Second}},
			regs(BrokerRegistration{ID: 1, Epoch: 9}), timeout + time.Millisecond, []int32{1}},
		{"fenced registrations are not reported", []step{{register: &BrokerRegistration{ID: 1, Epoch: 5}}},
			regs(BrokerRegistration{ID: 1, Epoch: 5, Fenced: true}), time.Hour, nil},
		{"a registration the tracker never saw is not reported", nil,
			regs(BrokerRegistration{ID: 2, Epoch: 5}), time.Hour, nil},
		{"sorted by id", []step{{register: &BrokerRegistration{ID: 3, Epoch: 1}}, {register: &BrokerRegistration{ID: 1, Epoch: 2}}, {register: &BrokerRegistration{ID: 2, Epoch: 3}, at: time.Hour}},
			regs(BrokerRegistration{ID: 3, Epoch: 1}, BrokerRegistration{ID: 1, Epoch: 2}, BrokerRegistration{ID: 2, Epoch: 3}), time.Hour, []int32{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSessionTracker(timeout)
			for _, st := range tc.steps {
				if st.register != nil {
					s.registered(st.register.ID, st.register.Epoch, t0.Add(st.at))
				}
				if st.heard != nil {
					s.heard(st.heard.ID, st.heard.Epoch, t0.Add(st.at))
				}
			}
			var got []int32
			for _, r := range s.expired(t0.Add(tc.now), tc.regs) {
				got = append(got, r.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("expired %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFenceAndElect(t *testing.T) {
	ps := func(leader int32, le int32, replicas, isr []int32) PartitionState {
		return PartitionState{Leader: leader, LeaderEpoch: le, PartitionEpoch: 3, Replicas: replicas, ISR: isr}
	}
	for _, tc := range []struct {
		name    string
		in      PartitionState
		fenced  []int32 // already fenced, besides the victim
		victim  int32
		unclean bool
		want    PartitionState
		changed bool
		dirty   bool
	}{
		{name: "leader fenced: first in-sync live replica in replica order leads, epoch bumped",
			in: ps(1, 4, []int32{1, 3, 2}, []int32{1, 2, 3}), victim: 1,
			want: ps(3, 5, []int32{1, 3, 2}, []int32{2, 3}), changed: true},
		{name: "a replica out of the ISR is not elected",
			in: ps(1, 4, []int32{1, 3, 2}, []int32{1, 2}), victim: 1,
			want: ps(2, 5, []int32{1, 3, 2}, []int32{2}), changed: true},
		{name: "a fenced ISR member is not elected",
			in: ps(1, 4, []int32{1, 2, 3}, []int32{1, 2, 3}), fenced: []int32{2}, victim: 1,
			want: ps(3, 5, []int32{1, 2, 3}, []int32{2, 3}), changed: true},
		{name: "follower fenced: leaves the ISR, leader and epoch stay",
			in: ps(1, 4, []int32{1, 2, 3}, []int32{1, 2, 3}), victim: 2,
			want: ps(1, 4, []int32{1, 2, 3}, []int32{1, 3}), changed: true},
		{name: "follower out of the ISR fenced: nothing changes",
			in: ps(1, 4, []int32{1, 2, 3}, []int32{1, 3}), victim: 2,
			want: ps(1, 4, []int32{1, 2, 3}, []int32{1, 3})},
		{name: "last ISR member fenced: stays in the ISR, no leader, epoch bumped",
			in: ps(1, 4, []int32{1, 2, 3}, []int32{1}), victim: 1,
			want: ps(NoLeader, 5, []int32{1, 2, 3}, []int32{1}), changed: true},
		{name: "no live ISR member: leaderless, the dead stay in the ISR but the victim leaves",
			in: ps(1, 4, []int32{1, 2, 3}, []int32{1, 2}), fenced: []int32{2}, victim: 1,
			want: ps(NoLeader, 5, []int32{1, 2, 3}, []int32{2}), changed: true},
		{name: "unclean allowed: first live replica leads, alone in the ISR",
			in: ps(1, 4, []int32{1, 2, 3}, []int32{1}), victim: 1, unclean: true,
			want: ps(3, 5, []int32{1, 2, 3}, []int32{3}), changed: true, dirty: true, fenced: []int32{2}},
		{name: "unclean allowed but a clean choice exists: clean",
			in: ps(1, 4, []int32{1, 2, 3}, []int32{1, 2}), victim: 1, unclean: true,
			want: ps(2, 5, []int32{1, 2, 3}, []int32{2}), changed: true},
		{name: "not a replica: nothing",
			in: ps(1, 4, []int32{1, 2, 3}, []int32{1, 2, 3}), victim: 7,
			want: ps(1, 4, []int32{1, 2, 3}, []int32{1, 2, 3})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			regs := map[int32]BrokerRegistration{}
			for _, id := range []int32{1, 2, 3, 7} {
				regs[id] = BrokerRegistration{ID: id, Epoch: int64(id), Fenced: slices.Contains(tc.fenced, id) || id == tc.victim}
			}
			got := clonePartition(tc.in)
			changed, dirty := fencePartition(&got, tc.victim, liveIn(regs), tc.unclean)
			if changed != tc.changed || dirty != tc.dirty || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v changed=%v unclean=%v, want %+v changed=%v unclean=%v", got, changed, dirty, tc.want, tc.changed, tc.dirty)
			}
		})
	}
}

func TestElectPreferred(t *testing.T) {
	regs := map[int32]BrokerRegistration{1: {ID: 1, Epoch: 1}, 2: {ID: 2, Epoch: 2}, 3: {ID: 3, Epoch: 3, Fenced: true}}
	for _, tc := range []struct {
		name string
		in   PartitionState
		err  error
		want int32
	}{
		{"preferred in ISR and live", PartitionState{Leader: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, nil, 1},
		{"preferred not caught up (not in the ISR)", PartitionState{Leader: 2, Replicas: []int32{1, 2}, ISR: []int32{2}}, ErrNotElectable, 2},
		{"preferred fenced", PartitionState{Leader: 2, Replicas: []int32{3, 2}, ISR: []int32{2, 3}}, ErrNotElectable, 2},
		{"already leading", PartitionState{Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := clonePartition(tc.in)
			err := electPreferred(&ps, regs)
			if !errors.Is(err, tc.err) || ps.Leader != tc.want {
				t.Fatalf("leader %d err %v, want %d %v", ps.Leader, err, tc.want, tc.err)
			}
			if tc.want != tc.in.Leader && ps.LeaderEpoch != tc.in.LeaderEpoch+1 {
				t.Fatalf("leader epoch %d, want bumped from %d", ps.LeaderEpoch, tc.in.LeaderEpoch)
			}
		})
	}
	topics := []TopicState{{Name: "t", Partitions: []PartitionState{
		{Partition: 0, Leader: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
		{Partition: 1, Leader: 2, Replicas: []int32{1, 2}, ISR: []int32{2}},
		{Partition: 2, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
		{Partition: 3, Leader: 1, Replicas: []int32{2, 1}, ISR: []int32{1, 2}},
	}}}
	if got := preferredToElect(topics, regs, 1); !slices.Equal(got, []TopicPartition{{Topic: "t", Partition: 0}}) {
		t.Fatalf("broker 1 nominates itself for %v, want t-0 only", got)
	}
}

// memCluster registers brokers 1..n on a MemController with liveness on a
// manual clock and creates topic "t" (RF 3, 3 partitions).
func memCluster(t *testing.T, n int, configs map[string]string) (*MemController, *clock.Manual, map[int32]int64) {
	t.Helper()
	clk := clock.NewManual(t0)
	c := NewMemController(nil, 0)
	c.EnableLiveness(LivenessConfig{SessionTimeout: 9 * time.Second, Clock: clk, Logger: testLogger(t, 0)})
	epochs := map[int32]int64{}
	for id := int32(1); id <= int32(n); id++ {
		reg, err := c.RegisterBroker(BrokerInfo{ID: id, Host: "127.0.0.1", Port: 9000 + id, Rack: fmt.Sprintf("az%d", id)})
		if err != nil {
			t.Fatal(err)
		}
		epochs[id] = reg.Epoch
	}
	if _, err := c.CreateTopic(TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 3, Configs: configs}); err != nil {
		t.Fatal(err)
	}
	return c, clk, epochs
}

func TestMemControllerFencesSilentBrokerAndElects(t *testing.T) {
	c, clk, epochs := memCluster(t, 3, nil)
	var seen []TopicState
	defer c.Subscribe(func(ts TopicState) { seen = append(seen, ts) })()
	before, _ := c.Topic("t")
	clk.Advance(5 * time.Second)
	for _, id := range []int32{1, 2} {
		if _, err := c.Heartbeat(id, epochs[id]); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.CheckLiveness(); len(got) != 0 {
		t.Fatalf("fenced %v before any session expired", got)
	}
	clk.Advance(4*time.Second + time.Millisecond) // 3 silent for 9.001 s, 1 and 2 for 4.001 s
	got := c.CheckLiveness()
	if len(got) != 1 || got[0].ID != 3 {
		t.Fatalf("fenced %v, want broker 3", got)
	}
	if again := c.CheckLiveness(); len(again) != 0 {
		t.Fatalf("fenced %v twice", again)
	}
	after, _ := c.Topic("t")
	for i, ps := range after.Partitions {
		old := before.Partitions[i]
		if slices.Contains(ps.ISR, 3) || ps.Leader == 3 {
			t.Fatalf("partition %d still has fenced broker 3: %+v", i, ps)
		}
		if old.Leader == 3 && (ps.LeaderEpoch != old.LeaderEpoch+1 || ps.Leader != electLeader(&old, func(id int32) bool { return id != 3 }, false).leader) {
			t.Fatalf("partition %d: %+v after fencing its leader (was %+v)", i, ps, old)
		}
		if old.Leader != 3 && ps.LeaderEpoch != old.LeaderEpoch {
			t.Fatalf("partition %d: leader epoch moved without a leader change: %+v", i, ps)
		}
	}
	if len(seen) != 1 {
		t.Fatalf("%d notifications for one fence, want 1 (one topic)", len(seen))
	}
	// The fenced life's heartbeats are refused; a new life registers with
	// a new epoch, is a follower everywhere and is electable once in the ISR.
	if _, err := c.Heartbeat(3, epochs[3]); !errors.Is(err, ErrBrokerFenced) {
		t.Fatalf("heartbeat of a fenced registration: %v", err)
	}
	reg, err := c.RegisterBroker(BrokerInfo{ID: 3, Host: "127.0.0.1", Port: 9003, Rack: "az3"})
	if err != nil || reg.Epoch <= epochs[3] || reg.Fenced {
		t.Fatalf("re-register: %+v %v (old epoch %d)", reg, err, epochs[3])
	}
	now, _ := c.Topic("t")
	if !reflect.DeepEqual(now, after) {
		t.Fatalf("a returning broker out of every ISR changed leadership:\n%+v\n%+v", now, after)
	}
	for i, ps := range now.Partitions {
		if ps.Replicas[0] != 3 {
			continue
		}
		if _, err := c.ElectPreferred(TopicPartition{Topic: "t", Partition: int32(i)}, ps.LeaderEpoch, ps.PartitionEpoch); !errors.Is(err, ErrNotElectable) {
			t.Fatalf("preferred leader 3 elected before it caught up: %v", err)
		}
		ps, err := c.AlterISR(TopicPartition{Topic: "t", Partition: int32(i)}, ps.LeaderEpoch, ps.PartitionEpoch, append(slices.Clone(ps.ISR), 3))
		if err != nil {
			t.Fatal(err)
		}
		ps, err = c.ElectPreferred(TopicPartition{Topic: "t", Partition: int32(i)}, ps.LeaderEpoch, ps.PartitionEpoch)
		if err != nil || ps.Leader != 3 {
			t.Fatalf("preferred leader not elected back: %+v %v", ps, err)
		}
	}
}

func TestMemControllerLeaderlessThenRevived(t *testing.T) {
	c, clk, epochs := memCluster(t, 3, nil)
	ts, _ := c.Topic("t")
	tp := TopicPartition{Topic: "t", Partition: 0}
	ps := ts.Partitions[0]
	leader := ps.Leader
	// Shrink the ISR to the leader alone, then let everyone go silent.
	if _, err := c.AlterISR(tp, ps.LeaderEpoch, ps.PartitionEpoch, []int32{leader}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if got := c.CheckLiveness(); len(got) != 3 {
		t.Fatalf("fenced %v, want all three", got)
	}
	ts, _ = c.Topic("t")
	if p := ts.Partitions[0]; p.Leader != NoLeader || !slices.Equal(p.ISR, []int32{leader}) {
		t.Fatalf("partition 0 %+v, want leaderless with ISR [%d]", p, leader)
	}
	// A fenced broker cannot join an ISR.
	p := ts.Partitions[0]
	other := ps.Replicas[1]
	if _, err := c.AlterISR(tp, p.LeaderEpoch, p.PartitionEpoch, []int32{leader, other}); !errors.Is(err, ErrIneligibleReplica) {
		t.Fatalf("fenced broker joined the ISR: %v", err)
	}
	// A replica outside the ISR returning does not lead (clean)...
	if _, err := c.RegisterBroker(BrokerInfo{ID: other, Host: "127.0.0.1", Port: 9000 + other, Rack: fmt.Sprintf("az%d", other)}); err != nil {
		t.Fatal(err)
	}
	ts, _ = c.Topic("t")
	if ts.Partitions[0].Leader != NoLeader {
		t.Fatalf("out-of-sync replica %d elected: %+v", other, ts.Partitions[0])
	}
	// ...the last in-sync one does.
	if _, err := c.RegisterBroker(BrokerInfo{ID: leader, Host: "127.0.0.1", Port: 9000 + leader, Rack: fmt.Sprintf("az%d", leader)}); err != nil {
		t.Fatal(err)
	}
	ts, _ = c.Topic("t")
	if p := ts.Partitions[0]; p.Leader != leader || p.LeaderEpoch != ps.LeaderEpoch+2 {
		t.Fatalf("partition 0 %+v, want %d leading at epoch %d", p, leader, ps.LeaderEpoch+2)
	}
	_ = epochs
}

func TestMemControllerUncleanElection(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		t.Run(fmt.Sprint(unclean), func(t *testing.T) {
			c, clk, epochs := memCluster(t, 3, map[string]string{"unclean.leader.election.enable": fmt.Sprint(unclean)})
			ts, _ := c.Topic("t")
			tp := TopicPartition{Topic: "t", Partition: 0}
			ps := ts.Partitions[0]
			if _, err := c.AlterISR(tp, ps.LeaderEpoch, ps.PartitionEpoch, []int32{ps.Leader}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(10 * time.Second)
			for id, e := range epochs {
				if id != ps.Leader {
					c.Heartbeat(id, e)
				}
			}
			if got := c.CheckLiveness(); len(got) != 1 || got[0].ID != ps.Leader {
				t.Fatalf("fenced %v, want the leader %d", got, ps.Leader)
			}
			ts, _ = c.Topic("t")
			p := ts.Partitions[0]
			switch {
			case unclean && (p.Leader != ps.Replicas[1] || !slices.Equal(p.ISR, []int32{ps.Replicas[1]})):
				t.Fatalf("unclean: %+v, want %d leading alone", p, ps.Replicas[1])
			case !unclean && p.Leader != NoLeader:
				t.Fatalf("clean: %+v, want leaderless", p)
			}
		})
	}
}

func TestRestartedBrokerIsFencedFirst(t *testing.T) {
	c, _, epochs := memCluster(t, 3, nil)
	before, _ := c.Topic("t")
	// Broker 1 restarts before its session expired: its old life is
	// fenced (it may have lost an unflushed tail), so it leads nothing.
	reg, err := c.RegisterBroker(BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9001, Rack: "az1"})
	if err != nil || reg.Epoch <= epochs[1] {
		t.Fatal(reg, err)
	}
	after, _ := c.Topic("t")
	for i, ps := range after.Partitions {
		if ps.Leader == 1 || slices.Contains(ps.ISR, 1) {
			t.Fatalf("partition %d %+v: restarted broker 1 still leads or is in sync", i, ps)
		}
		if before.Partitions[i].Leader == 1 && ps.LeaderEpoch != before.Partitions[i].LeaderEpoch+1 {
			t.Fatalf("partition %d: leader epoch %d, want bumped", i, ps.LeaderEpoch)
		}
	}
}

// TestClusterStateRandomHistories applies random record histories and
// checks, after every record, the invariants of leadership, and at the
// end that a second controller replaying the same log holds the same
// state (no decision may depend on map order or anything but the log).
func TestClusterStateRandomHistories(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1176))
		var log []stateRecord
		s := newClusterState(nil)
		apply := func(rec stateRecord) {
			log = append(log, rec)
			prev := map[string][]PartitionState{}
			for n, ts := range s.topics {
				prev[n] = slices.Clone(ts.Partitions)
			}
			s.apply(rec, int64(len(log)))
			checkLeadership(t, seed, s, prev)
		}
		for id := int32(1); id <= 4; id++ {
			apply(stateRecord{Kind: kindBroker, Broker: &wireBroker{ID: id, Host: "h", Port: id}})
		}
		for i, rf := range []int16{1, 2, 3} {
			parts, _ := AssignReplicas(fmt.Sprint("t", i), 4, rf, s.brokerList())
			apply(stateRecord{Kind: kindTopic, Topic: topicToWire(TopicState{Name: fmt.Sprint("t", i), Configs: map[string]string{"unclean.leader.election.enable": fmt.Sprint(i == 2)}, Partitions: parts})})
		}
		for range 60 {
			id := int32(rng.IntN(4) + 1)
			switch rng.IntN(5) {
			case 0:
				apply(stateRecord{Kind: kindBroker, Broker: &wireBroker{ID: id, Host: "h", Port: id}, FencePrevious: rng.IntN(2) == 0})
			case 1, 2:
				r := s.regs[id]
				epoch := r.Epoch
				if rng.IntN(4) == 0 {
					epoch-- // a stale fence
				}
				apply(stateRecord{Kind: kindFence, BrokerID: id, BrokerEpoch: epoch})
			case 3, 4:
				ts := s.topics[fmt.Sprint("t", rng.IntN(3))]
				ps := ts.Partitions[rng.IntN(len(ts.Partitions))]
				kind := kindAlterISR
				var isr []int32
				for _, r := range ps.Replicas {
					if rng.IntN(2) == 0 || r == ps.Leader {
						isr = append(isr, r)
					}
				}
				if rng.IntN(2) == 0 {
					kind = kindElectPreferred
				}
				if ps.Leader == NoLeader && kind == kindAlterISR {
					continue // AlterPartition comes from a leader
				}
				apply(stateRecord{Kind: kind, TopicName: ts.Name, Partition: ps.Partition, LeaderEpoch: ps.LeaderEpoch, PartitionEpoch: ps.PartitionEpoch, ISR: isr})
			}
		}
		replay := newClusterState(nil)
		for i, rec := range log {
			replay.apply(rec, int64(i+1))
		}
		if !reflect.DeepEqual(replay.topics, s.topics) || !reflect.DeepEqual(replay.regs, s.regs) {
			t.Fatalf("seed %d: replay differs", seed)
		}
	}
}

func checkLeadership(t *testing.T, seed uint64, s *clusterState, prev map[string][]PartitionState) {
	t.Helper()
	live := liveIn(s.regs)
	for n, ts := range s.topics {
		for i, ps := range ts.Partitions {
			if len(ps.ISR) == 0 {
				t.Fatalf("seed %d: %s-%d has an empty ISR: %+v", seed, n, i, ps)
			}
			if ps.Leader != NoLeader && (!live(ps.Leader) || !slices.Contains(ps.ISR, ps.Leader)) {
				t.Fatalf("seed %d: %s-%d led by %d, fenced or out of the ISR: %+v (regs %v)", seed, n, i, ps.Leader, ps, s.regs)
			}
			for _, r := range ps.ISR {
				if !live(r) && len(ps.ISR) > 1 && ps.Leader != NoLeader {
					t.Fatalf("seed %d: %s-%d has fenced %d in a led multi-member ISR: %+v", seed, n, i, r, ps)
				}
			}
			if old := prev[n]; old != nil {
				o := old[i]
				if ps.LeaderEpoch < o.LeaderEpoch || ps.PartitionEpoch < o.PartitionEpoch || (ps.Leader != o.Leader && ps.LeaderEpoch == o.LeaderEpoch) {
					t.Fatalf("seed %d: %s-%d epochs went from %+v to %+v", seed, n, i, o, ps)
				}
			}
		}
	}
}

package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
)

func newLiveKafkaController(t *testing.T, bootstrap []string, clk clock.Clock) *KafkaController {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := NewKafkaController(ctx, KafkaControllerConfig{
		Bootstrap: bootstrap, Logger: testLogger(t, 0), RequestTimeout: 20 * time.Second,
		SessionTimeout: 9 * time.Second, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestKafkaControllerFencesThroughTheLog: heartbeats are records on the
// state topic; a controller that stops hearing a broker for the session
// timeout (on its manual clock) fences it with a proposal, every
// controller applies the same fence and election, a controller started
// afterwards replays them, and a restarted controller gives everyone a
// fresh session instead of fencing on stale knowledge.
func TestKafkaControllerFencesThroughTheLog(t *testing.T) {
	emb := startKfake(t)
	clkA, clkB := clock.NewManual(t0), clock.NewManual(t0)
	a := newLiveKafkaController(t, emb.Bootstrap(), clkA)
	b := newLiveKafkaController(t, emb.Bootstrap(), clkB)
	epochs := map[int32]int64{}
	for _, bi := range threeBrokers() {
		reg, err := a.RegisterBroker(bi)
		if err != nil {
			t.Fatal(err)
		}
		epochs[bi.ID] = reg.Epoch
	}
	ts, err := a.CreateTopic(TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*KafkaController{a, b} {
		if err := c.syncToEnd(); err != nil {
			t.Fatal(err)
		}
	}
	// 1 and 2 heartbeat (through either controller), 3 is silent.
	for i := 0; i < 3; i++ {
		clkA.Advance(3 * time.Second)
		clkB.Advance(3 * time.Second)
		for _, id := range []int32{1, 2} {
			c := a
			if id == 2 {
				c = b
			}
			if _, err := c.Heartbeat(id, epochs[id]); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []*KafkaController{a, b} {
			if err := c.syncToEnd(); err != nil {
				t.Fatal(err)
			}
		}
		if i < 2 {
			for _, r := range a.Registrations() {
				if r.Fenced {
					t.Fatalf("broker %d fenced at %v of silence", r.ID, time.Duration(i+1)*3*time.Second)
				}
			}
		}
	}
	// 9 s of silence is not more than the timeout; a liveness check (every
	// quarter timeout) after it is.
	clkA.Advance(9*time.Second/4 + time.Millisecond)
	fenced := func(c Controller) bool {
		for _, r := range c.Registrations() {
			if r.ID == 3 {
				return r.Fenced
			}
		}
		return false
	}
	waitFor(t, "broker 3 fenced", 30*time.Second, func() bool { return fenced(a) && fenced(b) }, a, b)
	for _, r := range a.Registrations() {
		if r.ID != 3 && r.Fenced {
			t.Fatalf("broker %d fenced too", r.ID)
		}
	}
	after, _ := a.Topic("t")
	for i, ps := range after.Partitions {
		old := ts.Partitions[i]
		if ps.Leader == 3 || slices.Contains(ps.ISR, 3) {
			t.Fatalf("partition %d still has 3: %+v", i, ps)
		}
		if old.Leader == 3 && ps.LeaderEpoch != old.LeaderEpoch+1 {
			t.Fatalf("partition %d: leader epoch %d after electing away from 3 (was %d)", i, ps.LeaderEpoch, old.LeaderEpoch)
		}
	}
	if _, err := a.Heartbeat(3, epochs[3]); !errors.Is(err, ErrBrokerFenced) {
		t.Fatalf("heartbeat of fenced 3: %v", err)
	}
	// A controller started now replays the same state and, having heard
	// nobody yet, fences nobody even though its clock is far ahead.
	clkC := clock.NewManual(t0.Add(time.Hour))
	c := newLiveKafkaController(t, emb.Bootstrap(), clkC)
	if got, _ := c.Topic("t"); !topicsEqual(got, after) {
		t.Fatalf("replayed state %+v, want %+v", got, after)
	}
	if got := c.expired(); len(got) != 0 {
		t.Fatalf("a just-started controller finds %v expired", got)
	}
	// 3 comes back as a new life and is a follower.
	reg, err := c.RegisterBroker(threeBrokers()[2])
	if err != nil || reg.Epoch <= epochs[3] {
		t.Fatalf("re-register 3: %+v %v", reg, err)
	}
	if err := a.syncToEnd(); err != nil {
		t.Fatal(err)
	}
	if fenced(a) {
		t.Fatal("re-registered 3 still fenced on controller a")
	}
}

func topicsEqual(a, b TopicState) bool {
	if a.Name != b.Name || len(a.Partitions) != len(b.Partitions) {
		return false
	}
	for i := range a.Partitions {
		x, y := a.Partitions[i], b.Partitions[i]
		if x.Leader != y.Leader || x.LeaderEpoch != y.LeaderEpoch || x.PartitionEpoch != y.PartitionEpoch ||
			!slices.Equal(x.ISR, y.ISR) || !slices.Equal(x.Replicas, y.Replicas) {
			return false
		}
	}
	return true
}

package broker

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
)

// TestKafkaControllerLogDirOffline: a log-dir report proposed through one
// KafkaController is applied alike by another (the leader moves, the
// broker leaves the ISRs, its registration stays live and marked
// offline); a repeat changes nothing and writes nothing; heartbeats of the registration
// still count; a report from an earlier life is refused; and a
// controller started after compaction of the state topic rebuilds the
// same state (the report's key is never compacted away).
func TestKafkaControllerLogDirOffline(t *testing.T) {
	emb := startKfake(t)
	clk := clock.NewManual(t0)
	a := newHeldKafkaController(t, emb, "a", clk, nil)
	b := newHeldKafkaController(t, emb, "b", clk, nil)
	epochs := map[int32]int64{}
	for _, info := range threeBrokers() {
		reg, err := a.RegisterBroker(info)
		if err != nil {
			t.Fatal(err)
		}
		epochs[info.ID] = reg.Epoch
	}
	ts, err := a.CreateTopic(TopicSpec{Name: "disk", Partitions: 3, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	offline := ts.Partitions[0].Leader
	led := 0
	for _, ps := range ts.Partitions {
		if ps.Leader == offline {
			led++
		}
	}
	waitFor(t, "b to apply the topic", 20*time.Second, func() bool { _, ok := b.Topic("disk"); return ok }, b)
	if err := b.ReportLogDirOffline(offline, epochs[offline]); err != nil {
		t.Fatal(err)
	}
	reported := func(c *KafkaController) bool {
		return registrationOf(c, offline).LogDirOffline
	}
	waitFor(t, "a to apply the report", 20*time.Second, func() bool { return reported(a) }, a)
	check := func(c *KafkaController) {
		t.Helper()
		cur, _ := c.Topic("disk")
		for _, ps := range cur.Partitions {
			if ps.Leader == offline || ps.Leader == NoLeader || slices.Contains(ps.ISR, offline) {
				t.Fatalf("partition %d after the report: %+v", ps.Partition, ps)
			}
		}
		if reg := registrationOf(c, offline); reg.Fenced || !reg.LogDirOffline || reg.Epoch != epochs[offline] {
			t.Fatalf("registration after the report: %+v", reg)
		}
	}
	check(a)
	check(b)
	if !reflect.DeepEqual(a.Topics(), b.Topics()) {
		t.Fatalf("controllers differ:\n%+v\n%+v", a.Topics(), b.Topics())
	}
	want, wantRegs := a.Topics(), a.Registrations()
	applied := func() int64 {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.mu.applied
	}
	before := applied()
	if err := a.ReportLogDirOffline(offline, epochs[offline]); err != nil {
		t.Fatalf("repeated report: %v", err)
	}
	if got := a.Topics(); !reflect.DeepEqual(got, want) {
		t.Fatalf("a repeated report changed the state:\n%+v\nwant\n%+v", got, want)
	}
	if _, err := a.Heartbeat(offline, epochs[offline]); err != nil {
		t.Fatalf("heartbeat of the offline registration: %v", err)
	}
	if err := a.ReportLogDirOffline(offline, epochs[offline]-1); !errors.Is(err, ErrBrokerFenced) {
		t.Fatalf("report of another epoch: %v, want ErrBrokerFenced", err)
	}
	// Neither the repeat nor the stale report wrote a record (a proposal
	// returns once its record is applied here): a broker retrying cannot
	// fill the state topic.
	if after := applied(); after != before+1 { // the heartbeat's record only
		t.Fatalf("applied offset %d -> %d: the repeat or the stale report wrote records", before, after)
	}
	a.Close()
	b.Close()
	emb.Compact()
	r := newHeldKafkaController(t, emb, "r", clk, nil)
	if got := r.Topics(); !reflect.DeepEqual(got, want) {
		t.Fatalf("rebuilt after compaction:\n%+v\nwant\n%+v", got, want)
	}
	if got := r.Registrations(); !reflect.DeepEqual(got, wantRegs) {
		t.Fatalf("registrations rebuilt after compaction: %+v, want %+v", got, wantRegs)
	}
	t.Logf("broker %d led %d of 3 partitions; all moved", offline, led)
}

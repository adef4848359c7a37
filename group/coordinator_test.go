package group

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/topicpart"
	"github.com/twmb/franz-go/pkg/kerr"
)

// memStorage is a Storage in memory: one log of batches per partition.
// fail, when set, fails appends with that error.
type memStorage struct {
	mu   sync.Mutex
	logs map[int32][]byte
	next map[int32]int64
	fail error
}

var _ Storage = (*memStorage)(nil)

func newMemStorage() *memStorage {
	return &memStorage{logs: map[int32][]byte{}, next: map[int32]int64{}}
}

func (s *memStorage) Append(_ context.Context, p, _ int32, batch []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	b := append([]byte{}, batch...)
	binary.BigEndian.PutUint64(b, uint64(s.next[p]))
	s.next[p] += int64(binary.BigEndian.Uint32(b[57:]))
	s.logs[p] = append(s.logs[p], b...)
	return nil
}

func (s *memStorage) Read(p int32, offset int64, maxBytes int) ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if offset > 0 {
		return nil, s.next[p], nil // the test's logs are read whole
	}
	return append([]byte{}, s.logs[p]...), s.next[p], nil
}

func newTestCoordinator(t *testing.T, st Storage, clk clock.Clock) *Coordinator {
	t.Helper()
	n := 0
	c, err := NewCoordinator(Config{
		Partitions: 3, Storage: st, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Limits:      Limits{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Hour},
		NewMemberID: func(client string) string { n++; return fmt.Sprintf("%s-%d", client, n) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// The coordinator moves with leadership: a group's generation, members
// and committed offsets written by one coordinator are what another loads
// when it is elected, and a resigned coordinator answers NOT_COORDINATOR.
func TestCoordinatorFailoverLoadsGroupsAndOffsets(t *testing.T) {
	st := newMemStorage()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	ctx := context.Background()
	p := PartitionFor("g", 3)

	c1 := newTestCoordinator(t, st, clk)
	if r := c1.Join(ctx, "g", JoinRequest{ClientID: "c", ProtocolType: "consumer", Protocols: []Protocol{{"range", []byte("md")}}, SessionTimeout: 10 * time.Second}); r.Err != kerr.NotCoordinator {
		t.Fatalf("join before election: %v", r.Err)
	}
	<-c1.Elected(p, 1)
	r := c1.Join(ctx, "g", JoinRequest{ClientID: "c", InstanceID: "i", ProtocolType: "consumer", Protocols: []Protocol{{"range", []byte("md")}}, SessionTimeout: 10 * time.Second})
	if r.Err != nil || r.Generation != 1 {
		t.Fatalf("join: %+v", r)
	}
	if s := c1.Sync(ctx, "g", SyncRequest{MemberID: r.MemberID, Generation: 1, Assignments: map[string][]byte{r.MemberID: []byte("all")}}); s.Err != nil {
		t.Fatalf("sync: %v", s.Err)
	}
	tp := topicpart.TopicPartition{Topic: "t", Partition: 0}
	if err := c1.Commit(ctx, "g", CommitRequest{MemberID: r.MemberID, InstanceID: "i", Generation: 1, Offsets: map[topicpart.TopicPartition]Offset{tp: {Offset: 17, LeaderEpoch: 3}}}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// A commit that cannot be replicated is refused and not visible.
	st.mu.Lock()
	st.fail = kerr.CoordinatorNotAvailable
	st.mu.Unlock()
	if err := c1.Commit(ctx, "g", CommitRequest{MemberID: r.MemberID, InstanceID: "i", Generation: 1, Offsets: map[topicpart.TopicPartition]Offset{tp: {Offset: 99}}}); err != kerr.CoordinatorNotAvailable {
		t.Fatalf("failed append: %v", err)
	}
	st.mu.Lock()
	st.fail = nil
	st.mu.Unlock()
	if got, _ := c1.Fetch("g", nil); got[tp].Offset != 17 {
		t.Fatalf("fetch after a failed commit: %+v", got)
	}
	c1.Resigned(p)
	if err := c1.Heartbeat("g", r.MemberID, "i", 1); err != kerr.NotCoordinator {
		t.Fatalf("heartbeat after resigning: %v", err)
	}

	// Another coordinator (the next leader) loads the group from the log.
	c2 := newTestCoordinator(t, st, clk)
	<-c2.Elected(p, 2)
	got, err := c2.Fetch("g", []topicpart.TopicPartition{tp, {Topic: "t", Partition: 1}})
	if err != nil || len(got) != 1 || got[tp].Offset != 17 || got[tp].LeaderEpoch != 3 {
		t.Fatalf("offsets after failover: %+v %v", got, err)
	}
	d, _ := c2.Describe("g")
	if d.State != Stable || len(d.Members) != 1 || d.Members[0].MemberID != r.MemberID || string(d.Members[0].Assignment) != "all" {
		t.Fatalf("group after failover: %+v", d)
	}
	// The member carries on with its generation...
	if err := c2.Heartbeat("g", r.MemberID, "i", 1); err != nil {
		t.Fatalf("heartbeat on the new coordinator: %v", err)
	}
	// ...and is removed when its session lapses on the new coordinator's
	// clock, which ends the generation.
	clk.Advance(11 * time.Second)
	c2.ExpireDue()
	if d, _ := c2.Describe("g"); d.State != Empty || len(d.Members) != 0 {
		t.Fatalf("after the session timeout: %+v", d)
	}
	// A delete whose tombstones cannot be written leaves the group as it
	// was; one that is written removes it: a third coordinator finds
	// neither the group nor its offsets.
	st.mu.Lock()
	st.fail = kerr.CoordinatorNotAvailable
	st.mu.Unlock()
	if err := c2.Delete(ctx, "g"); err != kerr.CoordinatorNotAvailable {
		t.Fatalf("delete with a failing log: %v", err)
	}
	st.mu.Lock()
	st.fail = nil
	st.mu.Unlock()
	if d, _ := c2.Describe("g"); d.State != Empty {
		t.Fatalf("after a failed delete: %+v", d)
	}
	if got, _ := c2.Fetch("g", nil); got[tp].Offset != 17 {
		t.Fatalf("offsets after a failed delete: %+v", got)
	}
	if err := c2.Delete(ctx, "g"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	c2.Resigned(p)
	c3 := newTestCoordinator(t, st, clk)
	<-c3.Elected(p, 3)
	if got, _ := c3.Fetch("g", nil); len(got) != 0 {
		t.Fatalf("offsets of a deleted group: %+v", got)
	}
	if d, _ := c3.Describe("g"); d.State != Dead {
		t.Fatalf("deleted group: %+v", d)
	}
}

// blockingStorage's Read waits until release is closed.
type blockingStorage struct {
	*memStorage
	release chan struct{}
}

func (s blockingStorage) Read(p int32, offset int64, maxBytes int) ([]byte, int64, error) {
	<-s.release
	return s.memStorage.Read(p, offset, maxBytes)
}

// While a partition loads its groups answer COORDINATOR_LOAD_IN_PROGRESS;
// a partition resigned during its load never installs what it read.
func TestCoordinatorLoadInProgress(t *testing.T) {
	st := blockingStorage{newMemStorage(), make(chan struct{})}
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	c := newTestCoordinator(t, st, clk)
	p := PartitionFor("g", 3)
	loaded := c.Elected(p, 1)
	if err := c.Heartbeat("g", "m", "", 1); err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("heartbeat while loading: %v", err)
	}
	if _, err := c.Fetch("g", nil); err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("fetch while loading: %v", err)
	}
	if r := c.Join(context.Background(), "g", JoinRequest{ClientID: "c", ProtocolType: "consumer", Protocols: []Protocol{{"range", nil}}, SessionTimeout: 10 * time.Second}); r.Err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("join while loading: %v", r.Err)
	}
	c.Resigned(p)
	close(st.release)
	<-loaded
	if err := c.Heartbeat("g", "m", "", 1); err != kerr.NotCoordinator {
		t.Fatalf("after resigning during the load: %v", err)
	}
}

// Offsets of an empty group expire offsets.retention.minutes after the
// group emptied or the offset was committed, whichever is later; a group
// left with nothing is gone, also for the next coordinator.
func TestCoordinatorOffsetRetention(t *testing.T) {
	st := newMemStorage()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	n := 0
	newC := func() *Coordinator {
		c, err := NewCoordinator(Config{
			Partitions: 3, Storage: st, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Limits:           Limits{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Hour},
			NewMemberID:      func(client string) string { n++; return fmt.Sprintf("%s-%d", client, n) },
			OffsetsRetention: time.Hour, OffsetsRetentionCheckInterval: 24 * time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	if PartitionFor("barrier", 3) != PartitionFor("g", 3) {
		t.Fatal("the barrier group must share g's partition")
	}
	ctx := context.Background()
	c := newC()
	<-c.Elected(PartitionFor("g", 3), 1)
	<-c.Elected(PartitionFor("live", 3), 1)
	a, b := topicpart.TopicPartition{Topic: "t", Partition: 0}, topicpart.TopicPartition{Topic: "t", Partition: 1}
	commit := func(group string, tp topicpart.TopicPartition, off int64) {
		t.Helper()
		if err := c.Commit(ctx, group, CommitRequest{Generation: -1, Offsets: map[topicpart.TopicPartition]Offset{tp: {Offset: off, CommitTime: clk.Now()}}}); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	commit("g", a, 1)
	// A group with a live member keeps its offsets however old.
	r := c.Join(ctx, "live", JoinRequest{ClientID: "c", ProtocolType: "consumer", Protocols: []Protocol{{"range", nil}}, SessionTimeout: 50 * time.Minute})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if s := c.Sync(ctx, "live", SyncRequest{MemberID: r.MemberID, Generation: r.Generation}); s.Err != nil {
		t.Fatal(s.Err)
	}
	if err := c.Commit(ctx, "live", CommitRequest{MemberID: r.MemberID, Generation: r.Generation, Offsets: map[topicpart.TopicPartition]Offset{a: {Offset: 9, CommitTime: clk.Now()}}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(40 * time.Minute)
	if err := c.Heartbeat("live", r.MemberID, "", r.Generation); err != nil {
		t.Fatal(err)
	}
	commit("g", b, 2)
	clk.Advance(30 * time.Minute) // a: 70 min old, b: 30 min
	if got := c.ExpireOffsets(); got != 1 {
		t.Fatalf("expired %d offsets, want 1 (g's t-0)", got)
	}
	if err := c.Heartbeat("live", r.MemberID, "", r.Generation); err != nil {
		t.Fatal(err)
	}
	waitApplied := func(group string, want int) {
		t.Helper()
		// The expiry applies after its tombstones are appended; a commit
		// queued behind it on the same partition returns after it.
		commit("barrier", a, 0)
		if got, _ := c.Fetch(group, nil); len(got) != want {
			t.Fatalf("%s: %d offsets left, want %d: %+v", group, len(got), want, got)
		}
	}
	waitApplied("g", 1)
	clk.Advance(45 * time.Minute) // b: 75 min old
	if err := c.Heartbeat("live", r.MemberID, "", r.Generation); err != nil {
		t.Fatal(err)
	}
	c.ExpireOffsets()
	waitApplied("g", 0)
	if got, _ := c.Fetch("live", nil); got[a].Offset != 9 {
		t.Fatalf("the live group's offsets expired: %+v", got)
	}
	if d, _ := c.Describe("g"); d.State != Dead {
		t.Fatalf("a group left with nothing: %+v", d)
	}
	// The next coordinator loads neither.
	c.Resigned(PartitionFor("g", 3))
	c2 := newC()
	<-c2.Elected(PartitionFor("g", 3), 2)
	if got, _ := c2.Fetch("g", nil); len(got) != 0 {
		t.Fatalf("expired offsets came back: %+v", got)
	}
}

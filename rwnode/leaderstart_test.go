package rwnode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
)

// heldStore is the old leader's way to the store: while down, PUTs fail
// without storing; while holding, a PUT stores the object and then waits
// for release before answering (the object is durable, its metadata not
// yet published).
type heldStore struct {
	objstore.Store
	down, holding atomic.Bool
	mu            sync.Mutex
	release       chan struct{}
	held          atomic.Int64
}

var errHeldDown = errors.New("test: the old leader cannot reach the store")

func (s *heldStore) Put(ctx context.Context, k string, b []byte, o objstore.PutOptions) error {
	if s.down.Load() {
		return errHeldDown
	}
	if err := s.Store.Put(ctx, k, b, o); err != nil || !s.holding.Load() {
		return err
	}
	s.held.Add(1)
	s.mu.Lock()
	rel := s.release
	s.mu.Unlock()
	<-rel
	return nil
}

// TestNewLeaderUploadsTheRangeTheOldOneDidNot: B1 leads and appends
// offsets 5–9, which its followers get from it through the leader
// fallback; then B2 is elected. Whether B1's upload of 5–9 had not
// happened yet (it happens late, after B2's), was stored but not yet
// published (published late, after B2's), or was published before the
// change, the store ends up covering the log
// without a gap, B2 uploads in its own epoch exactly what was not
// published when it took over, the metadata stays in offset order per
// partition and leader epoch (invariant 4), and every replica holds the
// same records.
func TestNewLeaderUploadsTheRangeTheOldOneDidNot(t *testing.T) {
	for _, c := range []struct {
		name string
		// mode is what B1's upload of 5–9 has reached at the change.
		mode string
	}{
		{"before the old leader's PUT", "down"},
		{"after its PUT, before its publish", "held"},
		{"after its publish", "published"},
	} {
		t.Run(c.name, func(t *testing.T) { runLeaderChangeGap(t, c.mode) })
	}
}

func runLeaderChangeGap(t *testing.T, mode string) {
	shared := mem.New()
	b1store := &heldStore{Store: shared, release: make(chan struct{})}
	var meta metadata.TopicConfig
	c := startRemoteWALClusterWith(t, []string{"az1", "az2", "az3"}, shared, func(rc *RemoteWALReplicatorConfig) {
		meta = rc.Metadata
		if rc.BrokerID == 1 {
			b1store.Store = rc.Store
			rc.Store = b1store
		}
	})
	topic := "gap"
	tp, oldEpoch := ledByB1(t, c, topic)
	b1, b2, b3 := c.broker(1), c.broker(2), c.broker(3)
	all := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 5 {
		produceOne(t, all, topic, string(value(i)))
	}
	waitFor(t, "0–4 published", 20*time.Second, func() bool { return maxIndexed(c.rep(2), tp) == 4 })
	switch mode {
	case "down":
		b1store.down.Store(true)
	case "held":
		b1store.holding.Store(true)
	}
	// B2 gets 5–9 from B1 (the leader fallback, when B1's upload is not
	// there); B3 stays at 5, to read them once B2 leads.
	c.rep(3).StopFollower(tp)
	one := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	for i := 5; i < 10; i++ {
		produceOne(t, one, topic, string(value(i)))
	}
	waitFor(t, "B1 and B2 at 10", 20*time.Second, func() bool { return logEnd(b1, tp) == 10 && logEnd(b2, tp) == 10 })
	if logEnd(b3, tp) != 5 {
		t.Fatalf("B3 at %d, want 5", logEnd(b3, tp))
	}
	switch mode {
	case "held":
		waitFor(t, "B1's PUT of 5–9 stored and held", 20*time.Second, func() bool { return b1store.held.Load() > 0 })
	case "published":
		waitFor(t, "5–9 published", 20*time.Second, func() bool { return maxIndexed(c.rep(2), tp) == 9 })
	}
	published := maxIndexed(c.rep(2), tp)

	ps, err := c.ctrl.ElectLeader(tp, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctrl.AlterISR(tp, ps.LeaderEpoch, ps.PartitionEpoch, []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B2 to lead", 10*time.Second, func() bool { return leaderOf(b2, tp) })
	// B2's task starts once its metadata caught up, at the end of what
	// was published then.
	waitFor(t, "B2's task", 20*time.Second, func() bool {
		_, err := c.rep(2).WritePath().Manager.PublishedOffset(mtp(tp))
		return err == nil
	})
	waitFor(t, "B2 to publish up to its log end", 20*time.Second, func() bool {
		off, _ := c.rep(2).WritePath().Manager.PublishedOffset(mtp(tp))
		return off == 10
	})
	if mode != "published" {
		// The deposed leader's late PUT or publish of 5–9, after B2's.
		b1store.down.Store(false)
		b1store.holding.Store(false)
		close(b1store.release)
		waitFor(t, "B1's late publish", 20*time.Second, func() bool {
			for _, s := range c.rep(3).State().Slices(mtp(tp), 5) {
				if s.LeaderEpoch == oldEpoch {
					return true
				}
			}
			return false
		})
	}
	for i := 10; i < 13; i++ {
		produceOne(t, all, topic, string(value(i)))
	}
	waitFor(t, "every replica at 13", 20*time.Second, func() bool {
		return logEnd(b1, tp) == 13 && logEnd(b2, tp) == 13 && logEnd(b3, tp) == 13
	})
	// B3 read 5–12 from the store: the range B1 left out included.
	if n := fallbackBytes(c, 3, topic); n != 0 {
		t.Errorf("B3 fetched %d bytes of %s from the leader; want all from the store", n, topic)
	}
	waitFor(t, "B3 to index up to 12", 20*time.Second, func() bool { return maxIndexed(c.rep(3), tp) == 12 })

	// What B2 uploaded in its epoch starts where the published entries
	// ended when it took over.
	st := c.rep(3).State()
	var mine []string
	for _, s := range st.Slices(mtp(tp), 0) {
		if s.LeaderEpoch == ps.LeaderEpoch {
			mine = append(mine, fmt.Sprintf("[%d,%d]", s.BaseOffset, s.LastOffset))
		}
	}
	first := st.Slices(mtp(tp), 0)
	var firstMine int64 = -1
	for _, s := range first {
		if s.LeaderEpoch == ps.LeaderEpoch {
			firstMine = s.BaseOffset
			break
		}
	}
	if firstMine != published+1 {
		t.Errorf("B2's entries %v start at %d, want %d (the published end when it took over)", mine, firstMine, published+1)
	}
	// The store covers 0–12 without a gap, with live entries only.
	need := int64(0)
	for _, s := range first {
		if from, dead := st.DeadFrom(mtp(tp), s.LeaderEpoch); dead && s.BaseOffset >= from {
			continue
		}
		if s.BaseOffset <= need && s.LastOffset >= need {
			need = s.LastOffset + 1
		}
	}
	if need != 13 {
		t.Errorf("the store's live entries cover the log up to %d, want 13", need)
	}
	checkMetadataOrder(t, meta)

	var want []logRecord
	for _, b := range []*broker.Broker{b1, b2, b3} {
		l, _ := b.PartitionLog(tp)
		recs := logRecords(t, l)
		if len(recs) != 13 {
			t.Fatalf("broker %d holds %d records, want 13", b.Info().ID, len(recs))
		}
		for _, r := range recs {
			if r.value != string(value(int(r.offset))) {
				t.Errorf("broker %d offset %d holds %q", b.Info().ID, r.offset, r.value)
			}
		}
		if want == nil {
			want = recs
		} else if fmt.Sprint(want) != fmt.Sprint(recs) {
			t.Errorf("broker %d's records differ:\n%v\n%v", b.Info().ID, want, recs)
		}
	}
}

// checkMetadataOrder reads the whole metadata topic and checks invariant
// 4 as kwal chaos does: within a metadata partition, a partition's entries
// of one leader epoch are published in offset order without overlap (an
// object's event published again is not checked twice).
func checkMetadataOrder(t *testing.T, cfg metadata.TopicConfig) {
	t.Helper()
	type key struct {
		mp    int32
		tp    metadata.TopicPartition
		epoch int32
	}
	last := map[key]int64{}
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := metadata.ReadTopic(ctx, cfg, quietLogger(), func(tr metadata.TopicRecord) error {
		om, ok := tr.Event.(*metadata.ObjectMetadata)
		if !ok || om.State != metadata.CopySegmentFinished || seen[fmt.Sprint(om.Key, tr.Partition)] {
			return nil
		}
		seen[fmt.Sprint(om.Key, tr.Partition)] = true
		for _, e := range om.Entries {
			k := key{tr.Partition, e.TopicPartition, e.LeaderEpoch}
			if prev, ok := last[k]; ok && e.BaseOffset <= prev {
				t.Errorf("invariant 4: %v epoch %d entry [%d,%d] of %s (broker %d) published after one ending at %d",
					e.TopicPartition, e.LeaderEpoch, e.BaseOffset, e.LastOffset, om.Key, om.BrokerID, prev)
			}
			last[k] = max(last[k], e.LastOffset)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fallbackBytes is what broker id's follower fetched of topic from a
// leader.
func fallbackBytes(c *testCluster, id int32, topic string) int64 {
	var n int64
	for _, r := range c.ledgers[id-1].Snapshot().Transfers {
		if r.Topic == topic && r.Component == "follower" {
			n += r.Bytes
		}
	}
	return n
}

package metadata

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
)

func epochEntry(epoch int32, base, last int64) SliceEntry {
	e := testEntry("orders", 0, base, last)
	e.LeaderEpoch = epoch
	return e
}

func deadRange(epoch int32, start int64) *DeadRange {
	return &DeadRange{TopicPartition: tpA, LeaderEpoch: epoch, StartOffset: start, BrokerID: 2}
}

// The KIP's example: B1 (epoch 0) uploaded 0–10 in slices 0–5, 6–7, 8–10;
// B2 is elected at epoch 1 with log end 6: "DELETE for 6–10".
func kipObjects() []Event {
	return []Event{
		testObject(1, 0, CopySegmentFinished, epochEntry(0, 0, 5)),
		testObject(2, 0, CopySegmentFinished, epochEntry(0, 6, 7)),
		testObject(3, 0, CopySegmentFinished, epochEntry(0, 8, 10)),
	}
}

func TestDeadRangeKillsOlderEpochsPastStart(t *testing.T) {
	s := NewState()
	mustApply(t, s, kipObjects()...)
	ch := s.Changed()
	mustApply(t, s, deadRange(1, 6))
	select {
	case <-ch:
	default:
		t.Fatal("a dead range did not signal Changed")
	}
	if got := sliceOffsets(s.Slices(tpA, 0)); !reflect.DeepEqual(got, [][2]int64{{0, 5}}) {
		t.Fatalf("after DELETE for 6–10: %v", got)
	}
	// B2's own epoch-1 slices from 6 on are live; a zombie's epoch-0 upload
	// arriving after the dead range is never indexed.
	mustApply(t, s,
		testObject(4, 0, CopySegmentFinished, epochEntry(1, 6, 9)),
		testObject(5, 0, CopySegmentFinished, epochEntry(0, 11, 20)))
	if got := sliceOffsets(s.Slices(tpA, 0)); !reflect.DeepEqual(got, [][2]int64{{0, 5}, {6, 9}}) {
		t.Fatalf("after zombie upload: %v", got)
	}
	if from, ok := s.DeadFrom(tpA, 0); !ok || from != 6 {
		t.Fatalf("DeadFrom(epoch 0) = %d %v", from, ok)
	}
	if _, ok := s.DeadFrom(tpA, 1); ok {
		t.Fatal("the new leader's epoch is dead")
	}
	// Duplicate (and a higher start for a known epoch): nothing changes.
	before := s.Stats()
	mustApply(t, s, deadRange(1, 6), deadRange(1, 8))
	if after := s.Stats(); after.Duplicates != before.Duplicates+2 {
		t.Fatalf("duplicates %d -> %d", before.Duplicates, after.Duplicates)
	}
	// A later election at a lower offset kills more, of every older epoch.
	mustApply(t, s, deadRange(2, 3))
	if got := sliceOffsets(s.Slices(tpA, 0)); !reflect.DeepEqual(got, [][2]int64{{0, 5}}) {
		t.Fatalf("after epoch 2 at 3: %v (the straddling 0–5 stays indexed)", got)
	}
	if from, _ := s.DeadFrom(tpA, 1); from != 3 {
		t.Fatalf("DeadFrom(epoch 1) = %d", from)
	}
	if got := s.DeadRanges(tpA); len(got) != 2 || got[0].LeaderEpoch != 1 || got[1].StartOffset != 3 {
		t.Fatalf("DeadRanges %+v", got)
	}
}

// TestDeadRangeOrderFree: any order and any duplication of the same events
// gives the same index, dead ranges and objects (the property the
// compacted topic needs).
func TestDeadRangeOrderFree(t *testing.T) {
	evs := append(kipObjects(),
		deadRange(1, 6),
		testObject(4, 0, CopySegmentFinished, epochEntry(1, 6, 9)),
		testObject(5, 0, CopySegmentFinished, epochEntry(0, 11, 20)),
		deadRange(2, 8),
		testObject(6, 0, CopySegmentFinished, epochEntry(2, 8, 12)),
		testObject(7, 0, CopySegmentFinished, epochEntry(1, 10, 12)), // B2 as a zombie of epoch 1
	)
	ref := NewState()
	mustApply(t, ref, evs...)
	want := sliceOffsets(ref.Slices(tpA, 0))
	if !reflect.DeepEqual(want, [][2]int64{{0, 5}, {6, 9}, {8, 12}}) {
		t.Fatalf("reference index %v", want)
	}
	rng := rand.New(rand.NewPCG(1176, 11))
	for i := range 200 {
		perm := append([]Event(nil), evs...)
		rng.Shuffle(len(perm), func(a, b int) { perm[a], perm[b] = perm[b], perm[a] })
		for range rng.IntN(4) {
			perm = append(perm, perm[rng.IntN(len(perm))])
		}
		s := NewState()
		mustApply(t, s, perm...)
		if got := sliceOffsets(s.Slices(tpA, 0)); !reflect.DeepEqual(got, want) {
			t.Fatalf("order %d: index %v, want %v", i, got, want)
		}
		if !reflect.DeepEqual(s.DeadRanges(tpA), ref.DeadRanges(tpA)) || len(s.Objects()) != len(ref.Objects()) {
			t.Fatalf("order %d: dead ranges or objects differ", i)
		}
	}
}

func TestDeadRangeForgottenWithPartition(t *testing.T) {
	s := NewState()
	mustApply(t, s, deadRange(1, 0),
		&PartitionDelete{TopicPartition: tpA, State: DeletePartitionMarked},
		&PartitionDelete{TopicPartition: tpA, State: DeletePartitionStarted},
		&PartitionDelete{TopicPartition: tpA, State: DeletePartitionFinished},
		// The topic re-created: epoch 0 again, from offset 0.
		testObject(1, 0, CopySegmentFinished, epochEntry(0, 0, 5)))
	if got := sliceOffsets(s.Slices(tpA, 0)); !reflect.DeepEqual(got, [][2]int64{{0, 5}}) {
		t.Fatalf("re-created partition's slices killed by the old dead range: %v", got)
	}
}

func TestReplicatedOffsetKeepsHighest(t *testing.T) {
	s := NewState()
	v := func(epoch int32, off int64) *ReplicatedOffset {
		return &ReplicatedOffset{TopicPartition: tpA, LeaderEpoch: epoch, Offset: off}
	}
	mustApply(t, s, v(1, 10), v(0, 50), v(1, 9), v(1, 10))
	if got, ok := s.ReplicatedOffset(tpA); !ok || got.LeaderEpoch != 1 || got.Offset != 10 {
		t.Fatalf("got %+v %v", got, ok)
	}
	if st := s.Stats(); st.Applied != 1 || st.Duplicates != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDecideRetentionDeadAndDeleter(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000 + int64(time.Hour/time.Millisecond))
	young := now.UnixMilli() // just uploaded
	old := now.Add(-31 * time.Minute).UnixMilli()
	snap := func(ts int64, broker int32, st SegmentState, entries ...SliceEntry) ObjectSnapshot {
		o := testObject(1, 0, st, entries...)
		o.EventTimestampMs, o.BrokerID = ts, broker
		return ObjectSnapshot{ID: o.ID, Key: o.Key, BrokerID: broker, Parts: []ObjectMetadata{*o}}
	}
	deadAt := func(epochBelow int32, from int64) DeadFromFunc {
		return func(tp TopicPartition, e int32) (int64, bool) { return from, tp == tpA && e < epochBelow }
	}
	safeAt := func(off int64) SafeOffsetFunc {
		return func(tp TopicPartition) (int64, bool) { return off, tp == tpA }
	}
	never := func(TopicPartition) (int64, bool) { return 0, false }
	me := func(o *ObjectSnapshot) bool { return o.Parts[0].Entries[0].Partition == 0 }
	cases := []struct {
		name    string
		o       ObjectSnapshot
		pol     RetentionPolicy
		safe    SafeOffsetFunc
		dead    DeadFromFunc
		want    bool
		wantDed bool
	}{
		{"all_dead_young_unknown_safe", snap(young, 1, CopySegmentFinished, epochEntry(0, 6, 10)),
			RetentionPolicy{BrokerID: 1}, never, deadAt(1, 6), true, true},
		{"not_dead_newer_epoch", snap(young, 1, CopySegmentFinished, epochEntry(1, 6, 10)),
			RetentionPolicy{BrokerID: 1}, never, deadAt(1, 6), false, false},
		{"straddling_live_part_replicated", snap(old, 1, CopySegmentFinished, epochEntry(0, 4, 10)),
			RetentionPolicy{BrokerID: 1}, safeAt(6), deadAt(1, 6), true, false},
		{"straddling_live_part_not_replicated", snap(old, 1, CopySegmentFinished, epochEntry(0, 4, 10)),
			RetentionPolicy{BrokerID: 1}, safeAt(5), deadAt(1, 6), false, false},
		{"straddling_young", snap(young, 1, CopySegmentFinished, epochEntry(0, 4, 10)),
			RetentionPolicy{BrokerID: 1}, safeAt(math.MaxInt64), deadAt(1, 6), false, false},
		{"dead_but_another_deleter", snap(young, 1, CopySegmentFinished, epochEntry(0, 6, 10)),
			RetentionPolicy{BrokerID: 2}, never, deadAt(1, 6), false, false},
		{"deleter_rule_overrides_uploader", snap(old, 3, CopySegmentFinished, epochEntry(0, 0, 5)),
			RetentionPolicy{BrokerID: 1, Deletes: me}, safeAt(6), nil, true, false},
		{"deleter_rule_resumes", snap(old, 3, DeleteSegmentStarted, epochEntry(0, 0, 5)),
			RetentionPolicy{BrokerID: 1, Deletes: me}, never, nil, true, false},
		{"deleter_rule_not_me", snap(old, 1, CopySegmentFinished, testEntry("orders", 1, 0, 5)),
			RetentionPolicy{BrokerID: 1, Deletes: me}, safeAt(6), nil, false, false},
		{"abandoned_copy_not_dead_shortcut", snap(young, 1, CopySegmentStarted, epochEntry(0, 6, 10)),
			RetentionPolicy{BrokerID: 1}, never, deadAt(1, 6), false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol := c.pol
			pol.Retention = 30 * time.Minute
			if err := pol.Validate(); err != nil {
				t.Fatal(err)
			}
			got := DecideRetention(now, pol, []ObjectSnapshot{c.o}, c.safe, c.dead)
			if (len(got) == 1) != c.want {
				t.Fatalf("got %d actions, want delete=%v", len(got), c.want)
			}
			if c.want && got[0].Dead != c.wantDed {
				t.Fatalf("dead %v", got[0].Dead)
			}
		})
	}
}

// Each object is deleted from the store its Bucket names; an object whose
// store is unreachable (its AZ lost) does not stop the others.
func TestRetainerPerBucketAndPastAFailingStore(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	st := NewState()
	pub := &statePublisher{st: st}
	az1, az2 := newMemStore(), newMemStore()
	az1.mu.fail = errors.New("az1 unreachable")
	stores := func(b string) (objstore.Store, error) {
		switch b {
		case "az1":
			return az1, nil
		case "az2":
			return az2, nil
		}
		return nil, fmt.Errorf("unknown bucket %q", b)
	}
	var keys []string
	for i, b := range []string{"az1", "az2", "az2", "nowhere"} {
		o := testObject(byte(10*i+1), 0, CopySegmentFinished, testEntry("orders", int32(i), 0, 9))
		o.Bucket = b
		o.EventTimestampMs = clk.Now().UnixMilli()
		s, _ := stores(b)
		if s != nil {
			if err := s.Put(context.Background(), o.Key, []byte("x"), objstore.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		mustApply(t, st, o)
		keys = append(keys, o.Key)
	}
	r, err := NewRetainer(RetentionPolicy{Retention: time.Minute, BrokerID: -1}, st, pub, stores,
		func(TopicPartition) (int64, bool) { return 10, true }, clk, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	n, err := r.RunOnce(context.Background())
	if n != 2 || err == nil {
		t.Fatalf("RunOnce = %d, %v; want the two az2 objects deleted and the failures reported", n, err)
	}
	if len(az2.mu.objs) != 0 || len(az1.mu.objs) != 1 {
		t.Fatalf("az1 holds %d, az2 %d objects", len(az1.mu.objs), len(az2.mu.objs))
	}
	if s, _ := st.ObjectState(keys[0]); s != DeleteSegmentStarted {
		t.Fatalf("az1 object in %v, want DELETE_SEGMENT_STARTED (resumed later)", s)
	}
	az1.mu.fail = nil
	if n, _ := r.RunOnce(context.Background()); n != 1 {
		t.Fatalf("after az1 came back, deleted %d", n)
	}
}

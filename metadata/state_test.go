package metadata

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

var tpA = TopicPartition{Topic: "orders", Partition: 0}

func withState(o *ObjectMetadata, st SegmentState, ts int64) *ObjectMetadata {
	c := cloneMeta(o)
	c.State, c.EventTimestampMs = st, ts
	return &c
}

func mustApply(t *testing.T, s *State, evs ...Event) {
	t.Helper()
	for _, ev := range evs {
		if err := s.Apply(ev); err != nil {
			t.Fatalf("Apply(%+v): %v", ev, err)
		}
	}
}

func sliceOffsets(ss []IndexedSlice) [][2]int64 {
	var out [][2]int64
	for _, s := range ss {
		out = append(out, [2]int64{s.BaseOffset, s.LastOffset})
	}
	return out
}

func TestStateFirstEventFinishedOrStarted(t *testing.T) {
	// kwal: metadata follows data, so FINISHED may be the first event.
	s := NewState()
	mustApply(t, s, testObject(1, 0, CopySegmentFinished, testEntry("orders", 0, 0, 9)))
	if got := s.Slices(tpA, 0); len(got) != 1 || got[0].ObjectKey != "wal/obj-1" || got[0].State != CopySegmentFinished {
		t.Fatalf("FINISHED first: %+v", got)
	}
	// Kafka's order: STARTED then FINISHED; STARTED slices are not readable.
	o := testObject(2, 0, CopySegmentStarted, testEntry("orders", 0, 10, 19))
	mustApply(t, s, o)
	if got := sliceOffsets(s.Slices(tpA, 10)); got != nil {
		t.Fatalf("STARTED slice served: %v", got)
	}
	if st, ok := s.ObjectState("wal/obj-2"); !ok || st != CopySegmentStarted {
		t.Fatalf("ObjectState = %v %v", st, ok)
	}
	mustApply(t, s, withState(o, CopySegmentFinished, 2))
	if got := sliceOffsets(s.Slices(tpA, 0)); !reflect.DeepEqual(got, [][2]int64{{0, 9}, {10, 19}}) {
		t.Fatalf("slices %v", got)
	}
}

func TestStateSlicesFromOffset(t *testing.T) {
	s := NewState()
	// Inserted out of order: the index sorts.
	for i, r := range [][2]int64{{20, 29}, {0, 9}, {30, 30}, {10, 19}} {
		mustApply(t, s, testObject(byte(i+1), 0, CopySegmentFinished, testEntry("orders", 0, r[0], r[1])))
	}
	cases := []struct {
		from int64
		want [][2]int64
	}{
		{0, [][2]int64{{0, 9}, {10, 19}, {20, 29}, {30, 30}}},
		{15, [][2]int64{{10, 19}, {20, 29}, {30, 30}}},
		{20, [][2]int64{{20, 29}, {30, 30}}},
		{30, [][2]int64{{30, 30}}},
		{31, nil},
	}
	for _, c := range cases {
		if got := sliceOffsets(s.Slices(tpA, c.from)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Slices(from %d) = %v, want %v", c.from, got, c.want)
		}
	}
	if got := s.Slices(TopicPartition{Topic: "orders", Partition: 1}, 0); got != nil {
		t.Errorf("other partition: %v", got)
	}
}

func TestStateDuplicatesAreNoOps(t *testing.T) {
	s := NewState()
	o := testObject(1, 0, CopySegmentFinished, testEntry("orders", 0, 0, 9))
	mustApply(t, s, o)
	before := s.Objects()
	ch := s.Changed()
	mustApply(t, s, o, o, &StateUpdate{ID: o.ID, MetadataPartition: 0, State: CopySegmentFinished}, &Tombstone{ObjectRef{testID(9), 0}})
	if !reflect.DeepEqual(before, s.Objects()) || len(s.Slices(tpA, 0)) != 1 {
		t.Fatal("duplicate changed the state")
	}
	select {
	case <-ch:
		t.Fatal("Changed fired on duplicates")
	default:
	}
	if st := s.Stats(); st.Duplicates != 4 || st.Applied != 1 || st.Slices != 1 || st.Parts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStateIllegalTransitions(t *testing.T) {
	e := testEntry("orders", 0, 0, 9)
	cases := []struct {
		from, to SegmentState
	}{
		{CopySegmentFinished, CopySegmentStarted},
		{CopySegmentFinished, DeleteSegmentFinished},
		{DeleteSegmentStarted, CopySegmentFinished},
		{DeleteSegmentStarted, CopySegmentStarted},
		{DeleteSegmentFinished, DeleteSegmentStarted},
		{DeleteSegmentFinished, CopySegmentFinished},
		{CopySegmentStarted, DeleteSegmentFinished},
	}
	for _, c := range cases {
		t.Run(c.from.String()+"->"+c.to.String(), func(t *testing.T) {
			s := NewState()
			o := testObject(1, 0, c.from, e)
			mustApply(t, s, o)
			before, beforeSlices := s.Objects(), s.Slices(tpA, 0)
			for _, ev := range []Event{withState(o, c.to, 5), &StateUpdate{ID: o.ID, State: c.to, EventTimestampMs: 5}} {
				err := s.Apply(ev)
				var ite *IllegalTransitionError
				if !errors.As(err, &ite) || ite.From != c.from.String() || ite.To != c.to.String() {
					t.Fatalf("Apply = %v, want *IllegalTransitionError", err)
				}
			}
			if !reflect.DeepEqual(before, s.Objects()) || !reflect.DeepEqual(beforeSlices, s.Slices(tpA, 0)) {
				t.Fatal("refused event changed the state")
			}
			if s.Stats().Refused != 2 {
				t.Fatalf("stats %+v", s.Stats())
			}
		})
	}
}

func TestStateLifecycleAndTombstone(t *testing.T) {
	s := NewState()
	o := testObject(1, 0, CopySegmentStarted, testEntry("orders", 0, 0, 9))
	// Abandoned copy: STARTED -> DELETE_SEGMENT_STARTED is legal.
	mustApply(t, s, o, &StateUpdate{ID: o.ID, State: DeleteSegmentStarted, EventTimestampMs: 2, BrokerID: 7})
	if st, _ := s.ObjectState(o.Key); st != DeleteSegmentStarted {
		t.Fatalf("state %v", st)
	}
	if s.Stats().Slices != 0 {
		t.Fatal("deleting object still indexed")
	}
	mustApply(t, s, withState(o, DeleteSegmentFinished, 3))
	if st, ok := s.ObjectState(o.Key); !ok || st != DeleteSegmentFinished {
		t.Fatalf("state %v %v", st, ok)
	}
	mustApply(t, s, &Tombstone{o.Ref()})
	if _, ok := s.ObjectState(o.Key); ok || len(s.Objects()) != 0 {
		t.Fatal("tombstone did not remove the object")
	}
	// An update for the removed object is ignored, not applied.
	if err := s.Apply(&StateUpdate{ID: o.ID, State: DeleteSegmentFinished}); !errors.Is(err, ErrUnknownObject) {
		t.Fatalf("update for unknown object: %v", err)
	}
	if len(s.Objects()) != 0 {
		t.Fatal("ignored update created an object")
	}
}

func TestStateObjectStateOverParts(t *testing.T) {
	s := NewState()
	a := testObject(1, 3, CopySegmentFinished, testEntry("orders", 0, 0, 9))
	b := testObject(1, 7, CopySegmentFinished, testEntry("orders", 1, 0, 9))
	mustApply(t, s, a, b, withState(a, DeleteSegmentStarted, 9))
	if st, ok := s.ObjectState(a.Key); !ok || st != CopySegmentFinished {
		t.Fatalf("ObjectState = %v, want the least advanced part", st)
	}
	mustApply(t, s, &Tombstone{a.Ref()})
	if st, ok := s.ObjectState(a.Key); !ok || st != CopySegmentFinished {
		t.Fatalf("after one tombstone: %v %v", st, ok)
	}
	if objs := s.Objects(); len(objs) != 1 || len(objs[0].Parts) != 1 || objs[0].Parts[0].MetadataPartition != 7 {
		t.Fatalf("objects %+v", objs)
	}
}

func TestStatePartitionDelete(t *testing.T) {
	s := NewState()
	mustApply(t, s, testObject(1, 0, CopySegmentFinished, testEntry("orders", 0, 0, 9), testEntry("orders", 1, 0, 9)))
	pd := func(st PartitionDeleteState) *PartitionDelete {
		return &PartitionDelete{TopicPartition: tpA, State: st, EventTimestampMs: int64(st)}
	}
	mustApply(t, s, pd(DeletePartitionMarked))
	if len(s.Slices(tpA, 0)) != 1 {
		t.Fatal("MARKED removed slices")
	}
	// Entries for a partition being deleted are not indexed.
	mustApply(t, s, testObject(2, 0, CopySegmentFinished, testEntry("orders", 0, 10, 19)))
	if got := sliceOffsets(s.Slices(tpA, 0)); len(got) != 1 {
		t.Fatalf("indexed during deletion: %v", got)
	}
	var ite *IllegalTransitionError
	if err := s.Apply(pd(DeletePartitionFinished)); !errors.As(err, &ite) || ite.Partition != tpA {
		t.Fatalf("MARKED->FINISHED: %v", err)
	}
	mustApply(t, s, pd(DeletePartitionStarted), pd(DeletePartitionStarted))
	if len(s.Slices(tpA, 0)) != 0 || len(s.Slices(TopicPartition{Topic: "orders", Partition: 1}, 0)) != 1 {
		t.Fatal("STARTED must drop exactly the deleted partition's slices")
	}
	if err := s.Apply(pd(DeletePartitionMarked)); !errors.As(err, &ite) {
		t.Fatalf("backwards: %v", err)
	}
	mustApply(t, s, pd(DeletePartitionFinished))
	if st, ok := s.PartitionDeleteState(tpA); !ok || st != DeletePartitionFinished {
		t.Fatalf("delete state %v %v", st, ok)
	}
	// Re-created topic: new entries index again.
	mustApply(t, s, testObject(3, 0, CopySegmentFinished, testEntry("orders", 0, 0, 4)))
	if got := sliceOffsets(s.Slices(tpA, 0)); !reflect.DeepEqual(got, [][2]int64{{0, 4}}) {
		t.Fatalf("re-created partition slices %v", got)
	}
}

func TestStateChangedNotifies(t *testing.T) {
	s := NewState()
	ch := s.Changed()
	mustApply(t, s, testObject(1, 0, CopySegmentFinished, testEntry("orders", 0, 0, 9)))
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by a new slice")
	}
	if s.Changed() == ch {
		t.Fatal("Changed not renewed")
	}
}

// Property: each object's events in order, objects interleaved at random,
// every event possibly duplicated: the end state equals applying them
// object after object, once each.
func TestStateInterleavedDuplicatedEqualsSequential(t *testing.T) {
	const objects = 30
	var streams [][]Event
	for i := 0; i < objects; i++ {
		o := testObject(byte(i), int32(i%3), CopySegmentFinished, testEntry("orders", int32(i%4), int64(i)*10, int64(i)*10+9))
		evs := []Event{o}
		switch i % 4 {
		case 1:
			evs = []Event{withState(o, CopySegmentStarted, 1), withState(o, CopySegmentFinished, 2)}
		case 2:
			evs = append(evs, withState(o, DeleteSegmentStarted, 3))
		case 3:
			evs = append(evs, withState(o, DeleteSegmentStarted, 3), &StateUpdate{ID: o.ID, MetadataPartition: o.MetadataPartition, State: DeleteSegmentFinished, EventTimestampMs: 4}, &Tombstone{o.Ref()})
		}
		streams = append(streams, evs)
	}
	want := NewState()
	for _, evs := range streams {
		mustApply(t, want, evs...)
	}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		got := NewState()
		pos := make([]int, objects)
		for left := true; left; {
			left = false
			i := rng.IntN(objects)
			for j := 0; j < objects; j++ {
				k := (i + j) % objects
				if pos[k] < len(streams[k]) {
					ev := streams[k][pos[k]]
					mustApply(t, got, ev)
					if rng.IntN(3) == 0 {
						mustApply(t, got, ev) // duplicate
					}
					pos[k]++
					left = true
					break
				}
			}
		}
		if !reflect.DeepEqual(got.Objects(), want.Objects()) {
			t.Fatalf("seed %d: objects differ", seed)
		}
		for p := int32(0); p < 4; p++ {
			tp := TopicPartition{Topic: "orders", Partition: p}
			if !reflect.DeepEqual(got.Slices(tp, 0), want.Slices(tp, 0)) {
				t.Fatalf("seed %d: slices of %s differ", seed, tp)
			}
		}
	}
}

// TestApplyAllIsApplyOneByOneWithOneChange: a batch (a consumer's poll)
// ends in the state, the per-event results and the stats of applying its
// events one by one, refusals and duplicates included, and wakes Changed
// once; a batch that changes nothing does not wake it.
func TestApplyAllIsApplyOneByOneWithOneChange(t *testing.T) {
	o := testObject(1, 0, CopySegmentFinished, testEntry("orders", 0, 0, 9))
	evs := []Event{
		testObject(2, 0, CopySegmentStarted, testEntry("orders", 0, 10, 19)),
		o, o, // a duplicate
		withState(o, CopySegmentStarted, 5), // illegal: back to STARTED
		&StateUpdate{ID: testID(9), MetadataPartition: 0, State: DeleteSegmentStarted, EventTimestampMs: 1}, // unknown object
		withState(o, DeleteSegmentStarted, 6),
		testObject(3, 0, CopySegmentFinished, testEntry("orders", 0, 20, 29)),
	}
	one := NewState()
	var want []error
	for _, ev := range evs {
		want = append(want, one.Apply(ev))
	}
	batch := NewState()
	ch := batch.Changed()
	var got []error
	batch.ApplyAll(evs, func(i int, err error) {
		if i != len(got) {
			t.Fatalf("result %d out of order", i)
		}
		got = append(got, err)
	})
	for i := range evs {
		if (got[i] == nil) != (want[i] == nil) || (got[i] != nil && got[i].Error() != want[i].Error()) {
			t.Errorf("event %d: %v, one by one %v", i, got[i], want[i])
		}
	}
	if !reflect.DeepEqual(batch.Objects(), one.Objects()) || !reflect.DeepEqual(batch.Slices(tpA, 0), one.Slices(tpA, 0)) || batch.Stats() != one.Stats() {
		t.Fatalf("batch state %+v / %+v, one by one %+v / %+v", batch.Objects(), batch.Stats(), one.Objects(), one.Stats())
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by the batch")
	}
	next := batch.Changed()
	if next == ch {
		t.Fatal("Changed not renewed")
	}
	batch.ApplyAll([]Event{o, withState(o, CopySegmentStarted, 7)}, nil) // a duplicate and a refusal
	select {
	case <-next:
		t.Fatal("Changed closed by a batch that changed nothing")
	default:
	}
}

package metadata

import (
	"slices"
	"strings"
	"testing"
)

// TestChangedSince: each change lists the partitions whose slices it may
// have changed, and only those; a duplicate or refused event lists
// nothing; a reader far enough behind is told its list is not complete.
func TestChangedSince(t *testing.T) {
	a, b, c := TopicPartition{Topic: "a"}, TopicPartition{Topic: "b"}, TopicPartition{Topic: "c", Partition: 2}
	s := NewState()
	o := testObject(1, 0, CopySegmentFinished, testEntry("a", 0, 0, 9), testEntry("b", 0, 0, 4))
	var seq uint64
	step := func(what string, want []TopicPartition, evs ...Event) {
		t.Helper()
		for _, ev := range evs {
			_ = s.Apply(ev) // refused events are part of the script
		}
		got, next, complete := s.ChangedSince(seq)
		slices.SortFunc(got, func(x, y TopicPartition) int { return strings.Compare(x.String(), y.String()) })
		if !complete || !slices.Equal(got, want) {
			t.Fatalf("%s: ChangedSince(%d) = %v, complete %v; want %v", what, seq, got, complete, want)
		}
		if len(want) == 0 && next != seq {
			t.Fatalf("%s: nothing changed, yet seq moved %d → %d", what, seq, next)
		}
		seq = next
	}
	step("nothing yet", nil)
	step("an object of a and b", []TopicPartition{a, b}, o)
	step("the same object again", nil, o)
	step("a dead range of c", []TopicPartition{c}, &DeadRange{TopicPartition: c, LeaderEpoch: 4, StartOffset: 0})
	step("a state update of the object", []TopicPartition{a, b}, &StateUpdate{ID: o.ID, State: DeleteSegmentStarted})
	step("an illegal transition", nil, &StateUpdate{ID: o.ID, State: CopySegmentStarted})
	step("a replicated offset of b", []TopicPartition{b}, &ReplicatedOffset{TopicPartition: b, LeaderEpoch: 3, Offset: 5})
	step("the object's tombstone", []TopicPartition{a, b}, &Tombstone{o.Ref()})
	step("a partition delete of a", []TopicPartition{a}, &PartitionDelete{TopicPartition: a, State: DeletePartitionMarked})

	// Two readers: one from the start, one at seq; a change seen by both.
	all, _, complete := s.ChangedSince(0)
	slices.SortFunc(all, func(x, y TopicPartition) int { return strings.Compare(x.String(), y.String()) })
	if !complete || !slices.Equal(all, []TopicPartition{a, b, c}) {
		t.Fatalf("ChangedSince(0) = %v, complete %v; want every partition touched, complete", all, complete)
	}

	// More changes than State lists: a reader behind all of them must read
	// everything again; one that kept up still gets its exact list.
	for i := range maxTouched + 1 {
		s.Apply(&ReplicatedOffset{TopicPartition: c, LeaderEpoch: 5, Offset: int64(i + 1)})
	}
	if _, _, complete := s.ChangedSince(seq); complete {
		t.Fatalf("ChangedSince(%d) after %d changes says its list is complete", seq, maxTouched+1)
	}
	_, seq, _ = s.ChangedSince(0)
	step("after the overflow", []TopicPartition{b}, &ReplicatedOffset{TopicPartition: b, LeaderEpoch: 5, Offset: 9})
}

package chaos

import (
	"fmt"
	"testing"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/metadata"
)

// history builds a hand-made history: producer "p" (acks=all) sends n
// records to t-0, acknowledged at offsets 0..n-1, and "q" (acks=1) sends
// m records acknowledged at n..n+m-1.
func history(n, m int) []Send {
	var out []Send
	for i := range n {
		out = append(out, Send{Producer: "p", AcksAll: true, Topic: "t", Seq: int64(i), Value: fmt.Sprintf("p-%d", i), Outcome: Acked, Offset: int64(i)})
	}
	for i := range m {
		out = append(out, Send{Producer: "q", Topic: "t", Seq: int64(i), Value: fmt.Sprintf("q-%d", i), Outcome: Acked, Offset: int64(n + i)})
	}
	return out
}

// readAll reads every acknowledged send in offset order, as consumer c.
func readAll(c string, sends []Send) []Read {
	var out []Read
	for _, s := range sends {
		if s.Outcome == Acked {
			out = append(out, Read{Consumer: c, Topic: s.Topic, Partition: s.Partition, Offset: s.Offset, Value: s.Value})
		}
	}
	return out
}

func TestCheckerCatches(t *testing.T) {
	sends := history(5, 3)
	clean := append(readAll("a", sends), readAll("b", sends)...)
	for _, tc := range []struct {
		name   string
		sends  []Send
		reads  []Read
		stalls []Stall
		want   map[string]int
		check  func(t *testing.T, r Result)
	}{
		{name: "clean", sends: sends, reads: clean, want: map[string]int{}},
		{name: "lost", sends: sends, reads: append(readAll("a", sends)[:2], readAll("a", sends)[3:]...), want: map[string]int{Lost: 1}},
		{name: "lost by one consumer only", sends: sends, reads: append(readAll("a", sends), readAll("b", sends)[1:]...), want: map[string]int{Lost: 1}},
		{name: "nothing read", sends: sends, reads: nil, want: map[string]int{Lost: 1}},
		{name: "duplicated", sends: sends, reads: append(readAll("a", sends)[:5], Read{"a", "t", 0, 5, "p-4"}), want: map[string]int{Duplicated: 1, Moved: 0}},
		{name: "offsets reordered", sends: sends, reads: []Read{{"a", "t", 0, 1, "p-1"}, {"a", "t", 0, 0, "p-0"}, {"a", "t", 0, 2, "p-2"}, {"a", "t", 0, 3, "p-3"}, {"a", "t", 0, 4, "p-4"}}, want: map[string]int{Reordered: 2, Lost: 0}}, // both the offset order and the producer order break
		{name: "producer order broken", sends: []Send{
			{Producer: "p", AcksAll: true, Topic: "t", Seq: 0, Value: "x", Outcome: Unknown},
			{Producer: "p", AcksAll: true, Topic: "t", Seq: 1, Value: "y", Outcome: Unknown},
		}, reads: []Read{{"a", "t", 0, 0, "y"}, {"a", "t", 0, 1, "x"}}, want: map[string]int{Reordered: 1}},
		{name: "phantom", sends: sends, reads: append(readAll("a", sends), Read{"a", "t", 0, 9, "never"}), want: map[string]int{Phantom: 1}},
		{name: "phantom in another partition", sends: sends, reads: append(readAll("a", sends), Read{"a", "t", 1, 0, "p-0"}), want: map[string]int{Phantom: 1}},
		{name: "moved", sends: sends, reads: []Read{{"a", "t", 0, 0, "p-0"}, {"a", "t", 0, 1, "p-1"}, {"a", "t", 0, 2, "p-2"}, {"a", "t", 0, 3, "p-3"}, {"a", "t", 0, 7, "p-4"}, {"a", "t", 0, 8, "q-0"}, {"a", "t", 0, 9, "q-1"}, {"a", "t", 0, 10, "q-2"}}, want: map[string]int{Moved: 1}},
		{name: "consumers diverge", sends: []Send{
			{Producer: "p", AcksAll: true, Topic: "t", Value: "x", Outcome: Unknown},
			{Producer: "p", AcksAll: true, Topic: "t", Seq: 1, Value: "y", Outcome: Unknown},
		}, reads: []Read{{"a", "t", 0, 0, "x"}, {"b", "t", 0, 0, "y"}}, want: map[string]int{Diverged: 1}},
		{name: "acks=1 loss is counted, not failed", sends: sends, reads: readAll("a", sends)[:7], want: map[string]int{},
			check: func(t *testing.T, r Result) {
				if r.LostOne != 1 {
					t.Errorf("LostOne = %d, want 1", r.LostOne)
				}
			}},
		{name: "acks=1 duplicate is counted, not failed", sends: sends, reads: append(readAll("a", sends), Read{"a", "t", 0, 8, "q-2"}), want: map[string]int{},
			check: func(t *testing.T, r Result) {
				if r.DuplicatedOne != 1 {
					t.Errorf("DuplicatedOne = %d, want 1", r.DuplicatedOne)
				}
			}},
		// A consumer that stopped short of the high watermark: what it
		// did not reach is unread, not lost, and what it skipped before
		// its stall is still lost.
		{name: "stalled consumer", sends: sends, reads: append(readAll("a", sends), readAll("b", sends)[:2]...),
			stalls: []Stall{{Consumer: "b", Topic: "t", Next: 2, HW: 8}}, want: map[string]int{Unread: 3},
			check: func(t *testing.T, r Result) {
				if r.UnreadOne != 3 || r.LostOne != 0 {
					t.Errorf("UnreadOne %d, LostOne %d; want 3 and 0", r.UnreadOne, r.LostOne)
				}
			}},
		{name: "hole before a stall is lost", sends: sends, reads: append(readAll("a", sends), readAll("b", sends)[0], readAll("b", sends)[2]),
			stalls: []Stall{{Consumer: "b", Topic: "t", Next: 3, HW: 8}}, want: map[string]int{Lost: 1, Unread: 2}},
		{name: "stall in another partition changes nothing", sends: sends, reads: append(readAll("a", sends), readAll("b", sends)[:2]...),
			stalls: []Stall{{Consumer: "b", Topic: "t", Partition: 1, Next: 0, HW: 8}}, want: map[string]int{Lost: 3}},
		{name: "stalled consumer that read nothing", sends: sends, reads: readAll("a", sends),
			stalls: []Stall{{Consumer: "b", Topic: "t", Next: 0, HW: 8}}, want: map[string]int{Unread: 5}},
		{name: "unknown outcome may be absent", sends: []Send{{Producer: "p", AcksAll: true, Topic: "t", Value: "x", Outcome: Unknown}}, reads: []Read{}, want: map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.sends, tc.reads, tc.stalls...)
			total := 0
			for k, n := range tc.want {
				if got := r.Count(k); got != n {
					t.Errorf("%s: %d violations, want %d: %v", k, got, n, r.Violations)
				}
				total += n
			}
			if len(r.Violations) != total {
				t.Errorf("violations %v, want only %v", r.Violations, tc.want)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// TestCoveredTellsFailoverGapsFromShortStores: a store that ends short of
// the high watermark is short, unless its last live slice is of an older
// epoch and the next epoch began at or past the high watermark (the range
// between was never uploaded: a failover gap, reported apart).
func TestCoveredTellsFailoverGapsFromShortStores(t *testing.T) {
	tp := metadata.TopicPartition{Topic: "remotewal", Partition: 0}
	btp := broker.TopicPartition{Topic: "remotewal", Partition: 0}
	state := func(deadStart int64, newer ...int64) *metadata.State {
		st := metadata.NewState()
		om := &metadata.ObjectMetadata{ID: metadata.ObjectID{1}, Bucket: "wal", Key: "wal/1", BrokerID: 1,
			State: metadata.CopySegmentFinished, EventTimestampMs: 1,
			Entries: []metadata.SliceEntry{{TopicPartition: tp, LeaderEpoch: 0, BaseOffset: 0, LastOffset: 25,
				Position: 0, Length: 100, RawLength: 100, Codec: metadata.CodecNone}}}
		if err := st.Apply(om); err != nil {
			t.Fatal(err)
		}
		if deadStart >= 0 {
			if err := st.Apply(&metadata.DeadRange{TopicPartition: tp, LeaderEpoch: 1, StartOffset: deadStart, BrokerID: 2, EventTimestampMs: 2}); err != nil {
				t.Fatal(err)
			}
		}
		for i, start := range newer {
			if err := st.Apply(&metadata.DeadRange{TopicPartition: tp, LeaderEpoch: int32(2 + i), StartOffset: start, BrokerID: 1, EventTimestampMs: int64(3 + i)}); err != nil {
				t.Fatal(err)
			}
		}
		return st
	}
	for _, c := range []struct {
		name        string
		deadStart   int64
		newer       []int64
		hw          int64
		short, gaps int
	}{
		{"covered", -1, nil, 26, 0, 0},
		{"short, no leader change", -1, nil, 40, 1, 0},
		{"gap before the new epoch", 40, nil, 40, 0, 1},
		{"the new epoch wrote past its start and did not upload", 40, nil, 50, 1, 0},
		{"new epoch starts right after the last slice", 26, nil, 40, 1, 0},
		// Seed 652: the next epoch began right after the last slice and
		// appended nothing; the old leader, holding the range, led the
		// newer epochs from its log end.
		{"empty epoch, then the old leader again from its log end", 26, []int64{40, 40}, 40, 0, 1},
		{"empty epoch, then a newer one that wrote and did not upload", 26, []int64{30}, 40, 1, 0},
	} {
		short, gaps := covered(state(c.deadStart, c.newer...), map[broker.TopicPartition]int64{btp: c.hw})
		if len(short) != c.short || len(gaps) != c.gaps {
			t.Errorf("%s: short %q, gaps %q; want %d and %d", c.name, short, gaps, c.short, c.gaps)
		}
	}
}

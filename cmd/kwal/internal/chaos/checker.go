package chaos

import (
	"fmt"
	"slices"
	"strings"
)

// Violation kinds: each breaks an invariant of acks=all idempotent
// production (DESIGN.md invariants 1-4 as a client sees them).
const (
	Lost       = "lost"       // an acknowledged acks=all record a consumer never read
	Duplicated = "duplicated" // an idempotent producer's record read at two offsets
	Reordered  = "reordered"  // offsets not increasing, or a producer's records out of send order
	Phantom    = "phantom"    // a record read that no producer sent
	Moved      = "moved"      // an acknowledged record read at an offset other than its ack's
	Diverged   = "diverged"   // two consumers read different records at one offset
	// Unread: an acknowledged acks=all record at or past the offset where
	// a consumer stopped short of the high watermark (it could not read
	// on: a liveness failure, not known to be a loss; the replica check
	// says whether the cluster still holds it).
	Unread = "unread"
)

// Stall is where a consumer stopped reading a partition short of its high
// watermark: Next is the offset it would have read next.
type Stall struct {
	Consumer  string
	Topic     string
	Partition int32
	Next, HW  int64
}

// Violation is one broken invariant.
type Violation struct {
	Kind      string
	Topic     string
	Partition int32
	Detail    string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s-%d: %s", v.Kind, v.Topic, v.Partition, v.Detail)
}

// Result is the checker's verdict on one history.
type Result struct {
	Sent, AckedAll, AckedOne, Unknown int
	Reads                             int
	// LostOne counts acks=1 acknowledged records no consumer read, and
	// DuplicatedOne acks=1 records read more than once (retries of a
	// non-idempotent producer): reported, not failed.
	LostOne, DuplicatedOne int
	// UnreadOne counts acks=1 acknowledged records past a Stall.
	UnreadOne  int
	Violations []Violation
}

// OK says no invariant broke.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// Count returns the violations of kind.
func (r Result) Count(kind string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == kind {
			n++
		}
	}
	return n
}

func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d (acks=all acked %d, acks=1 acked %d, unknown %d), read %d; acks=1 lost %d, acks=1 duplicated %d",
		r.Sent, r.AckedAll, r.AckedOne, r.Unknown, r.Reads, r.LostOne, r.DuplicatedOne)
	if r.UnreadOne > 0 {
		fmt.Fprintf(&b, ", acks=1 unread %d", r.UnreadOne)
	}
	for _, k := range []string{Lost, Unread, Duplicated, Reordered, Phantom, Moved, Diverged} {
		if n := r.Count(k); n > 0 {
			fmt.Fprintf(&b, "; %s %d", k, n)
		}
	}
	return b.String()
}

type partKey struct {
	topic string
	part  int32
}

// Check checks a history in the manner of Jepsen's queue checker, per
// partition and per consumer (each consumer is expected to have read
// every partition from its start to its high watermark):
//   - every acknowledged acks=all record is read, at its acknowledged offset;
//   - no idempotent producer's record is read twice;
//   - offsets are read in increasing order, and one idempotent producer's
//     records lie in the order it sent them;
//   - nothing is read that was never sent;
//   - consumers agree on the record at each offset.
//
// An acknowledged record a consumer did not read is Lost, or Unread if it
// lies at or past one of stalls (the consumer stopped there, short of the
// high watermark, so its absence says nothing of the log).
//
// Violations come in a deterministic order, the first broken first by
// partition.
func Check(sends []Send, reads []Read, stalls ...Stall) Result {
	var r Result
	sent := map[string]Send{}
	for _, s := range sends {
		r.Sent++
		sent[s.Value] = s
		switch {
		case s.Outcome == Acked && s.AcksAll:
			r.AckedAll++
		case s.Outcome == Acked:
			r.AckedOne++
		default:
			r.Unknown++
		}
	}
	r.Reads = len(reads)
	type state struct {
		last    int64
		seen    map[string]int64 // value -> offset
		lastSeq map[string]int64 // producer -> seq of the last record read
	}
	var consumers []string
	perConsumer := map[string]map[partKey]*state{}
	atOffset := map[partKey]map[int64]string{}
	add := func(v Violation) { r.Violations = append(r.Violations, v) }
	dupOne := map[string]bool{}
	for _, rd := range reads {
		pk := partKey{rd.Topic, rd.Partition}
		parts := perConsumer[rd.Consumer]
		if parts == nil {
			parts = map[partKey]*state{}
			perConsumer[rd.Consumer] = parts
			consumers = append(consumers, rd.Consumer)
		}
		st := parts[pk]
		if st == nil {
			st = &state{last: -1, seen: map[string]int64{}, lastSeq: map[string]int64{}}
			parts[pk] = st
		}
		if rd.Offset <= st.last {
			add(Violation{Reordered, rd.Topic, rd.Partition, fmt.Sprintf("%s read offset %d after %d", rd.Consumer, rd.Offset, st.last)})
		}
		st.last = max(st.last, rd.Offset)
		if at := atOffset[pk]; at == nil {
			atOffset[pk] = map[int64]string{rd.Offset: rd.Value}
		} else if v, ok := at[rd.Offset]; ok && v != rd.Value {
			add(Violation{Diverged, rd.Topic, rd.Partition, fmt.Sprintf("offset %d is %q for one consumer and %q for %s", rd.Offset, v, rd.Value, rd.Consumer)})
		} else if !ok {
			at[rd.Offset] = rd.Value
		}
		s, ok := sent[rd.Value]
		if !ok || s.Topic != rd.Topic || s.Partition != rd.Partition {
			add(Violation{Phantom, rd.Topic, rd.Partition, fmt.Sprintf("%s read %q at offset %d, never sent to this partition", rd.Consumer, rd.Value, rd.Offset)})
			continue
		}
		if prev, dup := st.seen[rd.Value]; dup && prev != rd.Offset {
			if s.AcksAll {
				add(Violation{Duplicated, rd.Topic, rd.Partition, fmt.Sprintf("%s read %q at offsets %d and %d", rd.Consumer, rd.Value, prev, rd.Offset)})
			} else if !dupOne[rd.Value] {
				dupOne[rd.Value] = true
				r.DuplicatedOne++
			}
			continue
		}
		st.seen[rd.Value] = rd.Offset
		if s.Outcome == Acked && s.AcksAll && s.Offset != rd.Offset {
			add(Violation{Moved, rd.Topic, rd.Partition, fmt.Sprintf("%q acknowledged at offset %d, read at %d by %s", rd.Value, s.Offset, rd.Offset, rd.Consumer)})
		}
		if s.AcksAll {
			if last, ok := st.lastSeq[s.Producer]; ok && s.Seq < last {
				add(Violation{Reordered, rd.Topic, rd.Partition, fmt.Sprintf("%s read %s's seq %d (offset %d) after its seq %d", rd.Consumer, s.Producer, s.Seq, rd.Offset, last)})
			}
			st.lastSeq[s.Producer] = max(st.lastSeq[s.Producer], s.Seq)
		}
	}
	type stallKey struct {
		consumer string
		pk       partKey
	}
	stalled := map[stallKey]Stall{}
	for _, sl := range stalls {
		stalled[stallKey{sl.Consumer, partKey{sl.Topic, sl.Partition}}] = sl
		if !slices.Contains(consumers, sl.Consumer) {
			consumers = append(consumers, sl.Consumer) // it read nothing at all
		}
	}
	lostOne, unreadOne := map[string]bool{}, map[string]bool{}
	var acked []Send
	for _, s := range sends {
		if s.Outcome == Acked {
			acked = append(acked, s)
		}
	}
	slices.SortStableFunc(acked, func(a, b Send) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	for _, c := range consumers {
		for _, s := range acked {
			st := perConsumer[c][partKey{s.Topic, s.Partition}]
			if st != nil {
				if _, ok := st.seen[s.Value]; ok {
					continue
				}
			}
			sl, stuck := stalled[stallKey{c, partKey{s.Topic, s.Partition}}]
			stuck = stuck && s.Offset >= sl.Next
			switch {
			case stuck && s.AcksAll:
				add(Violation{Unread, s.Topic, s.Partition, fmt.Sprintf("%q acknowledged at offset %d, not read by %s, which stopped at offset %d short of the high watermark %d",
					s.Value, s.Offset, c, sl.Next, sl.HW)})
			case stuck:
				if !unreadOne[s.Value] {
					unreadOne[s.Value] = true
					r.UnreadOne++
				}
			case s.AcksAll:
				add(Violation{Lost, s.Topic, s.Partition, fmt.Sprintf("%q acknowledged at offset %d, never read by %s", s.Value, s.Offset, c)})
			case !lostOne[s.Value]:
				lostOne[s.Value] = true
				r.LostOne++
			}
		}
	}
	if len(consumers) == 0 && r.AckedAll > 0 {
		add(Violation{Lost, "", -1, fmt.Sprintf("no consumer read anything; %d acks=all records acknowledged", r.AckedAll)})
	}
	return r
}

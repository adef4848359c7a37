package metadata

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// IndexedSlice is one slice as the follower sees it: where its bytes are and
// the state of the object holding them.
type IndexedSlice struct {
	Ref       ObjectRef
	Bucket    string
	ObjectKey string
	BrokerID  int32
	State     SegmentState
	SliceEntry
}

// ObjectSnapshot is every part of one object that State holds.
type ObjectSnapshot struct {
	ID       ObjectID
	Bucket   string
	Key      string
	BrokerID int32
	// Parts: the latest snapshot of each part, by metadata partition.
	Parts []ObjectMetadata
}

// MinState is the least advanced state among the parts.
func (o *ObjectSnapshot) MinState() SegmentState {
	s := DeleteSegmentFinished
	for i := range o.Parts {
		s = min(s, o.Parts[i].State)
	}
	return s
}

// StateStats counts what State holds and what it did.
type StateStats struct {
	Parts      int   // object parts held
	Slices     int   // slices in the per-partition index (STARTED or FINISHED)
	Applied    int64 // events that changed something
	Duplicates int64 // events that changed nothing
	Refused    int64 // events refused with an error
}

// State is the metadata state machine: it applies events and answers the
// follower's and the retention manager's questions. It does no I/O and reads
// no clock; the Consumer feeds it. Safe for concurrent use.
//
// Rules, chosen so that the state rebuilt from a compacted topic equals the
// state built from the full history:
//   - An ObjectMetadata for an unknown part is accepted in any state (after
//     compaction only its latest snapshot is left, and the first event of an
//     object may be COPY_SEGMENT_FINISHED: the PUT plays COPY_SEGMENT_STARTED).
//   - An event that repeats the current state is a duplicate: nothing changes.
//   - A legal transition (CanTransition) is applied; any other is refused
//     with *IllegalTransitionError and nothing changes.
//   - A StateUpdate for an unknown part is ignored (ErrUnknownObject): it
//     carries no entries, so there is nothing to index.
//   - A Tombstone removes the part; one for an unknown part is a duplicate.
//   - A PartitionDelete for a partition follows CanTransitionPartition the
//     same way; at STARTED or FINISHED the partition's slices leave the
//     index. Entries arriving for a partition whose deletion is MARKED or
//     STARTED are not indexed; entries arriving after FINISHED re-create the
//     partition (a topic re-created under the same name). STARTED also
//     forgets the partition's dead ranges and replicated offsets.
//   - A DeadRange kills, for its partition, every entry of an older leader
//     epoch that starts at or past DeadFrom (see DeadRange): such entries
//     leave the index, and entries arriving later are never indexed. A
//     DeadRange of a known epoch with a lower StartOffset lowers it (the
//     minimum wins); one with the same or a higher one is a duplicate.
//     An entry straddling DeadFrom stays indexed: its live part is real
//     data, and the follower's epoch fencing refuses the rest.
//   - A ReplicatedOffset replaces the partition's one when its (epoch,
//     offset) is higher, and is a duplicate otherwise.
type State struct {
	mu struct {
		sync.Mutex
		parts   map[ObjectRef]*part
		byKey   map[string]map[ObjectRef]struct{}
		index   map[TopicPartition][]indexed
		deletes map[TopicPartition]PartitionDelete
		// dead: per partition, leader epoch → StartOffset of its DeadRange.
		dead map[TopicPartition]map[int32]int64
		// vouched: per partition, the highest ReplicatedOffset.
		vouched map[TopicPartition]ReplicatedOffset
		changed chan struct{}
		stats   StateStats
		// seq counts the ApplyAll calls that changed something; touched
		// lists, oldest first, the partitions each of the last of them
		// touched (every one with seq > touchedFrom), for ChangedSince.
		seq         uint64
		touched     []touch
		touchedFrom uint64
	}
}

// touch: a change numbered seq touched tp.
type touch struct {
	seq uint64
	tp  TopicPartition
}

// maxTouched bounds State's list of touched partitions; a reader further
// behind than that is told to read every partition again.
const maxTouched = 1 << 14

type part struct {
	meta ObjectMetadata
}

type indexed struct {
	p *part
	e *SliceEntry
}

// NewState returns an empty state.
func NewState() *State {
	s := &State{}
	s.mu.parts = make(map[ObjectRef]*part)
	s.mu.byKey = make(map[string]map[ObjectRef]struct{})
	s.mu.index = make(map[TopicPartition][]indexed)
	s.mu.deletes = make(map[TopicPartition]PartitionDelete)
	s.mu.dead = make(map[TopicPartition]map[int32]int64)
	s.mu.vouched = make(map[TopicPartition]ReplicatedOffset)
	s.mu.changed = make(chan struct{})
	return s
}

// Apply applies one event. It returns nil when the event was applied or was
// a duplicate, ErrUnknownObject (wrapped) for an ignored update, or
// *IllegalTransitionError; on error nothing changed.
func (s *State) Apply(ev Event) error {
	var err error
	s.ApplyAll([]Event{ev}, func(_ int, e error) { err = e })
	return err
}

// ApplyAll applies evs in order, as Apply would one by one, under one
// hold of the lock, and wakes the holders of Changed once at the end if
// any of them changed something: a consumer's poll reaches the follower
// as one change, not one per record. done, if not nil, gets each event's
// result as Apply would return it, in order; it runs under the lock, so
// it must not call back into s.
func (s *State) ApplyAll(evs []Event, done func(i int, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	any := false
	seq := s.mu.seq + 1
	for i, ev := range evs {
		mark := len(s.mu.touched)
		s.touchLocked(ev, seq) // before applying: a Tombstone forgets its entries
		changed, err := s.applyLocked(ev)
		if !changed || err != nil {
			s.mu.touched = s.mu.touched[:mark]
		}
		switch {
		case err != nil:
			s.mu.stats.Refused++
		case changed:
			s.mu.stats.Applied++
			any = true
		default:
			s.mu.stats.Duplicates++
		}
		if done != nil {
			done(i, err)
		}
	}
	if any {
		s.mu.seq = seq
		if n := len(s.mu.touched); n > maxTouched {
			drop := n - maxTouched/2
			s.mu.touchedFrom = s.mu.touched[drop-1].seq
			s.mu.touched = slices.Delete(s.mu.touched, 0, drop)
			// A change cut in two leaves its rest listed, which is
			// more than needed, never less: touchedFrom is its seq.
		}
		close(s.mu.changed)
		s.mu.changed = make(chan struct{})
	}
}

// touchLocked lists the partitions ev would touch as change seq: those of
// an object's entries (the event's and, for an update or a tombstone, the
// indexed part's), or the one a partition event names.
func (s *State) touchLocked(ev Event, seq uint64) {
	add := func(tp TopicPartition) { s.mu.touched = append(s.mu.touched, touch{seq: seq, tp: tp}) }
	entries := func(ref ObjectRef) {
		if p, ok := s.mu.parts[ref]; ok {
			for i := range p.meta.Entries {
				add(p.meta.Entries[i].TopicPartition)
			}
		}
	}
	switch e := ev.(type) {
	case *ObjectMetadata:
		for i := range e.Entries {
			add(e.Entries[i].TopicPartition)
		}
		entries(e.Ref())
	case *StateUpdate:
		entries(e.Ref())
	case *Tombstone:
		entries(e.ObjectRef)
	case *PartitionDelete:
		add(e.TopicPartition)
	case *DeadRange:
		add(e.TopicPartition)
	case *ReplicatedOffset:
		add(e.TopicPartition)
	}
}

// ChangedSince returns the partitions that changes after since touched
// (since is what an earlier call returned as seq, 0 before any), each
// once, and the seq to pass next. complete is false when the changes
// since are no longer all listed (the caller is too far behind): then
// every partition must be taken as changed. A reader takes Changed
// before calling it, as before Slices, so no change is missed.
func (s *State) ChangedSince(since uint64) (tps []TopicPartition, seq uint64, complete bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if since < s.mu.touchedFrom {
		return nil, s.mu.seq, false
	}
	i, _ := slices.BinarySearchFunc(s.mu.touched, since+1, func(t touch, seq uint64) int { return cmp.Compare(t.seq, seq) })
	seen := make(map[TopicPartition]struct{})
	for _, t := range s.mu.touched[i:] {
		if _, ok := seen[t.tp]; !ok {
			seen[t.tp] = struct{}{}
			tps = append(tps, t.tp)
		}
	}
	return tps, s.mu.seq, true
}

func (s *State) applyLocked(ev Event) (bool, error) {
	switch e := ev.(type) {
	case *ObjectMetadata:
		return s.applyObject(e)
	case *StateUpdate:
		p, ok := s.mu.parts[e.Ref()]
		if !ok {
			return false, fmt.Errorf("%w: %s to %s", ErrUnknownObject, e.Ref(), e.State)
		}
		next := p.meta
		next.State, next.EventTimestampMs, next.BrokerID = e.State, e.EventTimestampMs, e.BrokerID
		return s.transition(p, &next)
	case *Tombstone:
		p, ok := s.mu.parts[e.ObjectRef]
		if !ok {
			return false, nil
		}
		s.unindex(p)
		delete(s.mu.parts, e.ObjectRef)
		if refs := s.mu.byKey[p.meta.Key]; refs != nil {
			delete(refs, e.ObjectRef)
			if len(refs) == 0 {
				delete(s.mu.byKey, p.meta.Key)
			}
		}
		return true, nil
	case *PartitionDelete:
		return s.applyPartitionDelete(e)
	case *DeadRange:
		return s.applyDeadRange(e), nil
	case *ReplicatedOffset:
		cur, ok := s.mu.vouched[e.TopicPartition]
		if ok && (e.LeaderEpoch < cur.LeaderEpoch || (e.LeaderEpoch == cur.LeaderEpoch && e.Offset <= cur.Offset)) {
			return false, nil
		}
		s.mu.vouched[e.TopicPartition] = *e
		return true, nil
	}
	return false, malformed("unknown event %T", ev)
}

func (s *State) applyObject(m *ObjectMetadata) (bool, error) {
	ref := m.Ref()
	p, ok := s.mu.parts[ref]
	if !ok {
		p = &part{meta: cloneMeta(m)}
		s.mu.parts[ref] = p
		refs := s.mu.byKey[m.Key]
		if refs == nil {
			refs = make(map[ObjectRef]struct{})
			s.mu.byKey[m.Key] = refs
		}
		refs[ref] = struct{}{}
		if indexable(m.State) {
			s.indexPart(p)
		}
		return true, nil
	}
	next := cloneMeta(m)
	return s.transition(p, &next)
}

func (s *State) transition(p *part, next *ObjectMetadata) (bool, error) {
	from := p.meta.State
	if next.State == from {
		return false, nil
	}
	if !CanTransition(from, next.State) {
		return false, &IllegalTransitionError{Ref: p.meta.Ref(), From: from.String(), To: next.State.String()}
	}
	s.unindex(p)
	if next.Key != p.meta.Key {
		// A snapshot must not move an object; keep the key it was indexed by.
		next.Key = p.meta.Key
	}
	p.meta = *next
	if indexable(next.State) {
		s.indexPart(p)
	}
	return true, nil
}

func indexable(st SegmentState) bool {
	return st == CopySegmentStarted || st == CopySegmentFinished
}

func (s *State) applyPartitionDelete(d *PartitionDelete) (bool, error) {
	cur, ok := s.mu.deletes[d.TopicPartition]
	if ok && cur.State == d.State {
		return false, nil
	}
	if ok && !CanTransitionPartition(cur.State, d.State) {
		return false, &IllegalTransitionError{Partition: d.TopicPartition, From: cur.State.String(), To: d.State.String()}
	}
	s.mu.deletes[d.TopicPartition] = *d
	if d.State != DeletePartitionMarked {
		delete(s.mu.index, d.TopicPartition)
		delete(s.mu.dead, d.TopicPartition)
		delete(s.mu.vouched, d.TopicPartition)
	}
	return true, nil
}

func (s *State) applyDeadRange(d *DeadRange) bool {
	ranges := s.mu.dead[d.TopicPartition]
	if cur, ok := ranges[d.LeaderEpoch]; ok && cur <= d.StartOffset {
		return false
	}
	if ranges == nil {
		ranges = make(map[int32]int64)
		s.mu.dead[d.TopicPartition] = ranges
	}
	ranges[d.LeaderEpoch] = d.StartOffset
	idx := s.mu.index[d.TopicPartition]
	idx = slices.DeleteFunc(idx, func(x indexed) bool { return s.deadLocked(x.e) })
	if len(idx) == 0 {
		delete(s.mu.index, d.TopicPartition)
	} else {
		s.mu.index[d.TopicPartition] = idx
	}
	return true
}

// deadLocked reports whether every offset of e is dead.
func (s *State) deadLocked(e *SliceEntry) bool {
	from, ok := deadFrom(s.mu.dead[e.TopicPartition], e.LeaderEpoch)
	return ok && e.BaseOffset >= from
}

func cloneMeta(m *ObjectMetadata) ObjectMetadata {
	c := *m
	c.Entries = slices.Clone(m.Entries)
	return c
}

// compareIndexed orders a partition's index by base offset, then leader
// epoch, then object part, so equal inputs give equal indexes.
func compareIndexed(a, b indexed) int {
	if c := cmp.Compare(a.e.BaseOffset, b.e.BaseOffset); c != 0 {
		return c
	}
	if c := cmp.Compare(a.e.LeaderEpoch, b.e.LeaderEpoch); c != 0 {
		return c
	}
	if c := bytes.Compare(a.p.meta.ID[:], b.p.meta.ID[:]); c != 0 {
		return c
	}
	if c := cmp.Compare(a.p.meta.MetadataPartition, b.p.meta.MetadataPartition); c != 0 {
		return c
	}
	return cmp.Compare(a.e.LastOffset, b.e.LastOffset)
}

func (s *State) indexPart(p *part) {
	for i := range p.meta.Entries {
		e := &p.meta.Entries[i]
		if d, ok := s.mu.deletes[e.TopicPartition]; ok {
			if d.State != DeletePartitionFinished {
				continue
			}
			delete(s.mu.deletes, e.TopicPartition) // re-created partition
		}
		if s.deadLocked(e) {
			continue
		}
		x := indexed{p: p, e: e}
		idx := s.mu.index[e.TopicPartition]
		if n := len(idx); n == 0 || compareIndexed(idx[n-1], x) < 0 {
			s.mu.index[e.TopicPartition] = append(idx, x)
			continue
		}
		i, _ := slices.BinarySearchFunc(idx, x, compareIndexed)
		s.mu.index[e.TopicPartition] = slices.Insert(idx, i, x)
	}
}

func (s *State) unindex(p *part) {
	if !indexable(p.meta.State) {
		return
	}
	for i := range p.meta.Entries {
		e := &p.meta.Entries[i]
		idx := s.mu.index[e.TopicPartition]
		j, found := slices.BinarySearchFunc(idx, indexed{p: p, e: e}, compareIndexed)
		if !found || idx[j].p != p {
			continue
		}
		idx = slices.Delete(idx, j, j+1)
		if len(idx) == 0 {
			delete(s.mu.index, e.TopicPartition)
		} else {
			s.mu.index[e.TopicPartition] = idx
		}
	}
}

// Slices returns the slices of tp in objects in COPY_SEGMENT_FINISHED whose
// LastOffset is at least fromOffset, in offset order (then leader epoch):
// the slice holding fromOffset comes first. Slices of different leader
// epochs may overlap; fencing them is the follower's job.
func (s *State) Slices(tp TopicPartition, fromOffset int64) []IndexedSlice {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.mu.index[tp]
	i := sort.Search(len(idx), func(i int) bool { return idx[i].e.BaseOffset >= fromOffset })
	for i > 0 && idx[i-1].e.LastOffset >= fromOffset {
		i--
	}
	var out []IndexedSlice
	for _, x := range idx[i:] {
		if x.p.meta.State != CopySegmentFinished || x.e.LastOffset < fromOffset {
			continue
		}
		out = append(out, IndexedSlice{
			Ref:        x.p.meta.Ref(),
			Bucket:     x.p.meta.Bucket,
			ObjectKey:  x.p.meta.Key,
			BrokerID:   x.p.meta.BrokerID,
			State:      x.p.meta.State,
			SliceEntry: *x.e,
		})
	}
	return out
}

// Changed returns a channel that is closed at the next change of the state
// (a new slice, a state change, a removal). The pattern: take Changed,
// query, then wait on the channel taken before the query.
func (s *State) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.changed
}

// ObjectState returns the least advanced state among the live parts of the
// object stored under key, and false when no live metadata refers to it.
// The combiner's orphan collector uses it.
func (s *State) ObjectState(key string) (SegmentState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := s.mu.byKey[key]
	if len(refs) == 0 {
		return 0, false
	}
	st := DeleteSegmentFinished
	for r := range refs {
		st = min(st, s.mu.parts[r].meta.State)
	}
	return st, true
}

// DeadFrom returns the offset from which tp's entries of leaderEpoch are
// dead (see DeadRange), and false when none of them is.
func (s *State) DeadFrom(tp TopicPartition, leaderEpoch int32) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return deadFrom(s.mu.dead[tp], leaderEpoch)
}

// DeadRanges returns tp's dead ranges by leader epoch (BrokerID and
// timestamps are not kept).
func (s *State) DeadRanges(tp TopicPartition) []DeadRange {
	s.mu.Lock()
	out := make([]DeadRange, 0, len(s.mu.dead[tp]))
	for e, start := range s.mu.dead[tp] {
		out = append(out, DeadRange{TopicPartition: tp, LeaderEpoch: e, StartOffset: start})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b DeadRange) int { return cmp.Compare(a.LeaderEpoch, b.LeaderEpoch) })
	return out
}

// ReplicatedOffset returns the highest vouch of tp's leaders, if any.
func (s *State) ReplicatedOffset(tp TopicPartition) (ReplicatedOffset, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.mu.vouched[tp]
	return v, ok
}

// PartitionDeleteState returns the deletion state of tp, if any.
func (s *State) PartitionDeleteState(tp TopicPartition) (PartitionDeleteState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.mu.deletes[tp]
	return d.State, ok
}

// Objects returns a copy of every object State holds, ordered by id, each
// with its parts ordered by metadata partition.
func (s *State) Objects() []ObjectSnapshot {
	s.mu.Lock()
	byID := make(map[ObjectID]*ObjectSnapshot)
	for _, p := range s.mu.parts {
		o := byID[p.meta.ID]
		if o == nil {
			o = &ObjectSnapshot{ID: p.meta.ID, Bucket: p.meta.Bucket, Key: p.meta.Key, BrokerID: p.meta.BrokerID}
			byID[p.meta.ID] = o
		}
		o.Parts = append(o.Parts, cloneMeta(&p.meta))
	}
	s.mu.Unlock()
	out := make([]ObjectSnapshot, 0, len(byID))
	for _, o := range byID {
		slices.SortFunc(o.Parts, func(a, b ObjectMetadata) int {
			return cmp.Compare(a.MetadataPartition, b.MetadataPartition)
		})
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b ObjectSnapshot) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

// PartitionDeletes returns every partition deletion, ordered by partition.
func (s *State) PartitionDeletes() []PartitionDelete {
	s.mu.Lock()
	out := make([]PartitionDelete, 0, len(s.mu.deletes))
	for _, d := range s.mu.deletes {
		out = append(out, d)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b PartitionDelete) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	return out
}

// Partitions returns the user partitions that have indexed slices.
func (s *State) Partitions() []TopicPartition {
	s.mu.Lock()
	out := make([]TopicPartition, 0, len(s.mu.index))
	for tp := range s.mu.index {
		out = append(out, tp)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b TopicPartition) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	return out
}

// Stats returns counts of what State holds and did.
func (s *State) Stats() StateStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.stats
	st.Parts = len(s.mu.parts)
	for _, idx := range s.mu.index {
		st.Slices += len(idx)
	}
	return st
}

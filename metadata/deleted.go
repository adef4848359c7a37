package metadata

import (
	"bytes"
	"context"
	"slices"
)

// Objects of deleted partitions.
//
// A PartitionDelete at STARTED takes the partition's slices out of the
// index; the objects stay in the state (their parts are still
// COPY_SEGMENT_FINISHED) until someone deletes them. An object none of
// whose entries is indexed any more serves no reader: every partition it
// held was deleted (a partition created again under the same name indexes
// only its own new objects, so the old ones stay unindexed). DeadObjects
// finds them; the rule reads only the state, so a consumer that rebuilt
// the state from the topic finds the same ones.

// DeadObjects returns the objects whose every part is COPY_SEGMENT_FINISHED
// and none of whose entries is in the index (every partition they hold was
// deleted), ordered by id.
func (s *State) DeadObjects() []ObjectSnapshot {
	var out []ObjectSnapshot
	for _, o := range s.Objects() {
		if s.isDead(&o) {
			out = append(out, o)
		}
	}
	return out
}

func (s *State) isDead(o *ObjectSnapshot) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range o.Parts {
		p := &o.Parts[i]
		if p.State != CopySegmentFinished {
			return false
		}
		ref := p.Ref()
		for _, e := range p.Entries {
			if slices.ContainsFunc(s.mu.index[e.TopicPartition], func(x indexed) bool {
				return x.p.meta.MetadataPartition == ref.MetadataPartition && bytes.Equal(x.p.meta.ID[:], ref.ID[:])
			}) {
				return false
			}
		}
	}
	return len(o.Parts) > 0
}

// DeleteObject deletes o now, through the same steps as a due object
// (DELETE_SEGMENT_STARTED, the store delete, DELETE_SEGMENT_FINISHED,
// tombstones); for objects the caller decided are dead (DeadObjects).
func (r *Retainer) DeleteObject(ctx context.Context, o ObjectSnapshot) error {
	r.mu.Lock()
	skip := r.mu.done[o.ID]
	r.mu.Unlock()
	if skip {
		return nil
	}
	if err := r.deleteObject(ctx, &o); err != nil {
		return err
	}
	r.mu.Lock()
	r.mu.done[o.ID] = true
	r.mu.Unlock()
	r.logger.Info("remote WAL object of deleted partitions deleted", "object", o.ID, "key", o.Key, "parts", len(o.Parts))
	return nil
}

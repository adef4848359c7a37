package rwnode

import (
	"context"
	"math"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/metadata"
)

// Deleting a remotewal partition (its topic was deleted).
//
// The broker that led the partition, once its controller applied the
// deletion:
//  1. lets the write path publish what it already handed to the combiner
//     (bounded by deleteDrainTimeout), so no slice of the old partition is
//     published after its deletion (a late one would be indexed as data of
//     a topic created again under the name);
//  2. stops its task and follower, publishes PartitionDelete STARTED (every
//     follower's index drops the partition's slices) then FINISHED (the name
//     may be used again: new slices index afresh), and waits until its own
//     consumer applied them;
//  3. deletes the objects that now serve no partition
//     (metadata.State.DeadObjects) whose deleter it is (the retention's
//     rule; a deletion clears the partition's vouches, so the uploader).
//
// Every broker's maintenance loop also deletes the dead objects it is the
// deleter of, so objects a previous leader uploaded are collected by it, and
// a deletion interrupted by a crash is finished after the restart (the
// rule reads only the metadata). Objects that also hold live partitions'
// slices wait for ordinary retention, which treats a deleted partition's
// entries as past (safeOffset).

var _ broker.PartitionDeleter = (*RemoteWALReplicator)(nil)

const (
	deleteDrainTimeout   = 10 * time.Second
	deletePublishTimeout = 30 * time.Second
)

// DeletePartition implements broker.PartitionDeleter.
func (r *RemoteWALReplicator) DeletePartition(tp broker.TopicPartition, wasLeader bool) {
	m := mtp(tp)
	if wasLeader {
		r.drainLeader(m)
	}
	r.StopLeader(tp)
	r.StopFollower(tp)
	if !wasLeader {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deletePublishTimeout)
	defer cancel()
	now := r.cfg.Clock.Now().UnixMilli()
	for _, st := range []metadata.PartitionDeleteState{metadata.DeletePartitionStarted, metadata.DeletePartitionFinished} {
		ev := &metadata.PartitionDelete{TopicPartition: m, State: st, EventTimestampMs: now, BrokerID: r.cfg.BrokerID}
		if err := r.pub.Publish(ctx, ev); err != nil {
			r.log.Error("publishing a partition deletion; its objects wait for retention", "partition", tp, "state", st, "err", err)
			return
		}
	}
	if !r.waitState(ctx, func() bool {
		st, ok := r.state.PartitionDeleteState(m)
		return ok && st == metadata.DeletePartitionFinished
	}) {
		r.log.Warn("own metadata consumer has not applied the partition deletion yet; objects are collected by maintenance", "partition", tp)
		return
	}
	n, err := r.collectDead(ctx)
	if err != nil {
		r.log.Warn("deleting objects of a deleted partition; maintenance retries", "partition", tp, "err", err)
	}
	r.log.Info("remote WAL partition deleted", "partition", tp, "objects_deleted", n)
}

// drainLeader waits until every slice handed to the combiner for tp has
// its metadata published, or deleteDrainTimeout (on the clock) passes.
func (r *RemoteWALReplicator) drainLeader(tp metadata.TopicPartition) {
	deadline := r.cfg.Clock.Now().Add(deleteDrainTimeout)
	for {
		sub, err1 := r.wp.Manager.SubmittedOffset(tp)
		pub, err2 := r.wp.Manager.PublishedOffset(tp)
		if err1 != nil || err2 != nil || pub >= sub {
			return
		}
		if r.cfg.Clock.Now().After(deadline) {
			r.log.Warn("deleting a partition whose slices are still uploading", "partition", tp, "submitted", sub, "published", pub)
			return
		}
		t := r.cfg.Clock.NewTimer(5 * time.Millisecond)
		<-t.C()
	}
}

// waitState waits, on State.Changed, until cond holds or ctx ends.
func (r *RemoteWALReplicator) waitState(ctx context.Context, cond func() bool) bool {
	for {
		ch := r.state.Changed()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// collectDead deletes the dead objects this broker is the deleter of
// (the retention's rule, deletes: with the partitions' vouches gone with
// their deletion, the uploader).
func (r *RemoteWALReplicator) collectDead(ctx context.Context) (int, error) {
	n := 0
	for _, o := range r.state.DeadObjects() {
		if !r.deletes(&o) {
			continue
		}
		if err := r.retainer.DeleteObject(ctx, o); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// deletedOffset is the safe offset of a deleted partition: all of it.
func (r *RemoteWALReplicator) deletedOffset(tp metadata.TopicPartition) (int64, bool) {
	if st, ok := r.state.PartitionDeleteState(tp); ok && st != metadata.DeletePartitionMarked {
		return math.MaxInt64, true
	}
	return 0, false
}

package rwnode

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
)

// This file is the remote WAL's side of a leader change (the KIP's
// reconciliation) and of retention after leadership moved:
//
//   - A broker that becomes leader of a remotewal partition at epoch E
//     publishes a metadata.DeadRange (E, S), S the start of E in its log
//     (its log end when elected): every entry an older leader uploaded at
//     or past S is dead, including those a deposed leader still running
//     uploads later. Followers' indexes drop them; their epoch fencing
//     already refuses them, and they truncate by leader epoch (KIP-101).
//   - Every leader vouches for its partitions' high watermarks with
//     metadata.ReplicatedOffset events, so whichever broker deletes an
//     object can tell that no in-sync replica needs it.
//   - The broker that deletes an object is the latest leader of the
//     object's least user partition, as the metadata knows it: the broker
//     of that partition's newest ReplicatedOffset (deletes), whoever
//     uploaded it. Every leader vouches at least once per leader epoch, so
//     the deleter follows leadership within a maintenance interval; the
//     deletion steps are idempotent, so two brokers acting across a
//     leadership change only repeat each other.

// reconciler owns the background publications of a RemoteWALReplicator.
type reconciler struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Counters for the node's metrics.
	deadRanges, deadRangeRetries, vouches atomic.Int64

	mu struct {
		sync.Mutex
		// vouched: the last ReplicatedOffset published per partition.
		vouched map[metadata.TopicPartition]metadata.ReplicatedOffset
	}
}

// leaderView is a snapshot of a partition this broker leads.
type leaderView struct {
	tp    metadata.TopicPartition
	epoch int32
	hw    int64
}

func newReconciler() *reconciler {
	rc := &reconciler{}
	rc.ctx, rc.cancel = context.WithCancel(context.Background())
	rc.mu.vouched = map[metadata.TopicPartition]metadata.ReplicatedOffset{}
	return rc
}

// close stops the publications in flight and waits for them.
func (rc *reconciler) close() {
	rc.cancel()
	rc.wg.Wait()
}

// epochStartOffset is where leaderEpoch starts in log: its entry in the
// leader-epoch cache, else (nothing appended in it yet) the log end.
func epochStartOffset(log *kafkalog.Log, leaderEpoch int32, logEnd int64) int64 {
	for _, e := range log.EpochEntries() {
		if e.Epoch == leaderEpoch {
			return min(e.StartOffset, logEnd)
		}
	}
	return logEnd
}

// publishDeadRange publishes, in the background, the DeadRange of this
// broker's leadership of tp at leaderEpoch. It retries until published,
// the replicator closes, or this broker no longer leads tp at that epoch.
// Epoch 0 has no older epoch to kill.
func (r *RemoteWALReplicator) publishDeadRange(tp broker.TopicPartition, log *kafkalog.Log, leaderEpoch int32, logEnd int64) {
	if leaderEpoch <= 0 {
		return
	}
	ev := &metadata.DeadRange{
		TopicPartition: mtp(tp), LeaderEpoch: leaderEpoch,
		StartOffset: epochStartOffset(log, leaderEpoch, logEnd),
		BrokerID:    r.cfg.BrokerID, EventTimestampMs: r.cfg.Clock.Now().UnixMilli(),
	}
	rc := r.recon
	rc.wg.Add(1)
	go func() {
		defer rc.wg.Done()
		backoff := 100 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(rc.ctx, 10*time.Second)
			err := r.pub.Publish(ctx, ev)
			cancel()
			if err == nil {
				rc.deadRanges.Add(1)
				r.changes.Signal()
				r.log.Info("published dead range: entries of older leader epochs past the new leader's log end are dead",
					"partition", tp, "leader_epoch", leaderEpoch, "start_offset", ev.StartOffset)
				return
			}
			if rc.ctx.Err() != nil || !r.leads(mtp(tp), leaderEpoch) {
				return
			}
			rc.deadRangeRetries.Add(1)
			r.log.Warn("publish dead range failed; will retry", "partition", tp, "leader_epoch", leaderEpoch, "err", err)
			t := r.cfg.Clock.NewTimer(backoff)
			select {
			case <-rc.ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
}

// leads reports whether this broker leads tp at leaderEpoch.
func (r *RemoteWALReplicator) leads(tp metadata.TopicPartition, leaderEpoch int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.mu.leads[tp]
	return ok && l.epoch == leaderEpoch
}

// leading returns the partitions this broker leads, with their high
// watermarks.
func (r *RemoteWALReplicator) leading() []leaderView {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]leaderView, 0, len(r.mu.leads))
	for tp, l := range r.mu.leads {
		out = append(out, leaderView{tp: tp, epoch: l.epoch, hw: l.log.HighWatermark()})
	}
	return out
}

// vouch publishes a ReplicatedOffset for every partition this broker leads
// whose high watermark moved (or whose epoch is new) since the last one
// published.
func (r *RemoteWALReplicator) vouch(ctx context.Context) error {
	var evs []metadata.Event
	rc := r.recon
	rc.mu.Lock()
	for _, l := range r.leading() {
		last, ok := rc.mu.vouched[l.tp]
		if ok && last.LeaderEpoch == l.epoch && last.Offset >= l.hw {
			continue
		}
		evs = append(evs, &metadata.ReplicatedOffset{TopicPartition: l.tp, LeaderEpoch: l.epoch, Offset: l.hw,
			BrokerID: r.cfg.BrokerID, EventTimestampMs: r.cfg.Clock.Now().UnixMilli()})
	}
	rc.mu.Unlock()
	if len(evs) == 0 {
		return nil
	}
	if err := r.pub.Publish(ctx, evs...); err != nil {
		return err
	}
	rc.vouches.Add(int64(len(evs)))
	rc.mu.Lock()
	for _, ev := range evs {
		v := ev.(*metadata.ReplicatedOffset)
		rc.mu.vouched[v.TopicPartition] = *v
	}
	rc.mu.Unlock()
	return nil
}

// replicatedOffset is the retention's safe offset of tp: the highest
// offset any of its leaders vouched for, or this broker's own high
// watermark where it leads tp, whichever is higher.
func (r *RemoteWALReplicator) replicatedOffset(tp metadata.TopicPartition) (int64, bool) {
	safe, ok := r.safeOffset(tp)
	if v, vok := r.state.ReplicatedOffset(tp); vok && (!ok || v.Offset > safe) {
		safe, ok = v.Offset, true
	}
	return safe, ok
}

// deletes is the deleter rule: this broker deletes o when it published
// the newest vouch (ReplicatedOffset) of o's least user partition (by
// topic, then partition) among those with a vouch, that is when it is
// that partition's latest leader as the metadata says; an object none of
// whose partitions has a vouch is deleted by its uploader.
func (r *RemoteWALReplicator) deletes(o *metadata.ObjectSnapshot) bool {
	var (
		least metadata.TopicPartition
		owner int32
		found bool
	)
	for i := range o.Parts {
		for _, e := range o.Parts[i].Entries {
			tp := e.TopicPartition
			if found && cmp.Or(cmp.Compare(tp.Topic, least.Topic), cmp.Compare(tp.Partition, least.Partition)) >= 0 {
				continue
			}
			v, ok := r.state.ReplicatedOffset(tp)
			if !ok {
				continue
			}
			least, owner, found = tp, v.BrokerID, true
		}
	}
	if !found {
		return o.BrokerID == r.cfg.BrokerID
	}
	return owner == r.cfg.BrokerID
}

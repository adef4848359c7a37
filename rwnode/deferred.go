package rwnode

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/kafkalog"
	"github.com/prometheus/client_golang/prometheus"
)

// DeferredReplicator is a broker.Replicator whose RemoteWALReplicator is
// built in the background, again and again until it is ready. A broker
// needs it when its cluster hosts __remote_wal_log_metadata itself
// (remote.wal.metadata.bootstrap.servers naming the cluster's own
// brokers): the brokers that serve the metadata topic, this one included,
// are not listening yet when the broker starts, so building the
// replicator first, as a separate metadata Kafka allows, would wait for
// itself.
//
// Until the replicator is ready it remembers the leaders and follows the
// broker starts (and forgets the ones it stops), and replays the current
// ones into the replicator once it is; a leader's slices are cut from the
// offset it started at, so nothing written meanwhile is skipped. Followers
// of remotewal partitions rebuild nothing and leaders upload nothing in
// the meantime (acks=all produces to remotewal topics wait), and
// UploadedOffset reports nothing, so local retention deletes nothing a
// follower may still need. Partition deletions are replayed too. Safe for
// concurrent use.
type DeferredReplicator struct {
	log     *slog.Logger
	ready   atomic.Pointer[RemoteWALReplicator]
	readyCh chan struct{}
	stop    chan struct{}
	stopped sync.Once
	done    chan struct{}
	mu      struct {
		sync.Mutex
		leads   map[broker.TopicPartition]deferredLead
		follows map[broker.TopicPartition]broker.FollowerReplica
		deletes []deferredDelete
		closed  bool
	}
}

type deferredLead struct {
	log   *kafkalog.Log
	epoch int32
	from  int64
}

type deferredDelete struct {
	tp        broker.TopicPartition
	wasLeader bool
}

var (
	_ broker.Replicator             = (*DeferredReplicator)(nil)
	_ broker.LeaderLogEndObserver   = (*DeferredReplicator)(nil)
	_ broker.UploadedOffsetReporter = (*DeferredReplicator)(nil)
	_ broker.PartitionDeleter       = (*DeferredReplicator)(nil)
	_ prometheus.Collector          = (*DeferredReplicator)(nil)
)

// NewDeferredReplicator starts building the replicator with build,
// waiting retry (on clk) after each failure, until it succeeds or Close is
// called.
func NewDeferredReplicator(build func() (*RemoteWALReplicator, error), retry time.Duration, clk clock.Clock, logger *slog.Logger) *DeferredReplicator {
	d := &DeferredReplicator{log: logger, readyCh: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	d.mu.leads = map[broker.TopicPartition]deferredLead{}
	d.mu.follows = map[broker.TopicPartition]broker.FollowerReplica{}
	go d.run(build, retry, clk)
	return d
}

func (d *DeferredReplicator) run(build func() (*RemoteWALReplicator, error), retry time.Duration, clk clock.Clock) {
	defer close(d.done)
	for attempt := 1; ; attempt++ {
		r, err := build()
		if err == nil {
			if d.install(r) {
				return
			}
			// Closed while building: the replicator is not ours to keep.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = r.Close(ctx)
			cancel()
			return
		}
		d.log.Warn("remote WAL not ready yet (its metadata topic is hosted by this cluster); retrying", "attempt", attempt, "retry", retry, "err", err)
		t := clk.NewTimer(retry)
		select {
		case <-d.stop:
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// install replays what the broker started into r and makes r the
// delegate; false if Close came first.
func (d *DeferredReplicator) install(r *RemoteWALReplicator) bool {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return false
	}
	for tp, l := range d.mu.leads {
		if err := r.StartLeader(tp, l.log, l.epoch, l.from); err != nil {
			d.log.Error("remote WAL ready: starting a leader it was asked to start before", "partition", tp, "err", err)
		}
	}
	for tp, h := range d.mu.follows {
		if err := r.StartFollower(h); err != nil {
			d.log.Warn("remote WAL ready: starting a follower it was asked to start before", "partition", tp, "err", err)
		}
	}
	deletes := d.mu.deletes
	d.mu.leads, d.mu.follows, d.mu.deletes = nil, nil, nil
	d.ready.Store(r)
	close(d.readyCh)
	d.mu.Unlock()
	d.log.Info("remote WAL ready (metadata topic hosted by this cluster)")
	for _, del := range deletes {
		r.DeletePartition(del.tp, del.wasLeader)
	}
	return true
}

// Ready is closed once the replicator is ready.
func (d *DeferredReplicator) Ready() <-chan struct{} { return d.readyCh }

// Replicator is the replicator once ready, else nil.
func (d *DeferredReplicator) Replicator() *RemoteWALReplicator { return d.ready.Load() }

// pending runs record under the lock if the replicator is not ready and
// returns nil; else it returns the replicator for the caller to use.
func (d *DeferredReplicator) pending(record func()) *RemoteWALReplicator {
	if r := d.ready.Load(); r != nil {
		return r
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.ready.Load(); r != nil {
		return r
	}
	if !d.mu.closed {
		record()
	}
	return nil
}

// StartLeader implements broker.Replicator.
func (d *DeferredReplicator) StartLeader(tp broker.TopicPartition, log *kafkalog.Log, leaderEpoch int32, fromOffset int64) error {
	if r := d.pending(func() { d.mu.leads[tp] = deferredLead{log: log, epoch: leaderEpoch, from: fromOffset} }); r != nil {
		return r.StartLeader(tp, log, leaderEpoch, fromOffset)
	}
	return nil
}

// StopLeader implements broker.Replicator.
func (d *DeferredReplicator) StopLeader(tp broker.TopicPartition) {
	if r := d.pending(func() { delete(d.mu.leads, tp) }); r != nil {
		r.StopLeader(tp)
	}
}

// StartFollower implements broker.Replicator.
func (d *DeferredReplicator) StartFollower(h broker.FollowerReplica) error {
	if r := d.pending(func() { d.mu.follows[h.TopicPartition()] = h }); r != nil {
		return r.StartFollower(h)
	}
	return nil
}

// StopFollower implements broker.Replicator.
func (d *DeferredReplicator) StopFollower(tp broker.TopicPartition) {
	if r := d.pending(func() { delete(d.mu.follows, tp) }); r != nil {
		r.StopFollower(tp)
	}
}

// ObserveLeaderLogEnd implements broker.LeaderLogEndObserver (nothing
// follows before the replicator is ready).
func (d *DeferredReplicator) ObserveLeaderLogEnd(tp broker.TopicPartition, leo int64) {
	if r := d.ready.Load(); r != nil {
		r.ObserveLeaderLogEnd(tp, leo)
	}
}

// UploadedOffset implements broker.UploadedOffsetReporter: nothing is
// uploaded before the replicator is ready.
func (d *DeferredReplicator) UploadedOffset(tp broker.TopicPartition) (int64, bool) {
	if r := d.ready.Load(); r != nil {
		return r.UploadedOffset(tp)
	}
	return 0, false
}

// DeletePartition implements broker.PartitionDeleter; before the
// replicator is ready the deletion is replayed once it is.
func (d *DeferredReplicator) DeletePartition(tp broker.TopicPartition, wasLeader bool) {
	r := d.pending(func() {
		delete(d.mu.leads, tp)
		delete(d.mu.follows, tp)
		d.mu.deletes = append(d.mu.deletes, deferredDelete{tp, wasLeader})
	})
	if r != nil {
		r.DeletePartition(tp, wasLeader)
	}
}

// Describe implements prometheus.Collector: unchecked (no descriptors),
// since the replicator's metrics exist only once it is ready.
func (d *DeferredReplicator) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (d *DeferredReplicator) Collect(ch chan<- prometheus.Metric) {
	if r := d.ready.Load(); r != nil {
		r.Collect(ch)
	}
}

// Close stops building, or closes the replicator it built.
func (d *DeferredReplicator) Close(ctx context.Context) error {
	d.mu.Lock()
	d.mu.closed = true
	d.mu.Unlock()
	d.stopped.Do(func() { close(d.stop) })
	select {
	case <-d.done:
	case <-ctx.Done():
		return errors.Join(errors.New("rwnode: deferred replicator still building at close"), ctx.Err())
	}
	if r := d.ready.Load(); r != nil {
		return r.Close(ctx)
	}
	return nil
}

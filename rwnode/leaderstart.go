package rwnode

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/remotewal"
)

// This file is where a new leader's slice task starts (the leader-change
// upload gap). A range the deposed leader appended but never uploaded is
// in the new leader's log (it replicated it, from the store or through the
// leader fallback) but not in the store; starting the task at the log end
// would leave it there for good, and followers would read it from the
// leader across racks. So the task starts where the partition's published
// entries end (remotewal.UploadStart), and uploads the range in its own
// epoch.
//
// The decision needs the metadata as published, not as this broker has
// read it so far: a lagging state would make the task upload again what
// the old leader (or an earlier life of this leadership) published, and an
// earlier life's entries of this epoch would then be followed by older
// offsets of the same epoch (invariant 4). So a start waits until the
// metadata consumer has caught up with the topic's end offsets, listed
// after the start was asked for; starts asked for meanwhile share one
// catch-up. Until then no task runs: nothing is cut, UploadedOffset is
// unknown (local retention deletes nothing), and followers read from the
// leader, as they do while nothing of the new epoch is published.

// pendingStart is a leadership whose task waits for the metadata.
type pendingStart struct {
	log    *kafkalog.Log
	epoch  int32
	logEnd int64
}

// starter owns the pending starts and the goroutine that catches up.
type starter struct {
	wake chan struct{} // cap 1
	done chan struct{}
	// mu orders starts and stops of tasks: StartLeader, StopLeader and
	// the starter take it around the manager's calls.
	mu      sync.Mutex
	pending map[metadata.TopicPartition]pendingStart
}

func newStarter() *starter {
	return &starter{wake: make(chan struct{}, 1), done: make(chan struct{}), pending: map[metadata.TopicPartition]pendingStart{}}
}

// askStart records a start and wakes the starter. Caller holds s.mu.
func (s *starter) askStart(tp metadata.TopicPartition, p pendingStart) {
	s.pending[tp] = p
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// runStarter catches up the metadata for the pending starts and starts
// their tasks, until ctx ends.
func (r *RemoteWALReplicator) runStarter(ctx context.Context) {
	s := r.starts
	defer close(s.done)
	backoff := 100 * time.Millisecond
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		s.mu.Lock()
		asked := make(map[metadata.TopicPartition]pendingStart, len(s.pending))
		for tp, p := range s.pending {
			asked[tp] = p
		}
		s.mu.Unlock()
		if len(asked) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, r.cfg.LeaderStartTimeout)
		err := r.cons.CatchUp(cctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			if failures == 1 || failures%10 == 0 {
				r.log.Warn("remote WAL leader start waits for the metadata to catch up; will retry",
					"partitions", len(asked), "attempts", failures, "err", err)
			}
			t := r.cfg.Clock.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			backoff = min(2*backoff, 5*time.Second)
			select {
			case s.wake <- struct{}{}:
			default:
			}
			continue
		}
		if failures > 0 {
			r.log.Info("remote WAL metadata caught up; starting leaders' slice tasks", "failed_attempts", failures)
		}
		failures, backoff = 0, 100*time.Millisecond
		for tp, p := range asked {
			r.startTask(tp, p)
		}
	}
}

// startTask starts tp's task if the start p is still the one asked for.
func (r *RemoteWALReplicator) startTask(tp metadata.TopicPartition, p pendingStart) {
	s := r.starts
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.pending[tp]; !ok || cur != p {
		return // stopped, or a later start replaced it
	}
	delete(s.pending, tp)
	from, why := r.uploadStart(tp, p)
	if from < p.logEnd {
		r.log.Info("new leader uploads the range below its log end missing from the store, in its own epoch",
			"partition", tp, "leader_epoch", p.epoch, "from", from, "log_end", p.logEnd, "why", why)
	}
	if err := r.wp.Manager.StartPartition(tp, p.log, p.epoch, from); err != nil {
		r.log.Error("remote WAL leader start", "partition", tp, "leader_epoch", p.epoch, "err", err)
	}
}

// uploadStart is remotewal.UploadStart over this broker's caught-up
// metadata and tp's log, moved down to the start of the batch holding it
// (an entry's end is a batch boundary of its uploader's log, and the
// leader's log holds the same batches there; a slice must start at one).
func (r *RemoteWALReplicator) uploadStart(tp metadata.TopicPartition, p pendingStart) (int64, string) {
	ls := remotewal.LeaderStart{
		Epoch: p.epoch, LogStart: p.log.LogStartOffset(), LogEnd: p.logEnd,
		EndOfEpoch: p.log.EndOffsetForEpoch,
		DeadFrom:   func(e int32) (int64, bool) { return r.state.DeadFrom(tp, e) },
	}
	if v, ok := r.state.ReplicatedOffset(tp); ok {
		ls.Vouched, ls.HasVouch = v.Offset, true
	}
	from, why := remotewal.UploadStart(r.state.Slices(tp, 0), ls)
	if from >= p.logEnd {
		return p.logEnd, why
	}
	b, err := p.log.Read(from, 1)
	if err != nil || len(b) < 8 {
		r.log.Warn("new leader cannot read its log where the store's entries end; uploads start at the log end",
			"partition", tp, "from", from, "err", err)
		return p.logEnd, why
	}
	base := int64(binary.BigEndian.Uint64(b)) // a batch starts with its base offset
	return min(max(base, ls.LogStart), from), why
}

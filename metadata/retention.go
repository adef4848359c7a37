package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
)

// RetentionPolicy decides when a combined object may be deleted.
type RetentionPolicy struct {
	// Retention (remote.wal.retention.ms): the least time between an
	// object's COPY_SEGMENT_FINISHED and its deletion. Default 10 minutes:
	// followers normally read an object within milliseconds; the margin
	// covers a follower restarting and catching up from the store.
	Retention time.Duration
	// AbandonedCopy: an object stuck in COPY_SEGMENT_STARTED this long is
	// deleted (STARTED -> DELETE_SEGMENT_STARTED). Default: Retention.
	AbandonedCopy time.Duration
	// BrokerID: only objects uploaded by this broker are considered; -1
	// considers every object. Ignored when Deletes is set.
	BrokerID int32
	// Deletes, when set, says whether this broker is the one that deletes
	// o (it replaces the BrokerID filter). The broker's rule: the current
	// leader of the object's least user partition deletes it, whoever
	// uploaded it, so an object is deleted once while its uploader is gone
	// or no longer leads.
	Deletes func(o *ObjectSnapshot) bool
}

// Validate fills defaults and rejects nonsense.
func (p *RetentionPolicy) Validate() error {
	if p.Retention == 0 {
		p.Retention = 10 * time.Minute
	}
	if p.AbandonedCopy == 0 {
		p.AbandonedCopy = p.Retention
	}
	if p.Retention < 0 || p.AbandonedCopy < 0 {
		return fmt.Errorf("metadata: invalid retention policy: retention %v, abandoned copy %v", p.Retention, p.AbandonedCopy)
	}
	return nil
}

// SafeOffsetFunc returns, for a user partition, the offset below which every
// in-sync replica has the data: the minimum log end offset over the ISR. An
// entry is past when LastOffset < safe. false means unknown, which keeps
// the object. A partition that no longer needs its WAL data (deleted, or
// already in tiered storage) may return math.MaxInt64.
type SafeOffsetFunc func(TopicPartition) (int64, bool)

// DeadFromFunc returns where a partition's entries of a leader epoch are
// dead (State.DeadFrom; see DeadRange). nil means nothing is dead.
type DeadFromFunc func(tp TopicPartition, leaderEpoch int32) (int64, bool)

// RetentionAction is one object to delete, with why.
type RetentionAction struct {
	Object ObjectSnapshot
	// Resume: a deletion already started (a part is at DELETE_SEGMENT_STARTED
	// or later) and is carried on without checking age or offsets again.
	Resume bool
	// Dead: every entry is dead (see DeadRange); deleted without waiting.
	Dead bool
}

// DecideRetention is the pure retention decision: which of the objects this
// broker deletes (pol.Deletes, else pol.BrokerID) to delete now. An object
// is deleted when either
//   - a part has reached DELETE_SEGMENT_STARTED or later (resume), or
//   - every part is COPY_SEGMENT_FINISHED and every entry is dead (a
//     DeadRange killed it: no replica and no reader needs it), at once; or
//   - every part is COPY_SEGMENT_FINISHED, Retention has passed since the
//     latest of their event times, and every in-sync replica is past the
//     live part of every entry (the part below where its epoch is dead); or
//   - every part is still COPY_SEGMENT_STARTED (or FINISHED) and the newest
//     part's event is older than AbandonedCopy, with the same offset rule
//     for the finished parts' entries.
func DecideRetention(now time.Time, pol RetentionPolicy, objects []ObjectSnapshot, safe SafeOffsetFunc, dead DeadFromFunc) []RetentionAction {
	var out []RetentionAction
	nowMs := now.UnixMilli()
	for _, o := range objects {
		if pol.Deletes != nil {
			if !pol.Deletes(&o) {
				continue
			}
		} else if pol.BrokerID >= 0 && o.BrokerID != pol.BrokerID {
			continue
		}
		deleting, started := false, false
		var newest int64
		for i := range o.Parts {
			p := &o.Parts[i]
			switch p.State {
			case DeleteSegmentStarted, DeleteSegmentFinished:
				deleting = true
			case CopySegmentStarted:
				started = true
			}
			newest = max(newest, p.EventTimestampMs)
		}
		if deleting {
			out = append(out, RetentionAction{Object: o, Resume: true})
			continue
		}
		if !started && allDead(&o, dead) {
			out = append(out, RetentionAction{Object: o, Dead: true})
			continue
		}
		wait := pol.Retention
		if started {
			wait = pol.AbandonedCopy
		}
		if nowMs-newest < wait.Milliseconds() || !allPast(&o, safe, dead) {
			continue
		}
		out = append(out, RetentionAction{Object: o})
	}
	return out
}

// liveEnd is the last live offset of e under dead, false when e is dead.
func liveEnd(e *SliceEntry, dead DeadFromFunc) (int64, bool) {
	if dead == nil {
		return e.LastOffset, true
	}
	from, ok := dead(e.TopicPartition, e.LeaderEpoch)
	return LiveEnd(e, from, ok)
}

func allDead(o *ObjectSnapshot, dead DeadFromFunc) bool {
	n := 0
	for i := range o.Parts {
		for j := range o.Parts[i].Entries {
			if _, live := liveEnd(&o.Parts[i].Entries[j], dead); live {
				return false
			}
			n++
		}
	}
	return n > 0
}

func allPast(o *ObjectSnapshot, safe SafeOffsetFunc, dead DeadFromFunc) bool {
	for i := range o.Parts {
		if o.Parts[i].State != CopySegmentFinished {
			continue // an abandoned copy's entries were never readable
		}
		for j := range o.Parts[i].Entries {
			e := &o.Parts[i].Entries[j]
			last, live := liveEnd(e, dead)
			if !live {
				continue
			}
			s, ok := safe(e.TopicPartition)
			if !ok || last >= s {
				return false
			}
		}
	}
	return true
}

// StoreForBucket resolves an object's Bucket (the id of the store it was
// uploaded to, one per rack when each AZ has its own) to that store.
type StoreForBucket func(bucket string) (objstore.Store, error)

// OneStore is the StoreForBucket of a single store holding every object.
func OneStore(s objstore.Store) StoreForBucket {
	return func(string) (objstore.Store, error) { return s, nil }
}

// EventPublisher is what the retention driver publishes through; *Publisher
// is one.
type EventPublisher interface {
	Publish(ctx context.Context, evs ...Event) error
}

var _ EventPublisher = (*Publisher)(nil)

// Retainer is the retention driver: it asks DecideRetention, then for each
// object publishes DELETE_SEGMENT_STARTED, deletes the object from the
// store, publishes DELETE_SEGMENT_FINISHED and finally tombstones. Every
// step is idempotent, so a crash at any point is resumed by the next run
// (from the state the topic holds). Safe for concurrent use, though one
// RunOnce at a time is the intent.
type Retainer struct {
	pol    RetentionPolicy
	state  *State
	pub    EventPublisher
	stores StoreForBucket
	safe   SafeOffsetFunc
	clk    clock.Clock
	logger *slog.Logger

	mu struct {
		sync.Mutex
		// done: objects fully deleted and tombstoned by this process that
		// the (lagging) State may still show; skipped until State drops them.
		done map[ObjectID]bool
	}
}

// NewRetainer returns a retention driver; stores says where each object
// is (OneStore for a single store).
func NewRetainer(pol RetentionPolicy, state *State, pub EventPublisher, stores StoreForBucket, safe SafeOffsetFunc, clk clock.Clock, logger *slog.Logger) (*Retainer, error) {
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	r := &Retainer{pol: pol, state: state, pub: pub, stores: stores, safe: safe, clk: clk, logger: logger}
	r.mu.done = make(map[ObjectID]bool)
	return r, nil
}

// RunOnce deletes every object due now and returns how many it deleted.
// An object that fails (its store unreachable, say after an AZ outage) is
// logged and left for the next run; the others go on. The error joins the
// failures.
func (r *Retainer) RunOnce(ctx context.Context) (int, error) {
	objects := r.state.Objects()
	r.mu.Lock()
	live := make(map[ObjectID]bool, len(objects))
	for _, o := range objects {
		live[o.ID] = true
	}
	for id := range r.mu.done {
		if !live[id] {
			delete(r.mu.done, id)
		}
	}
	r.mu.Unlock()

	n := 0
	var errs []error
	for _, a := range DecideRetention(r.clk.Now(), r.pol, objects, r.safe, r.state.DeadFrom) {
		r.mu.Lock()
		skip := r.mu.done[a.Object.ID]
		r.mu.Unlock()
		if skip {
			continue
		}
		if err := r.deleteObject(ctx, &a.Object); err != nil {
			if ctx.Err() != nil {
				return n, errors.Join(append(errs, err)...)
			}
			r.logger.Warn("remote WAL object not deleted; will retry", "object", a.Object.ID, "key", a.Object.Key, "bucket", a.Object.Bucket, "err", err)
			errs = append(errs, err)
			continue
		}
		r.mu.Lock()
		r.mu.done[a.Object.ID] = true
		r.mu.Unlock()
		n++
		r.logger.Info("remote WAL object deleted", "object", a.Object.ID, "key", a.Object.Key,
			"parts", len(a.Object.Parts), "resumed", a.Resume, "dead", a.Dead)
	}
	return n, errors.Join(errs...)
}

func (r *Retainer) deleteObject(ctx context.Context, o *ObjectSnapshot) error {
	nowMs := r.clk.Now().UnixMilli()
	snapshots := func(to SegmentState) []Event {
		var evs []Event
		for i := range o.Parts {
			p := o.Parts[i] // copy
			if p.State == to || !CanTransition(p.State, to) {
				continue
			}
			p.State, p.EventTimestampMs = to, nowMs
			evs = append(evs, &p)
		}
		return evs
	}
	if evs := snapshots(DeleteSegmentStarted); len(evs) > 0 {
		if err := r.pub.Publish(ctx, evs...); err != nil {
			return fmt.Errorf("metadata: retention of %s: %w", o.ID, err)
		}
		// Parts now all at DELETE_SEGMENT_STARTED (or later) for the next step.
		for i := range o.Parts {
			if CanTransition(o.Parts[i].State, DeleteSegmentStarted) {
				o.Parts[i].State = DeleteSegmentStarted
			}
		}
	}
	tctx := objstore.WithTags(ctx, objstore.Tags{Component: "retention", Partition: -1})
	store, err := r.stores(o.Bucket)
	if err != nil {
		return fmt.Errorf("metadata: retention of %s: store %q: %w", o.ID, o.Bucket, err)
	}
	if err := store.Delete(tctx, o.Key); err != nil {
		return fmt.Errorf("metadata: retention of %s: delete %s: %w", o.ID, o.Key, err)
	}
	if evs := snapshots(DeleteSegmentFinished); len(evs) > 0 {
		if err := r.pub.Publish(ctx, evs...); err != nil {
			return fmt.Errorf("metadata: retention of %s: %w", o.ID, err)
		}
	}
	tombs := make([]Event, len(o.Parts))
	for i := range o.Parts {
		tombs[i] = &Tombstone{o.Parts[i].Ref()}
	}
	if err := r.pub.Publish(ctx, tombs...); err != nil {
		return fmt.Errorf("metadata: retention of %s: tombstones: %w", o.ID, err)
	}
	return nil
}

// Run calls RunOnce every interval until ctx ends, logging errors.
func (r *Retainer) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return errors.New("metadata: retention interval must be positive")
	}
	t := r.clk.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.logger.Warn("retention run failed", "err", err)
		}
		t.Reset(interval)
	}
}

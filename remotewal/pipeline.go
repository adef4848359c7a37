package remotewal

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// ObjectPublisher is what the write path needs of the metadata topic;
// *metadata.Publisher implements it.
type ObjectPublisher interface {
	PublishObject(ctx context.Context, obj *metadata.ObjectMetadata) error
}

var _ ObjectPublisher = (*metadata.Publisher)(nil)

// MetadataPublisher adapts the metadata publisher to the combiner: every
// uploaded object becomes a COPY_SEGMENT_FINISHED event, split by metadata
// partition. The combiner calls it only after the PUT succeeded (invariant 4).
type MetadataPublisher struct {
	P     ObjectPublisher
	Clock clock.Clock
}

var _ combiner.Publisher = (*MetadataPublisher)(nil)

// ObjectMetadataOf converts an uploaded object to its metadata event.
func ObjectMetadataOf(obj combiner.UploadedObject, state metadata.SegmentState) *metadata.ObjectMetadata {
	return &metadata.ObjectMetadata{
		ID:               obj.ID,
		Bucket:           obj.Bucket,
		Key:              obj.Key,
		BrokerID:         obj.BrokerID,
		State:            state,
		EventTimestampMs: obj.UploadedAt.UnixMilli(),
		Entries:          obj.Entries,
	}
}

func (p *MetadataPublisher) PublishObject(ctx context.Context, obj combiner.UploadedObject) error {
	m := ObjectMetadataOf(obj, metadata.CopySegmentFinished)
	if p.Clock != nil {
		m.EventTimestampMs = p.Clock.Now().UnixMilli()
	}
	return p.P.PublishObject(ctx, m)
}

// StateReferences tells the orphan collector which objects live metadata
// references: those that reached COPY_SEGMENT_FINISHED (or later; objects
// being deleted are the retention manager's, not orphans).
type StateReferences struct{ State *metadata.State }

var _ combiner.ReferenceChecker = StateReferences{}

func (r StateReferences) IsReferenced(key string) bool {
	st, ok := r.State.ObjectState(key)
	return ok && st != metadata.CopySegmentStarted
}

// WritePath is the leader's whole remote-WAL write path: partition tasks
// cut slices, the combiner packs and uploads them through a
// combiner.StoreWriter (its requests tagged "combiner"), and metadata is
// published after each upload.
type WritePath struct {
	Manager  *Manager
	Combiner *combiner.Combiner
}

// WritePathConfig configures NewWritePath. Combiner.Writer and
// Combiner.Publisher are filled in from Store and Publisher.
type WritePathConfig struct {
	Store     objstore.Store
	Publisher ObjectPublisher
	Tasks     Config
	Combiner  combiner.Config
	// Observer, if set, gets the put stage of every PUT that succeeded and
	// the cut_to_put and publish stages of every slice published
	// (stagehist), on the combiner's clock.
	Observer stagehist.Observer
	Logger   *slog.Logger
}

// NewWritePath assembles and starts the write path.
func NewWritePath(cfg WritePathConfig) (*WritePath, error) {
	if cfg.Store == nil || cfg.Publisher == nil {
		return nil, fmt.Errorf("remotewal: write path needs a store and a metadata publisher")
	}
	cc := cfg.Combiner
	if cc.Clock == nil {
		cc.Clock = clock.Real{}
	}
	cc.Writer = combiner.StoreWriter{Store: cfg.Store}
	if cfg.Observer != nil {
		cc.Writer = timedWriter{ObjectWriter: cc.Writer, clock: cc.Clock, obs: cfg.Observer}
	}
	cc.Publisher = &MetadataPublisher{P: cfg.Publisher, Clock: cc.Clock}
	if cc.Logger == nil {
		cc.Logger = cfg.Logger
	}
	comb, err := combiner.New(cc)
	if err != nil {
		return nil, err
	}
	tc := cfg.Tasks
	if tc.Logger == nil {
		tc.Logger = cfg.Logger
	}
	if tc.Clock == nil {
		tc.Clock = cc.Clock
	}
	var sink PackCaller = comb
	if cfg.Observer != nil {
		sink = timedSink{next: comb, clock: cc.Clock, obs: cfg.Observer}
	}
	m, err := NewManager(tc, sink)
	if err != nil {
		comb.Close(context.Background())
		return nil, err
	}
	return &WritePath{Manager: m, Combiner: comb}, nil
}

// Close stops the tasks, then lets the combiner upload and publish what it
// holds until ctx ends.
func (w *WritePath) Close(ctx context.Context) error {
	w.Manager.Close()
	return w.Combiner.Close(ctx)
}

// timedSink times each slice from its Submit to its object's PUT done
// (UploadedObject.UploadedAt) and from there to its metadata published
// (Done). Both on the combiner's clock.
type timedSink struct {
	next  PackCaller
	clock clock.Clock
	obs   stagehist.Observer
}

var _ PackCaller = timedSink{}

func (t timedSink) Announce(since time.Time) combiner.Ticket { return t.next.Announce(since) }
func (t timedSink) Withdraw(tk combiner.Ticket)              { t.next.Withdraw(tk) }

func (t timedSink) Submit(ctx context.Context, s combiner.Slice) error {
	submitted := t.clock.Now()
	inner := s.Done
	s.Done = func(obj combiner.UploadedObject, err error) {
		if err == nil {
			t.obs.Observe(stagehist.CutToPut, obj.UploadedAt.Sub(submitted))
			t.obs.Observe(stagehist.Publish, t.clock.Since(obj.UploadedAt))
		}
		if inner != nil {
			inner(obj, err)
		}
	}
	return t.next.Submit(ctx, s)
}

// timedWriter times each successful PUT.
type timedWriter struct {
	combiner.ObjectWriter
	clock clock.Clock
	obs   stagehist.Observer
}

func (w timedWriter) PutObject(ctx context.Context, key string, body []byte) error {
	t0 := w.clock.Now()
	err := w.ObjectWriter.PutObject(ctx, key, body)
	if err == nil {
		w.obs.Observe(stagehist.Put, w.clock.Since(t0))
	}
	return err
}

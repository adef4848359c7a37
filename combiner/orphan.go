package combiner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
)

// ReferenceChecker says whether live metadata (COPY_SEGMENT_FINISHED and
// not yet deleted) references an object key. metadata's state implements it.
type ReferenceChecker interface {
	IsReferenced(key string) bool
}

// OrphanStore is what the orphan collector needs from object storage;
// objstore.Store has it.
type OrphanStore interface {
	List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error)
	Delete(ctx context.Context, key string) error
}

var _ OrphanStore = objstore.Store(nil)

// DefaultOrphanGrace is how old an unreferenced object must be before it is
// deleted: five times the default upload timeout.
const DefaultOrphanGrace = 5 * time.Minute

// ChooseOrphans returns, in listing order, the keys of listing to delete at
// now: WAL keys (IsWALKey under prefix) whose object is at least grace old,
// that referenced does not know and that inFlight (this broker's uploads
// not yet published) does not hold. Pure.
func ChooseOrphans(listing []objstore.ObjectInfo, prefix string, now time.Time, grace time.Duration,
	referenced func(string) bool, inFlight func(string) bool) []string {
	var out []string
	for _, o := range listing {
		if !IsWALKey(prefix, o.Key) || now.Sub(o.LastModified) < grace {
			continue
		}
		if inFlight(o.Key) || referenced(o.Key) {
			continue
		}
		out = append(out, o.Key)
	}
	return out
}

// OrphanConfig configures an OrphanCollector.
type OrphanConfig struct {
	Store     OrphanStore
	KeyPrefix string // as Config.KeyPrefix
	Refs      ReferenceChecker
	// InFlight is the local combiner's in-flight set (Combiner.InFlight);
	// nil means none. Other brokers' uploads are protected by Grace alone.
	InFlight func(key string) bool
	// Grace must exceed UploadTimeout plus the publish delay, so an upload
	// still being retried, or its metadata still on the way, is not deleted.
	Grace         time.Duration
	UploadTimeout time.Duration // the combiners' Config.UploadTimeout
	Clock         clock.Clock
	Logger        *slog.Logger
}

// Validate fills defaults and rejects a grace period not longer than the
// longest upload.
func (c *OrphanConfig) Validate() error {
	if c.Store == nil || c.Refs == nil {
		return errors.New("combiner: orphan collector needs a Store and a ReferenceChecker")
	}
	if c.Grace == 0 {
		c.Grace = DefaultOrphanGrace
	}
	if c.UploadTimeout == 0 {
		c.UploadTimeout = DefaultUploadTimeout
	}
	if c.Grace <= c.UploadTimeout {
		return fmt.Errorf("combiner: orphan grace %v must exceed the upload timeout %v", c.Grace, c.UploadTimeout)
	}
	if c.InFlight == nil {
		c.InFlight = func(string) bool { return false }
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// OrphanCollector deletes combined objects whose metadata never reached
// COPY_SEGMENT_FINISHED (a crash between PUT and publish, or a publish
// given up). RunOnce is safe to call from one goroutine at a time.
type OrphanCollector struct {
	cfg OrphanConfig
}

// NewOrphanCollector validates cfg.
func NewOrphanCollector(cfg OrphanConfig) (*OrphanCollector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &OrphanCollector{cfg: cfg}, nil
}

// RunOnce lists the WAL prefix and deletes orphans; it returns the keys it
// deleted (sorted). The decision for a key is taken after the whole listing
// is read, with "now" read after listing, so an object listed is at least
// as old as the check assumes.
func (o *OrphanCollector) RunOnce(ctx context.Context) ([]string, error) {
	ctx = objstore.WithTags(ctx, objstore.Tags{Component: "combiner-orphans", Partition: -1})
	var listing []objstore.ObjectInfo
	after := ""
	prefix := WALPrefix(o.cfg.KeyPrefix)
	for {
		p, err := o.cfg.Store.List(ctx, objstore.ListOptions{Prefix: prefix, StartAfter: after})
		if err != nil {
			return nil, fmt.Errorf("combiner: list %s: %w", prefix, err)
		}
		listing = append(listing, p.Objects...)
		if !p.Truncated || len(p.Objects) == 0 {
			break
		}
		after = p.Objects[len(p.Objects)-1].Key
	}
	now := o.cfg.Clock.Now()
	keys := ChooseOrphans(listing, o.cfg.KeyPrefix, now, o.cfg.Grace, o.cfg.Refs.IsReferenced, o.cfg.InFlight)
	sort.Strings(keys)
	var deleted []string
	var errs []error
	for _, k := range keys {
		if err := o.cfg.Store.Delete(ctx, k); err != nil {
			errs = append(errs, fmt.Errorf("combiner: delete orphan %s: %w", k, err))
			continue
		}
		o.cfg.Logger.Info("combiner: deleted orphan object", "key", k)
		deleted = append(deleted, k)
	}
	return deleted, errors.Join(errs...)
}

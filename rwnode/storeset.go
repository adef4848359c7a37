package rwnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/follower"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/storeurl"
)

// One object store per rack (the KIP co-locates each leader with an S3
// Express One Zone bucket in its AZ). A store id names a store; it is the
// rack whose store it is, or "" for the one default store
// (remote.wal.storage.url without a rack). A leader uploads to its own
// rack's store when there is one, else to the default, and puts the store
// id in the metadata event's bucket field; a follower resolves the id
// through its own configuration:
//
//	remote.wal.storage.url.<rack>=URL   the store of <rack>
//	remote.wal.storage.url=URL          the default store; a URL containing
//	                                    {rack} is a template instead: the
//	                                    store of rack R is the URL with {rack}
//	                                    replaced by R, for every R
//
// An id a broker cannot resolve is an *UnknownStoreError: the follower's
// read of those slices fails and it falls back to fetching from the leader.

// RackTemplate is the placeholder of remote.wal.storage.url replaced by a
// rack name.
const RackTemplate = "{rack}"

// ErrUnknownStore: a metadata event names a store id this broker has no
// store for.
var ErrUnknownStore = errors.New("rwnode: unknown remote WAL store id")

// UnknownStoreError names the store id; errors.Is(err, ErrUnknownStore).
type UnknownStoreError struct{ ID string }

func (e *UnknownStoreError) Error() string {
	return fmt.Sprintf("rwnode: remote WAL store id %q is not configured here (remote.wal.storage.url.%s, or a %s template)", e.ID, e.ID, RackTemplate)
}

func (e *UnknownStoreError) Is(target error) bool { return target == ErrUnknownStore }

// StoreResolver resolves a store id to its store. Safe for concurrent use.
type StoreResolver interface {
	// Store returns the store of id, or an *UnknownStoreError.
	Store(id string) (objstore.Store, error)
	// IDFor is the id of the store a broker of rack uploads to.
	IDFor(rack string) string
}

// StoreSet is the StoreResolver of a broker's configuration: fixed stores
// by id, and optionally a URL template opened on first use for any other
// rack.
type StoreSet struct {
	template string
	open     func(ctx context.Context, url string) (objstore.Store, error)

	mu struct {
		sync.Mutex
		stores map[string]objstore.Store
	}
}

var _ StoreResolver = (*StoreSet)(nil)

// NewStoreSet returns a set of the given stores by id ("" is the default
// store). template and open, when set, open the store of any other rack.
func NewStoreSet(stores map[string]objstore.Store, template string, open func(ctx context.Context, url string) (objstore.Store, error)) *StoreSet {
	s := &StoreSet{template: template, open: open}
	s.mu.stores = make(map[string]objstore.Store, len(stores))
	for id, st := range stores {
		s.mu.stores[id] = st
	}
	return s
}

// Store returns the store of id, opening it from the template if needed.
func (s *StoreSet) Store(id string) (objstore.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.mu.stores[id]; ok {
		return st, nil
	}
	if s.template == "" || s.open == nil || id == "" {
		return nil, &UnknownStoreError{ID: id}
	}
	st, err := s.open(context.Background(), strings.ReplaceAll(s.template, RackTemplate, id))
	if err != nil {
		return nil, fmt.Errorf("rwnode: open the remote WAL store of rack %q: %w", id, err)
	}
	s.mu.stores[id] = st
	return st, nil
}

// IDFor returns rack when rack has a store (or the template makes one),
// else "" (the default store).
func (s *StoreSet) IDFor(rack string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.stores[rack]; ok && rack != "" {
		return rack
	}
	if s.template != "" && rack != "" {
		return rack
	}
	return ""
}

// IDs returns the ids of the stores opened so far, sorted.
func (s *StoreSet) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.mu.stores))
	for id := range s.mu.stores {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// oneStore is the resolver of a broker with one store for everything.
type oneStore struct{ s objstore.Store }

func (o oneStore) Store(id string) (objstore.Store, error) {
	if id != "" {
		return nil, &UnknownStoreError{ID: id}
	}
	return o.s, nil
}

func (oneStore) IDFor(string) string { return "" }

// wrappedStores applies wrap (the broker's ledger) to every store resolved,
// once per id.
type wrappedStores struct {
	inner StoreResolver
	wrap  func(objstore.Store) objstore.Store
	mu    struct {
		sync.Mutex
		m map[string]objstore.Store
	}
}

func newWrappedStores(inner StoreResolver, wrap func(objstore.Store) objstore.Store) *wrappedStores {
	w := &wrappedStores{inner: inner, wrap: wrap}
	w.mu.m = map[string]objstore.Store{}
	return w
}

func (w *wrappedStores) Store(id string) (objstore.Store, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st, ok := w.mu.m[id]; ok {
		return st, nil
	}
	st, err := w.inner.Store(id)
	if err != nil {
		return nil, err
	}
	st = w.wrap(st)
	w.mu.m[id] = st
	return st, nil
}

func (w *wrappedStores) IDFor(rack string) string { return w.inner.IDFor(rack) }

// Routed keys: the follower reads through one objstore.Store, so the
// slices' index gives it keys that carry the store id, and storeRouter
// sends each request to that store. A key of the default store is the
// object key itself; any other is
//
//	NUL | store id | NUL | object key
//
// (object keys never start with NUL).
func routeKey(id, key string) string {
	if id == "" {
		return key
	}
	return "\x00" + id + "\x00" + key
}

func splitRouteKey(k string) (id, key string) {
	if !strings.HasPrefix(k, "\x00") {
		return "", k
	}
	id, key, _ = strings.Cut(k[1:], "\x00")
	return id, key
}

// storeRouter is the objstore.Store of routed keys over a StoreResolver.
// An unresolvable id fails the request with *UnknownStoreError (logged once
// per id).
type storeRouter struct {
	stores StoreResolver
	log    *slog.Logger
	warned sync.Map // store id → struct{}
}

var (
	_ objstore.Store      = (*storeRouter)(nil)
	_ objstore.BodyGetter = (*storeRouter)(nil)
)

func (r *storeRouter) resolve(k string) (objstore.Store, string, error) {
	id, key := splitRouteKey(k)
	st, err := r.stores.Store(id)
	if err != nil {
		if _, dup := r.warned.LoadOrStore(id, struct{}{}); !dup {
			r.log.Warn("remote WAL slices name a store this broker cannot resolve; reading them from the leader instead", "store_id", id, "err", err)
		}
		return nil, "", err
	}
	return st, key, nil
}

func (r *storeRouter) Put(ctx context.Context, k string, body []byte, opts objstore.PutOptions) error {
	st, key, err := r.resolve(k)
	if err != nil {
		return err
	}
	return st.Put(ctx, key, body, opts)
}

func (r *storeRouter) GetRange(ctx context.Context, k string, off, length int64) ([]byte, error) {
	st, key, err := r.resolve(k)
	if err != nil {
		return nil, err
	}
	return st.GetRange(ctx, key, off, length)
}

// GetRangeBody routes a lent-body GET (objstore.GetBody), so the
// follower's reads keep the store's pooled buffers.
func (r *storeRouter) GetRangeBody(ctx context.Context, k string, off, length int64) (*objstore.Body, error) {
	st, key, err := r.resolve(k)
	if err != nil {
		return nil, err
	}
	return objstore.GetBody(ctx, st, key, off, length)
}

func (r *storeRouter) Head(ctx context.Context, k string) (objstore.ObjectInfo, error) {
	st, key, err := r.resolve(k)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	return st.Head(ctx, key)
}

func (r *storeRouter) Delete(ctx context.Context, k string) error {
	st, key, err := r.resolve(k)
	if err != nil {
		return err
	}
	return st.Delete(ctx, key)
}

// List lists the default store only: listing is the orphan collector's and
// the auditor's, and each runs against one store.
func (r *storeRouter) List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	st, err := r.stores.Store("")
	if err != nil {
		return objstore.Page{}, err
	}
	return st.List(ctx, opts)
}

// routedIndex is the follower's index over the metadata state, with each
// slice's key routed to the store its event names.
type routedIndex struct{ state *metadata.State }

var _ follower.Index = routedIndex{}

func (x routedIndex) Slices(tp metadata.TopicPartition, fromOffset int64) []follower.Located {
	in := x.state.Slices(tp, fromOffset)
	out := make([]follower.Located, len(in))
	for i, s := range in {
		out[i] = follower.Located{Key: routeKey(s.Bucket, s.ObjectKey), Entry: s.SliceEntry}
	}
	return out
}

func (x routedIndex) Changed() <-chan struct{} { return x.state.Changed() }

var _ follower.IndexChanges = routedIndex{}

func (x routedIndex) ChangedSince(since uint64) ([]metadata.TopicPartition, uint64, bool) {
	return x.state.ChangedSince(since)
}

// ownStore resolves the store this broker uploads to (its rack's, else the
// default) and records it with its id.
func (r *RemoteWALReplicator) ownStore() (objstore.Store, error) {
	id := r.cfg.Stores.IDFor(r.cfg.Rack)
	st, err := r.cfg.Stores.Store(id)
	if err != nil {
		return nil, fmt.Errorf("rwnode: the remote WAL store of broker %d (rack %q): %w", r.cfg.BrokerID, r.cfg.Rack, err)
	}
	r.own, r.storeID = st, id
	return st, nil
}

// openRemoteWALStores opens the stores cfg.RemoteWAL names: the default one
// (remote.wal.storage.url, default file://<log.dirs>/remote-wal), and, when
// per-rack stores are configured or the URL is a {rack} template, the set
// of them (the template's stores open on first use).
func openRemoteWALStores(ctx context.Context, cfg *broker.Config) (objstore.Store, *StoreSet, error) {
	rw := cfg.RemoteWAL
	// Each store opened is proved reachable by a listing within
	// remote.wal.storage.check.timeout.ms, so that a store that refuses or
	// never answers fails the start (or the first use of a rack's store)
	// with its URL and the cause, not the first upload.
	open := func(ctx context.Context, u string) (objstore.Store, error) {
		st, err := storeurl.Open(ctx, u, storeurl.WithClock(cfg.Clock))
		if err != nil {
			return nil, err
		}
		if err := CheckStore(ctx, st, u, rw.StorageCheckTimeout); err != nil {
			return nil, err
		}
		return st, nil
	}
	template := ""
	if strings.Contains(rw.StorageURL, RackTemplate) {
		template = rw.StorageURL
	}
	var def objstore.Store
	if template == "" {
		u := rw.StorageURL
		if u == "" {
			abs, err := filepath.Abs(filepath.Join(cfg.LogDir, "remote-wal"))
			if err != nil {
				return nil, nil, err
			}
			u = "file://" + abs
		}
		st, err := open(ctx, u)
		if err != nil {
			return nil, nil, fmt.Errorf("remote.wal.storage.url=%q: %w", redactURL(u), err)
		}
		def = st
	}
	if template == "" && len(rw.RackStorageURLs) == 0 {
		return def, nil, nil
	}
	stores := map[string]objstore.Store{}
	if def != nil {
		stores[""] = def
	}
	for rack, u := range rw.RackStorageURLs {
		st, err := open(ctx, u)
		if err != nil {
			return nil, nil, fmt.Errorf("%s%s=%q: %w", broker.RackStorageURLKey, rack, redactURL(u), err)
		}
		stores[rack] = st
	}
	set := NewStoreSet(stores, template, open)
	if def == nil {
		// Every broker reads and writes through the template: its own
		// rack's store must open.
		if _, err := set.Store(set.IDFor(cfg.Rack)); err != nil {
			return nil, nil, fmt.Errorf("remote.wal.storage.url=%q (broker.rack=%q): %w", redactURL(template), cfg.Rack, err)
		}
		def, _ = set.Store(set.IDFor(cfg.Rack))
	}
	return def, set, nil
}

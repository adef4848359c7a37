package mem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
)

// Store is an in-memory object store.
type Store struct {
	clock clock.Clock
	// arena, if set (WithArena), holds the stored bodies; its counters
	// are guarded by mu. arenaWant is the size asked for.
	arena     *arena
	arenaWant int64
	// live guards reading and writing the arena's memory against Close
	// unmapping it: every access holds it for reading.
	live struct {
		sync.RWMutex
		closed bool
	}
	// pool, if set (WithPooledGets), is where GetRangeBody copies ranges.
	pool *objstore.BufferPool
	mu   struct {
		sync.Mutex
		objects map[string]object
		keys    []string // sorted; List binary-searches it
	}
}

var (
	_ objstore.Store      = (*Store)(nil)
	_ objstore.BodyGetter = (*Store)(nil)
)

type object struct {
	data    []byte
	modTime time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock that stamps LastModified (default clock.Real).
func WithClock(c clock.Clock) Option { return func(s *Store) { s.clock = c } }

// WithArena makes the store keep object bodies in bytes of memory
// allocated, and every page of it written once, when the store is made,
// instead of in a fresh heap allocation per Put. It is for a store that
// stands in for a remote one in a benchmark: the remote store's memory is
// not the client's, but a fresh allocation per object makes the process
// under test fault in every page of every object it uploads (on a
// paravirtualized machine, 2-3 ms of CPU per MB against 0.03 ms for the
// copy itself). Put still copies the body once, which stands for the
// client writing it to its socket. The arena is never reclaimed (a
// replaced or deleted object's bytes stay used); a body that finds no
// room goes to the heap as without an arena and is counted
// (ArenaStats).
//
// The arena is mapped outside the Go heap (on Linux), so that it does not
// raise the garbage collector's heap goal of the process under test, and
// in transparent huge pages where the kernel grants them, so that its
// page tables stay small (ArenaStats.HugePageBytes says how much). If it
// cannot be had, every body overflows (ArenaStats.Bytes is then 0).
// Close gives it back.
func WithArena(bytes int64) Option { return func(s *Store) { s.arenaWant = bytes } }

// WithPooledGets makes GetRangeBody copy the range into a buffer of a
// pool (objstore.BufferPool), handed back when the Body is released,
// instead of lending a view of the stored object: what a client of a
// remote store pays, which reads each body from its socket into a
// pooled buffer (s3store does).
func WithPooledGets() Option {
	return func(s *Store) { s.pool = new(objstore.BufferPool) }
}

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{clock: clock.Real{}}
	for _, o := range opts {
		o(s)
	}
	s.mu.objects = make(map[string]object)
	if s.arenaWant > 0 {
		s.arena, _ = newArena(s.arenaWant) // nil on failure: bodies overflow, as ArenaStats shows
	}
	return s
}

// errClosed is the error of a Put or GET after Close.
var errClosed = errors.New("mem: store closed")

// Close gives back the arena's memory (WithArena); the store refuses Put
// and every GET afterwards (Head, List and Delete, which do not touch
// object bytes, still answer). A store that lends views of its objects
// (GetRangeBody without WithPooledGets) keeps its arena mapped, as a Body
// may still point into it. Without an arena Close only marks the store
// closed.
func (s *Store) Close() error {
	s.live.Lock()
	defer s.live.Unlock()
	if s.live.closed {
		return nil
	}
	s.live.closed = true
	if s.arena != nil && s.pool != nil {
		s.mu.Lock()
		s.arena.free()
		s.mu.Unlock()
	}
	return nil
}

// open holds live for reading and reports errClosed after Close; the
// caller releases live when it returns nil.
func (s *Store) open(op, key string) error {
	s.live.RLock()
	if s.live.closed {
		s.live.RUnlock()
		return fmt.Errorf("mem: %s %q: %w", op, key, errClosed)
	}
	return nil
}

// Put implements objstore.Store. It returns ErrExists for a create-only put
// of a present key and ErrInvalidKey for an empty key.
func (s *Store) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	if err := check(ctx, "put", key); err != nil {
		return err
	}
	if err := s.open("put", key); err != nil {
		return err
	}
	defer s.live.RUnlock()
	if opts.IfNoneMatch && s.exists(key) {
		return fmt.Errorf("mem: put %q: %w", key, objstore.ErrExists)
	}
	data := s.copyIn(body)
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.objects[key]; ok {
		if opts.IfNoneMatch {
			return fmt.Errorf("mem: put %q: %w", key, objstore.ErrExists)
		}
	} else {
		i, _ := slices.BinarySearch(s.mu.keys, key)
		s.mu.keys = slices.Insert(s.mu.keys, i, key)
	}
	s.mu.objects[key] = object{data: data, modTime: now}
	return nil
}

// GetRange implements objstore.Store: ErrNotFound for a missing key,
// ErrInvalidRange for off at or past the end.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	if err := s.open("get", key); err != nil {
		return nil, err
	}
	defer s.live.RUnlock()
	b, err := s.view(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return slices.Clone(b), nil
}

// GetRangeBody implements objstore.BodyGetter without a copy: the Body is
// a view of the stored object, which Put never changes (it replaces the
// slice), so it stays valid however long the caller keeps it; Release
// does nothing. The caller must not modify it (the BodyGetter contract).
// With WithPooledGets the range is copied into a pooled buffer instead,
// which Release hands back.
func (s *Store) GetRangeBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	if err := s.open("get", key); err != nil {
		return nil, err
	}
	defer s.live.RUnlock()
	b, err := s.view(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	if s.pool != nil {
		buf := s.pool.Get(len(b))
		copy(buf, b)
		return s.pool.Body(buf), nil
	}
	return objstore.NewBody(b, nil), nil
}

// exists reports whether key is stored.
func (s *Store) exists(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.mu.objects[key]
	return ok
}

// view returns the stored bytes of the range.
func (s *Store) view(ctx context.Context, key string, off, length int64) ([]byte, error) {
	if err := check(ctx, "get", key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	o, ok := s.mu.objects[key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("mem: get %q: %w", key, objstore.ErrNotFound)
	}
	// o.data is never mutated after Put (Put replaces the slice), so it can
	// be read outside the lock.
	start, end, err := objstore.ResolveRange(int64(len(o.data)), off, length)
	if err != nil {
		return nil, fmt.Errorf("mem: get %q [off=%d len=%d]: %w", key, off, length, err)
	}
	return o.data[start:end:end], nil
}

// Head implements objstore.Store: ErrNotFound for a missing key.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := check(ctx, "head", key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	s.mu.Lock()
	o, ok := s.mu.objects[key]
	s.mu.Unlock()
	if !ok {
		return objstore.ObjectInfo{}, fmt.Errorf("mem: head %q: %w", key, objstore.ErrNotFound)
	}
	return objstore.ObjectInfo{Key: key, Size: int64(len(o.data)), LastModified: o.modTime}, nil
}

// Delete implements objstore.Store; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := check(ctx, "delete", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.objects[key]; !ok {
		return nil
	}
	delete(s.mu.objects, key)
	if i, found := slices.BinarySearch(s.mu.keys, key); found {
		s.mu.keys = slices.Delete(s.mu.keys, i, i+1)
	}
	return nil
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	if err := ctx.Err(); err != nil {
		return objstore.Page{}, fmt.Errorf("mem: list %q: %w", opts.Prefix, err)
	}
	limit := opts.LimitOrDefault()
	from := opts.Prefix
	if opts.StartAfter >= from {
		from = opts.StartAfter + "\x00" // the smallest key strictly after StartAfter
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearch(s.mu.keys, from)
	var p objstore.Page
	for ; i < len(s.mu.keys); i++ {
		k := s.mu.keys[i]
		if !strings.HasPrefix(k, opts.Prefix) {
			break
		}
		if len(p.Objects) == limit {
			p.Truncated = true
			break
		}
		o := s.mu.objects[k]
		p.Objects = append(p.Objects, objstore.ObjectInfo{Key: k, Size: int64(len(o.data)), LastModified: o.modTime})
	}
	return p, nil
}

func check(ctx context.Context, op, key string) error {
	if key == "" {
		return fmt.Errorf("mem: %s: empty key: %w", op, objstore.ErrInvalidKey)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mem: %s %q: %w", op, key, err)
	}
	return nil
}

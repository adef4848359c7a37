package mem

import (
	"context"
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
	mu    struct {
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

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{clock: clock.Real{}}
	for _, o := range opts {
		o(s)
	}
	s.mu.objects = make(map[string]object)
	return s
}

// Put implements objstore.Store. It returns ErrExists for a create-only put
// of a present key and ErrInvalidKey for an empty key.
func (s *Store) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	if err := check(ctx, "put", key); err != nil {
		return err
	}
	data := slices.Clone(body)
	if data == nil {
		data = []byte{}
	}
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
func (s *Store) GetRangeBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	b, err := s.view(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return objstore.NewBody(b, nil), nil
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

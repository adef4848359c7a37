package combiner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// memStore is a small in-memory objstore.Store for these tests; its
// modification times come from an injected clock.
type memStore struct {
	clock clock.Clock
	mu    struct {
		sync.Mutex
		objs map[string]memObj
	}
}

type memObj struct {
	body []byte
	mod  time.Time
}

var _ objstore.Store = (*memStore)(nil)

func newMemStore(c clock.Clock) *memStore {
	s := &memStore{clock: c}
	s.mu.objs = make(map[string]memObj)
	return s
}

func (s *memStore) Put(ctx context.Context, key string, body []byte, o objstore.PutOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if key == "" {
		return objstore.ErrInvalidKey
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.objs[key]; ok && o.IfNoneMatch {
		return fmt.Errorf("put %s: %w", key, objstore.ErrExists)
	}
	s.mu.objs[key] = memObj{body: bytes.Clone(body), mod: s.clock.Now()}
	return nil
}

func (s *memStore) GetRange(_ context.Context, key string, off, length int64) ([]byte, error) {
	s.mu.Lock()
	o, ok := s.mu.objs[key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, objstore.ErrNotFound)
	}
	n := int64(len(o.body))
	if off < 0 {
		off = max(n+off, 0)
		return bytes.Clone(o.body[off:]), nil
	}
	if off >= n {
		return nil, objstore.ErrInvalidRange
	}
	end := n
	if length >= 0 && off+length < n {
		end = off + length
	}
	return bytes.Clone(o.body[off:end]), nil
}

func (s *memStore) Head(_ context.Context, key string) (objstore.ObjectInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.mu.objs[key]
	if !ok {
		return objstore.ObjectInfo{}, objstore.ErrNotFound
	}
	return objstore.ObjectInfo{Key: key, Size: int64(len(o.body)), LastModified: o.mod}, nil
}

func (s *memStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.objs, key)
	return nil
}

func (s *memStore) List(_ context.Context, o objstore.ListOptions) (objstore.Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.mu.objs {
		if strings.HasPrefix(k, o.Prefix) && k > o.StartAfter {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	limit := o.Limit
	if limit == 0 {
		limit = 2 // small pages so paging is exercised
	}
	var p objstore.Page
	if len(keys) > limit {
		keys, p.Truncated = keys[:limit], true
	}
	for _, k := range keys {
		p.Objects = append(p.Objects, objstore.ObjectInfo{Key: k, Size: int64(len(s.mu.objs[k].body)), LastModified: s.mu.objs[k].mod})
	}
	return p, nil
}

func (s *memStore) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.mu.objs[key]
	return ok
}

func (s *memStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.objs)
}

// httpErr is a store error with an HTTP status, retriable for 5xx.
type httpErr struct{ status int }

func (e httpErr) Error() string   { return fmt.Sprintf("http %d", e.status) }
func (e httpErr) Retriable() bool { return e.status >= 500 }

// faultWriter wraps a StoreWriter and injects faults chosen by fn, which
// sees the 0-based PUT number. Deterministic for a given fn.
type faultWriter struct {
	w  StoreWriter
	fn func(n int) fault
	mu struct {
		sync.Mutex
		n      int
		stored []string // keys in the order their PUTs stored them
	}
}

type fault struct {
	before error         // fail without storing
	after  error         // store, then fail (ambiguous)
	gate   chan struct{} // wait for this before storing
}

func (f *faultWriter) PutObject(ctx context.Context, key string, body []byte) error {
	f.mu.Lock()
	n := f.mu.n
	f.mu.n++
	f.mu.Unlock()
	ft := f.fn(n)
	if ft.gate != nil {
		select {
		case <-ft.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if ft.before != nil {
		return ft.before
	}
	if err := f.w.PutObject(ctx, key, body); err != nil {
		return err
	}
	f.mu.Lock()
	f.mu.stored = append(f.mu.stored, key)
	f.mu.Unlock()
	return ft.after
}

func (f *faultWriter) ReadObjectTail(ctx context.Context, key string, n int64) ([]byte, error) {
	return f.w.ReadObjectTail(ctx, key, n)
}

// recPublisher records published objects, checks each is in the store when
// published, and fails while failFor says so.
type recPublisher struct {
	t       *testing.T
	store   *memStore
	failFor func(call int) error
	mu      struct {
		sync.Mutex
		calls int
		objs  []UploadedObject
		ids   map[metadata.ObjectID]bool
	}
}

func (p *recPublisher) PublishObject(ctx context.Context, obj UploadedObject) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	call := p.mu.calls
	p.mu.calls++
	if p.failFor != nil {
		if err := p.failFor(call); err != nil {
			return err
		}
	}
	if !p.store.has(obj.Key) {
		p.t.Errorf("published %s, which is not in the store", obj.Key)
	}
	if p.mu.ids == nil {
		p.mu.ids = map[metadata.ObjectID]bool{}
	}
	if p.mu.ids[obj.ID] {
		p.t.Errorf("object %s published twice", obj.ID)
	}
	p.mu.ids[obj.ID] = true
	p.mu.objs = append(p.mu.objs, obj)
	return nil
}

func (p *recPublisher) published() []UploadedObject {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]UploadedObject(nil), p.mu.objs...)
}

// checkOrder checks that every partition's published entries are
// contiguous and increasing, starting at 0, and end at want[tp].
func checkOrder(t *testing.T, objs []UploadedObject, want map[metadata.TopicPartition]int64) {
	t.Helper()
	next := map[metadata.TopicPartition]int64{}
	for _, o := range objs {
		for _, e := range o.Entries {
			if e.BaseOffset != next[e.TopicPartition] {
				t.Fatalf("%v: published [%d, %d] in %s, expected base %d", e.TopicPartition, e.BaseOffset, e.LastOffset, o.Key, next[e.TopicPartition])
			}
			next[e.TopicPartition] = e.LastOffset + 1
		}
	}
	for tp, w := range want {
		if next[tp] != w {
			t.Errorf("%v: published up to %d, want %d", tp, next[tp], w)
		}
	}
}

// pump advances clk by step whenever a timer is armed, until stop is
// closed, so backoffs and intervals elapse without the test sleeping on
// them. It yields between looks.
func pump(clk *clock.Manual, step time.Duration, stop <-chan struct{}) *sync.WaitGroup {
	return spinUntil(stop, func() {
		if clk.Pending() > 0 {
			clk.Advance(step)
		}
	})
}

// spinUntil calls look, yielding between calls, until stop is closed.
func spinUntil(stop <-chan struct{}, look func()) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			look()
			runtime.Gosched()
		}
	}()
	return &wg
}

// waitFor spins (yielding) until cond holds; the test's deadline bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 50_000_000 {
			t.Fatalf("gave up waiting for %s", what)
		}
		runtime.Gosched()
	}
}

var errBoom = errors.New("boom")

// nameID is a readable object id for tests: name's bytes, zero-padded.
func nameID(name string) metadata.ObjectID {
	var id metadata.ObjectID
	copy(id[:], name)
	return id
}

// gatedFaults is a seeded schedule of PUT faults: by the PUT's number, a
// 503 before storing (kind 0), a 500 after storing, an ambiguous PUT (1),
// a PUT held at a gate, at most two at once (2), or none (any other
// kind, of the kinds drawn); a PUT without a fault releases every held
// one, so later objects finish first.
type gatedFaults struct {
	kinds []int
	mu    struct {
		sync.Mutex
		held []chan struct{}
	}
}

func newGatedFaults(seed uint64, kinds int) *gatedFaults {
	rng := rand.New(rand.NewPCG(seed, seed))
	g := &gatedFaults{kinds: make([]int, 10000)}
	for i := range g.kinds {
		g.kinds[i] = rng.IntN(kinds)
	}
	return g
}

func (g *gatedFaults) fault(n int) fault {
	switch g.kinds[n] {
	case 0:
		return fault{before: httpErr{503}}
	case 1:
		return fault{after: httpErr{500}}
	case 2:
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.mu.held) < 2 {
			gate := make(chan struct{})
			g.mu.held = append(g.mu.held, gate)
			return fault{gate: gate}
		}
		return fault{}
	}
	g.releaseAll()
	return fault{}
}

func (g *gatedFaults) releaseAll() {
	g.mu.Lock()
	for _, gate := range g.mu.held {
		close(gate)
	}
	g.mu.held = nil
	g.mu.Unlock()
}

// releaseWhenFull releases the held PUTs whenever c holds limit slices
// or more (as a real slow PUT would end at its attempt timeout when the
// pipeline is full behind it), until the returned stop is called.
func (g *gatedFaults) releaseWhenFull(c *Combiner, limit int) (stop func()) {
	done := make(chan struct{})
	wg := spinUntil(done, func() {
		if c.Metrics().HeldSlices >= limit {
			g.releaseAll()
		}
	})
	return func() { close(done); wg.Wait() }
}

// releaseUntilEmpty releases held PUTs until c holds nothing (once
// submission has ended, so that Close can drain).
func (g *gatedFaults) releaseUntilEmpty(c *Combiner) {
	go func() {
		for c.Metrics().HeldSlices > 0 {
			g.releaseAll()
			runtime.Gosched()
		}
	}()
}

package latency

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
)

// Dist is a log-normal first-byte latency given by its median and 99th
// percentile. The zero Dist is no latency.
type Dist struct {
	Median time.Duration `json:"median"`
	P99    time.Duration `json:"p99"`
}

// Sample draws a latency from d given a standard normal variate z.
func (d Dist) Sample(z float64) time.Duration {
	if d.Median <= 0 {
		return 0
	}
	sigma := 0.0
	if d.P99 > d.Median {
		sigma = math.Log(float64(d.P99)/float64(d.Median)) / 2.3263478740408408
	}
	v := float64(d.Median) * math.Exp(sigma*z)
	return time.Duration(min(v, 10*float64(max(d.P99, d.Median))))
}

// Model is the latency of one kind of object store.
type Model struct {
	Name                         string
	Put, Get, Head, Delete, List Dist
	// BandwidthBytesPerSec is the transfer rate of one request; 0 is
	// unlimited.
	BandwidthBytesPerSec float64
}

// Validate rejects nonsense.
func (m Model) Validate() error {
	for _, d := range []Dist{m.Put, m.Get, m.Head, m.Delete, m.List} {
		if d.Median < 0 || d.P99 < 0 || (d.P99 > 0 && d.P99 < d.Median) {
			return fmt.Errorf("latency: model %q: bad distribution %+v", m.Name, d)
		}
	}
	if m.BandwidthBytesPerSec < 0 {
		return fmt.Errorf("latency: model %q: negative bandwidth", m.Name)
	}
	return nil
}

const ms = time.Millisecond

// Preset returns the named model: "s3express", "s3standard" or "none". The
// figures and their sources are in the package documentation.
func Preset(name string) (Model, error) {
	switch name {
	case "s3express":
		return Model{
			Name:                 "s3express",
			Put:                  Dist{4 * ms, 10 * ms},
			Get:                  Dist{3 * ms, 8 * ms},
			Head:                 Dist{3 * ms, 8 * ms},
			Delete:               Dist{4 * ms, 10 * ms},
			List:                 Dist{5 * ms, 15 * ms},
			BandwidthBytesPerSec: 200e6,
		}, nil
	case "s3standard":
		return Model{
			Name:                 "s3standard",
			Put:                  Dist{50 * ms, 200 * ms},
			Get:                  Dist{30 * ms, 150 * ms},
			Head:                 Dist{20 * ms, 100 * ms},
			Delete:               Dist{30 * ms, 150 * ms},
			List:                 Dist{50 * ms, 200 * ms},
			BandwidthBytesPerSec: 90e6,
		}, nil
	case "none":
		return Model{Name: "none"}, nil
	}
	return Model{}, fmt.Errorf("latency: unknown preset %q (want s3express, s3standard or none)", name)
}

// Store is the decorator.
type Store struct {
	inner objstore.Store
	model Model
	clock clock.Clock
	mu    struct {
		sync.Mutex
		rng *rand.Rand
	}
}

var (
	_ objstore.Store      = (*Store)(nil)
	_ objstore.BodyGetter = (*Store)(nil)
)

// New wraps inner with model, waiting on c and drawing from a source seeded
// with seed.
func New(inner objstore.Store, model Model, c clock.Clock, seed uint64) (*Store, error) {
	if err := model.Validate(); err != nil {
		return nil, err
	}
	if c == nil {
		c = clock.Real{}
	}
	s := &Store{inner: inner, model: model, clock: c}
	s.mu.rng = rand.New(rand.NewPCG(seed, seed^0x6b77616c))
	return s, nil
}

// Delay is the modelled duration of a request with first-byte distribution
// d moving n bytes, for a standard normal variate z.
func (m Model) Delay(d Dist, z float64, n int) time.Duration {
	t := d.Sample(z)
	if m.BandwidthBytesPerSec > 0 && n > 0 {
		t += time.Duration(float64(n) / m.BandwidthBytesPerSec * float64(time.Second))
	}
	return t
}

func (s *Store) wait(ctx context.Context, d Dist, n int) error {
	if d.Median <= 0 && (s.model.BandwidthBytesPerSec <= 0 || n == 0) {
		return ctx.Err()
	}
	s.mu.Lock()
	z := s.mu.rng.NormFloat64()
	s.mu.Unlock()
	delay := s.model.Delay(d, z, n)
	if delay <= 0 {
		return ctx.Err()
	}
	t := s.clock.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Put waits the modelled upload time, then forwards.
func (s *Store) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	if err := s.wait(ctx, s.model.Put, len(body)); err != nil {
		return fmt.Errorf("latency: put %q: %w", key, err)
	}
	return s.inner.Put(ctx, key, body, opts)
}

// GetRange forwards, then waits the modelled first-byte and transfer time
// of the bytes returned.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	b, err := s.inner.GetRange(ctx, key, off, length)
	if werr := s.wait(ctx, s.model.Get, len(b)); werr != nil {
		return nil, fmt.Errorf("latency: get %q: %w", key, werr)
	}
	return b, err
}

// GetRangeBody is GetRange for a lent body (objstore.GetBody).
func (s *Store) GetRangeBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	b, err := objstore.GetBody(ctx, s.inner, key, off, length)
	n := 0
	if err == nil {
		n = b.Len()
	}
	if werr := s.wait(ctx, s.model.Get, n); werr != nil {
		if b != nil {
			b.Release()
		}
		return nil, fmt.Errorf("latency: get %q: %w", key, werr)
	}
	return b, err
}

// Head waits the modelled latency, then forwards.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := s.wait(ctx, s.model.Head, 0); err != nil {
		return objstore.ObjectInfo{}, fmt.Errorf("latency: head %q: %w", key, err)
	}
	return s.inner.Head(ctx, key)
}

// Delete waits the modelled latency, then forwards.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.wait(ctx, s.model.Delete, 0); err != nil {
		return fmt.Errorf("latency: delete %q: %w", key, err)
	}
	return s.inner.Delete(ctx, key)
}

// List waits the modelled latency, then forwards.
func (s *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	if err := s.wait(ctx, s.model.List, 0); err != nil {
		return objstore.Page{}, fmt.Errorf("latency: list %q: %w", opts.Prefix, err)
	}
	return s.inner.List(ctx, opts)
}

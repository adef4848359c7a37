package fault

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
)

// Op names a Store method.
type Op string

// The operations rules can select.
const (
	OpPut    Op = "PUT"
	OpGet    Op = "GET"
	OpHead   Op = "HEAD"
	OpDelete Op = "DELETE"
	OpList   Op = "LIST"
)

// Kind is what a rule injects.
type Kind int

// Fault kinds; see the package documentation.
const (
	InternalError Kind = iota + 1
	SlowDown
	Timeout
	Latency
	Truncate
	Corrupt
	AmbiguousPut
)

func (k Kind) String() string {
	switch k {
	case InternalError:
		return "InternalError"
	case SlowDown:
		return "SlowDown"
	case Timeout:
		return "Timeout"
	case Latency:
		return "Latency"
	case Truncate:
		return "Truncate"
	case Corrupt:
		return "Corrupt"
	case AmbiguousPut:
		return "AmbiguousPut"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Rule injects one kind of fault with a probability.
type Rule struct {
	Kind Kind
	// Ops the rule applies to; empty means all (Truncate and Corrupt apply
	// only to GET, AmbiguousPut only to PUT, whatever Ops says).
	Ops []Op
	// Prob is the probability in [0, 1] that the rule fires for a request.
	Prob float64
	// Delay is the added latency (Latency) or how long a Timeout blocks
	// before giving up when ctx has no earlier deadline (0: until ctx is
	// done).
	Delay time.Duration
}

// Config is the decorator's configuration.
type Config struct {
	Seed  uint64
	Rules []Rule
	// Clock waits Latency and Timeout delays; default clock.Real.
	Clock clock.Clock
}

// Validate fills defaults and rejects nonsense.
func (c *Config) Validate() error {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	for i, r := range c.Rules {
		if r.Kind < InternalError || r.Kind > AmbiguousPut {
			return fmt.Errorf("fault: rule %d: unknown kind %d", i, r.Kind)
		}
		if !(r.Prob >= 0 && r.Prob <= 1) {
			return fmt.Errorf("fault: rule %d (%v): probability %v outside [0, 1]", i, r.Kind, r.Prob)
		}
		if r.Delay < 0 {
			return fmt.Errorf("fault: rule %d (%v): negative delay", i, r.Kind)
		}
		if r.Kind == Latency && r.Delay == 0 {
			return fmt.Errorf("fault: rule %d: Latency needs a Delay", i)
		}
		for _, op := range r.Ops {
			switch op {
			case OpPut, OpGet, OpHead, OpDelete, OpList:
			default:
				return fmt.Errorf("fault: rule %d: unknown op %q", i, op)
			}
		}
	}
	return nil
}

// Error is an injected S3 error.
type Error struct {
	Op  Op
	Key string
	// Code is the HTTP status: 500 or 503.
	Code int
	// S3Code is the S3 error code: InternalError or SlowDown.
	S3Code    string
	Retriable bool
	// Applied says the operation took effect before the error was returned
	// (an ambiguous PUT).
	Applied bool
}

func (e *Error) Error() string {
	s := fmt.Sprintf("fault: injected %d %s on %s %q", e.Code, e.S3Code, e.Op, e.Key)
	if e.Applied {
		s += " (write applied)"
	}
	return s
}

// Stats counts injected faults.
type Stats struct {
	Requests       int64 `json:"requests"`
	InternalErrors int64 `json:"internal_errors"`
	SlowDowns      int64 `json:"slow_downs"`
	Timeouts       int64 `json:"timeouts"`
	Latencies      int64 `json:"latencies"`
	Truncated      int64 `json:"truncated"`
	Corrupted      int64 `json:"corrupted"`
	AmbiguousPuts  int64 `json:"ambiguous_puts"`
}

// Store is the decorator.
type Store struct {
	inner objstore.Store
	cfg   Config
	seq   atomic.Uint64
	n     [AmbiguousPut + 1]atomic.Int64
	reqs  atomic.Int64
}

var (
	_ objstore.Store      = (*Store)(nil)
	_ objstore.BodyGetter = (*Store)(nil)
)

// New wraps inner.
func New(inner objstore.Store, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{inner: inner, cfg: cfg}, nil
}

// Stats returns the counts of injected faults so far.
func (s *Store) Stats() Stats {
	return Stats{
		Requests:       s.reqs.Load(),
		InternalErrors: s.n[InternalError].Load(),
		SlowDowns:      s.n[SlowDown].Load(),
		Timeouts:       s.n[Timeout].Load(),
		Latencies:      s.n[Latency].Load(),
		Truncated:      s.n[Truncate].Load(),
		Corrupted:      s.n[Corrupt].Load(),
		AmbiguousPuts:  s.n[AmbiguousPut].Load(),
	}
}

// Decision is what happens to one request: a delay before it and at most
// one fault.
type Decision struct {
	Delay time.Duration
	Fault Kind // 0: none
	// Rule is the index of the rule that chose Fault.
	Rule int
	// Rand is a further uniform value for the fault (where to cut or flip).
	Rand uint64
}

// Decide is the pure decision for request number seq of kind op.
func Decide(seed, seq uint64, op Op, rules []Rule) Decision {
	var d Decision
	for i, r := range rules {
		if !applies(r, op) {
			continue
		}
		h := mix(seed, seq, uint64(i))
		if float64(h>>11)/(1<<53) >= r.Prob {
			continue
		}
		if r.Kind == Latency {
			d.Delay += r.Delay
			continue
		}
		d.Fault, d.Rule = r.Kind, i
		d.Rand = mix(h, seq, math.MaxUint64)
		return d
	}
	return d
}

func applies(r Rule, op Op) bool {
	switch r.Kind {
	case Truncate, Corrupt:
		if op != OpGet {
			return false
		}
	case AmbiguousPut:
		if op != OpPut {
			return false
		}
	}
	if len(r.Ops) == 0 {
		return true
	}
	for _, o := range r.Ops {
		if o == op {
			return true
		}
	}
	return false
}

// mix is splitmix64 over three words.
func mix(a, b, c uint64) uint64 {
	x := a ^ 0x9e3779b97f4a7c15
	for _, v := range [...]uint64{b, c} {
		x += v * 0xbf58476d1ce4e5b9
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		x ^= x >> 31
	}
	return x
}

// before applies the delay and the faults that replace the request. It
// returns the decision and a non-nil error when the request must not be
// forwarded.
func (s *Store) before(ctx context.Context, op Op, key string) (Decision, error) {
	s.reqs.Add(1)
	d := Decide(s.cfg.Seed, s.seq.Add(1)-1, op, s.cfg.Rules)
	if d.Delay > 0 {
		s.n[Latency].Add(1)
		if err := s.wait(ctx, d.Delay); err != nil {
			return d, fmt.Errorf("fault: %s %q: %w", op, key, err)
		}
	}
	switch d.Fault {
	case InternalError:
		s.n[InternalError].Add(1)
		return d, &Error{Op: op, Key: key, Code: 500, S3Code: "InternalError", Retriable: true}
	case SlowDown:
		s.n[SlowDown].Add(1)
		return d, &Error{Op: op, Key: key, Code: 503, S3Code: "SlowDown", Retriable: true}
	case Timeout:
		s.n[Timeout].Add(1)
		return d, s.timeout(ctx, op, key, s.cfg.Rules[d.Rule].Delay)
	}
	return d, nil
}

func (s *Store) wait(ctx context.Context, d time.Duration) error {
	t := s.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

func (s *Store) timeout(ctx context.Context, op Op, key string, limit time.Duration) error {
	var fired <-chan time.Time
	if limit > 0 {
		t := s.cfg.Clock.NewTimer(limit)
		defer t.Stop()
		fired = t.C()
	}
	select {
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("fault: injected timeout on %s %q: %w", op, key, context.DeadlineExceeded)
		}
		return fmt.Errorf("fault: %s %q: %w", op, key, ctx.Err())
	case <-fired:
		return fmt.Errorf("fault: injected timeout on %s %q after %v: %w", op, key, limit, context.DeadlineExceeded)
	}
}

// Put implements objstore.Store; besides the inner store's errors it may
// return *Error (with Applied set for an ambiguous write) or an error
// wrapping context.DeadlineExceeded.
func (s *Store) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	d, err := s.before(ctx, OpPut, key)
	if err != nil {
		return err
	}
	err = s.inner.Put(ctx, key, body, opts)
	if err == nil && d.Fault == AmbiguousPut {
		s.n[AmbiguousPut].Add(1)
		return &Error{Op: OpPut, Key: key, Code: 500, S3Code: "InternalError", Retriable: true, Applied: true}
	}
	return err
}

// GetRange implements objstore.Store; it may return injected errors like
// Put, or a truncated or corrupted body with a nil error.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	d, err := s.before(ctx, OpGet, key)
	if err != nil {
		return nil, err
	}
	b, err := s.inner.GetRange(ctx, key, off, length)
	if err != nil || len(b) == 0 {
		return b, err
	}
	return s.damage(d, b), nil // the slice is ours to change
}

// GetRangeBody implements objstore.BodyGetter with GetRange's faults. A
// lent body is read-only, so a truncated or corrupted one is a copy the
// fault changes (the inner body is released at once).
func (s *Store) GetRangeBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	d, err := s.before(ctx, OpGet, key)
	if err != nil {
		return nil, err
	}
	body, err := objstore.GetBody(ctx, s.inner, key, off, length)
	if err != nil || body.Len() == 0 || (d.Fault != Truncate && d.Fault != Corrupt) {
		return body, err
	}
	b := append([]byte(nil), body.Bytes()...)
	body.Release()
	return objstore.NewBody(s.damage(d, b), nil), nil
}

// damage applies a Truncate or Corrupt decision to b, which is the
// caller's to change.
func (s *Store) damage(d Decision, b []byte) []byte {
	switch d.Fault {
	case Truncate:
		s.n[Truncate].Add(1)
		b = b[:d.Rand%uint64(len(b))]
	case Corrupt:
		s.n[Corrupt].Add(1)
		i := d.Rand % uint64(len(b))
		b[i] ^= byte(1 << (d.Rand >> 61))
	}
	return b
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if _, err := s.before(ctx, OpHead, key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	return s.inner.Head(ctx, key)
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if _, err := s.before(ctx, OpDelete, key); err != nil {
		return err
	}
	return s.inner.Delete(ctx, key)
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	if _, err := s.before(ctx, OpList, opts.Prefix); err != nil {
		return objstore.Page{}, err
	}
	return s.inner.List(ctx, opts)
}

package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
)

// ReadBody reads a GET response body of size bytes (its Content-Length;
// negative when unknown) into one buffer of exactly that size: the body
// is copied once, from the connection into the buffer the caller gets.
// (io.Copy into a bytes.Buffer of capacity size grows it at the end to
// look for EOF, copying the whole body a second time.) A body shorter or
// longer than size is an error wrapping io.ErrUnexpectedEOF.
func ReadBody(r io.Reader, size int64) ([]byte, error) {
	if size < 0 || size > 1<<40 {
		return io.ReadAll(r)
	}
	buf := make([]byte, size)
	if err := readExactly(r, buf, size); err != nil {
		return nil, err
	}
	return buf, nil
}

// readExactly fills buf from r and checks that r ends there.
func readExactly(r io.Reader, buf []byte, size int64) error {
	if n, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("body %d bytes, Content-Length %d: %w", n, size, io.ErrUnexpectedEOF)
		}
		return err
	}
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return fmt.Errorf("body longer than its Content-Length %d: %w", size, io.ErrUnexpectedEOF)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Body is the bytes of one GET lent to the caller: Bytes is valid, and must
// not be modified, until the last Release. A Body starts with one
// reference; Retain adds one. When the last is released the bytes go back
// to where they came from (a BufferPool, to be read into again), so a
// caller must not touch them after its Release. A Body that is never
// released is garbage collected like any slice: forgetting a Release costs
// a buffer, never data.
//
// Bodies are how the follower reads GET bodies without copying them:
// verified slices point into the body until they are appended.
type Body struct {
	b       []byte
	release func([]byte)
	refs    atomic.Int32
}

// NewBody returns a Body of b with one reference. release, if not nil, is
// called with b when the last reference is released.
func NewBody(b []byte, release func([]byte)) *Body {
	body := &Body{b: b, release: release}
	body.refs.Store(1)
	return body
}

// Bytes returns the body's bytes: read-only, valid until the last Release.
func (b *Body) Bytes() []byte { return b.b }

// Len is len(Bytes()).
func (b *Body) Len() int { return len(b.b) }

// Retain adds a reference. It panics on a body already released: that is
// a use after release, a broken invariant.
func (b *Body) Retain() {
	for {
		n := b.refs.Load()
		if n <= 0 {
			panic("objstore: Retain of a released Body")
		}
		if b.refs.CompareAndSwap(n, n+1) {
			return
		}
	}
}

// Release drops a reference; the last one hands the bytes back. Releasing
// more often than retaining panics (a double release would hand out one
// buffer twice).
func (b *Body) Release() {
	switch n := b.refs.Add(-1); {
	case n == 0:
		bs := b.b
		b.b = nil
		if b.release != nil {
			b.release(bs)
		}
	case n < 0:
		panic("objstore: Body released more often than retained")
	}
}

// BodyGetter is implemented by stores that can lend the bytes of a GET
// instead of handing them over: a backend reading from the network reads
// them into a pooled buffer (BufferPool), the in-memory store lends a view
// of the stored object (no copy at all: it never changes a stored object).
// GetRangeBody keeps GetRange's range rules and errors.
type BodyGetter interface {
	GetRangeBody(ctx context.Context, key string, off, length int64) (*Body, error)
}

// RangeGetter is the read half of Store, what GetBody needs.
type RangeGetter interface {
	GetRange(ctx context.Context, key string, off, length int64) ([]byte, error)
}

// GetBody reads a range of key as a Body: through s.GetRangeBody when s is
// a BodyGetter, else through GetRange (the slice is then the caller's, and
// Release just drops it).
func GetBody(ctx context.Context, s RangeGetter, key string, off, length int64) (*Body, error) {
	if g, ok := s.(BodyGetter); ok {
		return g.GetRangeBody(ctx, key, off, length)
	}
	b, err := s.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return NewBody(b, nil), nil
}

// BufferPool keeps GET buffers for reuse, in power-of-two size classes
// from 4 KiB to 64 MiB; larger ones are allocated and left to the garbage
// collector. The zero value is ready to use and safe for concurrent use.
// Like any sync.Pool it lets the garbage collector take idle buffers.
type BufferPool struct {
	classes [poolClasses]sync.Pool // of *[]byte
}

const (
	poolMinShift = 12 // 4 KiB
	poolClasses  = 15 // up to 64 MiB
)

func poolClass(n int) int {
	if n <= 1<<poolMinShift {
		return 0
	}
	return bits.Len(uint(n-1)) - poolMinShift
}

// Get returns a buffer of length n; its bytes are whatever a previous
// user left (the caller overwrites them).
func (p *BufferPool) Get(n int) []byte {
	c := poolClass(n)
	if c >= poolClasses {
		return make([]byte, n)
	}
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		return (*v)[:n]
	}
	return make([]byte, n, 1<<(c+poolMinShift))
}

// Put hands b back for reuse. Buffers not made by Get are dropped.
func (p *BufferPool) Put(b []byte) {
	c := poolClass(cap(b))
	if c >= poolClasses || cap(b) != 1<<(c+poolMinShift) {
		return
	}
	b = b[:0]
	p.classes[c].Put(&b)
}

// Body returns b, a buffer from Get, as a Body that hands it back to p.
func (p *BufferPool) Body(b []byte) *Body { return NewBody(b, p.Put) }

// ReadBodyPooled is ReadBody into a buffer of pool: the body is copied
// once, from the connection into the buffer, and the buffer is reused once
// the caller releases the Body. Errors are ReadBody's.
func ReadBodyPooled(r io.Reader, size int64, pool *BufferPool) (*Body, error) {
	if size < 0 || size > 1<<40 {
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		return NewBody(b, nil), nil
	}
	buf := pool.Get(int(size))
	if err := readExactly(r, buf, size); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return pool.Body(buf), nil
}

// ReadBodyOwned is ReadBody into a Body whose bytes belong to the caller
// (no pool: the last Release hands nothing back).
func ReadBodyOwned(r io.Reader, size int64) (*Body, error) {
	b, err := ReadBody(r, size)
	if err != nil {
		return nil, err
	}
	return NewBody(b, nil), nil
}

package objstore

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestReadBodyExactOneBuffer(t *testing.T) {
	body := bytes.Repeat([]byte("kwal"), 1<<16)
	// A reader that returns a few bytes at a time, as a socket does.
	got, err := ReadBody(iotest.HalfReader(bytes.NewReader(body)), int64(len(body)))
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("ReadBody: %d bytes, %v", len(got), err)
	}
	if cap(got) != len(body) {
		t.Fatalf("buffer capacity %d for a body of %d: it was regrown (a second copy)", cap(got), len(body))
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := ReadBody(bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 { // the buffer, the test reader, the 1-byte EOF probe: no regrowth
		t.Fatalf("%v allocations per body", allocs)
	}
	for _, tc := range []struct {
		name string
		r    io.Reader
		size int64
	}{
		{"short", bytes.NewReader(body[:10]), 11},
		{"long", bytes.NewReader(body[:12]), 11},
	} {
		if _, err := ReadBody(tc.r, tc.size); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: err %v, want io.ErrUnexpectedEOF", tc.name, err)
		}
	}
	if got, err := ReadBody(bytes.NewReader(body[:7]), -1); err != nil || len(got) != 7 {
		t.Fatalf("unknown size: %d bytes, %v", len(got), err)
	}
	if _, err := ReadBody(iotest.ErrReader(errors.New("reset")), 5); err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a read error must come back as it is: %v", err)
	}
}

func TestBodyReferences(t *testing.T) {
	var released [][]byte
	b := NewBody([]byte("slice"), func(bs []byte) { released = append(released, bs) })
	b.Retain()
	b.Release()
	if len(released) != 0 {
		t.Fatal("released while a reference was held")
	}
	b.Release()
	if len(released) != 1 || string(released[0]) != "slice" {
		t.Fatalf("released %q, want once", released)
	}
	for _, c := range []struct {
		name string
		fn   func()
	}{{"Retain", b.Retain}, {"Release", b.Release}, {"Retain", b.Retain}} {
		name, fn := c.name, c.fn
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s after the last Release did not panic", name)
				}
			}()
			fn()
		}()
	}
}

func TestBufferPoolClasses(t *testing.T) {
	var p BufferPool
	for _, n := range []int{0, 1, 4096, 4097, 96 << 10, 8 << 20, 64 << 20} {
		b := p.Get(n)
		if len(b) != n || cap(b) < n || cap(b)&(cap(b)-1) != 0 {
			t.Fatalf("Get(%d): len %d cap %d, want len %d in a power-of-two class", n, len(b), cap(b), n)
		}
		p.Put(b)
	}
	if b := p.Get(64<<20 + 1); cap(b) != 64<<20+1 {
		t.Fatalf("a buffer above the largest class is not pooled: cap %d", cap(b))
	}
	p.Put(make([]byte, 5000)) // not from Get: dropped, never handed out
	for range 10 {
		if b := p.Get(5000); cap(b) != 8192 {
			t.Fatalf("Get(5000) cap %d: a foreign buffer was pooled", cap(b))
		}
	}
}

func TestReadBodyPooled(t *testing.T) {
	var p BufferPool
	body := bytes.Repeat([]byte("pool"), 5000)
	b, err := ReadBodyPooled(iotest.HalfReader(bytes.NewReader(body)), int64(len(body)), &p)
	if err != nil || !bytes.Equal(b.Bytes(), body) {
		t.Fatalf("ReadBodyPooled: %v", err)
	}
	b.Release()
	// The released buffer is read into again; the bytes are the new body's.
	other := bytes.Repeat([]byte("next"), 5000)
	b2, err := ReadBodyPooled(bytes.NewReader(other), int64(len(other)), &p)
	if err != nil || !bytes.Equal(b2.Bytes(), other) {
		t.Fatalf("second read: %v", err)
	}
	if _, err := ReadBodyPooled(bytes.NewReader(body[:10]), 11, &p); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: %v, want io.ErrUnexpectedEOF", err)
	}
	if b3, err := ReadBodyPooled(bytes.NewReader(body[:7]), -1, &p); err != nil || b3.Len() != 7 {
		t.Fatalf("unknown size: %v", err)
	}
}

package mem_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/objstoretest"
)

func TestAcceptance(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return mem.New() })
}

func BenchmarkLatency(b *testing.B) {
	objstoretest.BenchLatency(b, mem.New())
}

// The acceptance suite with both benchmark options: an arena small enough
// that the suite's larger bodies overflow it, and pooled GETs.
func TestAcceptanceArenaPooled(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store {
		return mem.New(mem.WithArena(1), mem.WithPooledGets())
	})
}

func TestArenaKeepsItsOwnCopy(t *testing.T) {
	ctx := context.Background()
	s := mem.New(mem.WithArena(1))
	body := []byte("hello, arena")
	if err := s.Put(ctx, "k", body, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	copy(body, "XXXXX")
	got, err := s.GetRange(ctx, "k", 0, -1)
	if err != nil || string(got) != "hello, arena" {
		t.Fatalf("got %q, %v: the store kept the caller's slice", got, err)
	}
	st := s.ArenaStats()
	if st.Bytes < 1 || st.Used != int64(len(body)) || st.OverflowBytes != 0 {
		t.Fatalf("stats %+v, want %d bytes used and no overflow", st, len(body))
	}
}

func TestArenaOverflowGoesToTheHeap(t *testing.T) {
	ctx := context.Background()
	s := mem.New(mem.WithArena(1)) // one block
	big := bytes.Repeat([]byte{7}, 40<<20)
	for i, key := range []string{"a", "b"} { // the second does not fit beside the first
		if err := s.Put(ctx, key, big, objstore.PutOptions{}); err != nil {
			t.Fatal(i, err)
		}
	}
	st := s.ArenaStats()
	if st.Used != int64(len(big)) || st.OverflowBytes != int64(len(big)) || st.OverflowObjects != 1 {
		t.Fatalf("stats %+v: want one body in the arena and one overflowed", st)
	}
	for _, key := range []string{"a", "b"} {
		got, err := s.GetRange(ctx, key, 0, -1)
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("%s: %d bytes, %v", key, len(got), err)
		}
	}
}

// A create-only Put of a present key is refused before it takes arena
// memory, and leaves the stored object as it was.
func TestArenaCreateOnlyRefusalTakesNothing(t *testing.T) {
	ctx := context.Background()
	s := mem.New(mem.WithArena(1))
	if err := s.Put(ctx, "k", []byte("first"), objstore.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	err := s.Put(ctx, "k", []byte("second"), objstore.PutOptions{IfNoneMatch: true})
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second create-only put: %v, want ErrExists", err)
	}
	if st := s.ArenaStats(); st.Used != 5 {
		t.Fatalf("arena used %d, want 5", st.Used)
	}
	if got, _ := s.GetRange(ctx, "k", 0, -1); string(got) != "first" {
		t.Fatalf("object %q, want first", got)
	}
}

// Pooled GETs hand out a copy: writing into one body (which callers must
// not do, but a bug might) changes neither the object nor a later GET,
// and a released buffer is reused for the next GET of its size class.
func TestPooledGetsCopy(t *testing.T) {
	ctx := context.Background()
	s := mem.New(mem.WithPooledGets())
	if err := s.Put(ctx, "k", []byte("0123456789"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := s.GetRangeBody(ctx, "k", 2, 5)
	if err != nil || string(b.Bytes()) != "23456" {
		t.Fatalf("body %q, %v", b.Bytes(), err)
	}
	b.Bytes()[0] = 'X'
	b.Release()
	b2, err := s.GetRangeBody(ctx, "k", 2, 5)
	if err != nil || string(b2.Bytes()) != "23456" {
		t.Fatalf("second body %q, %v: the first was not a copy", b2.Bytes(), err)
	}
	b2.Release()
	if (mem.New().ArenaStats() != mem.ArenaStats{}) {
		t.Fatal("a store without an arena reports one")
	}
}

// Close gives the arena back and the store refuses what would read or
// write it; a store without an arena closes too.
func TestCloseRefusesAfterwards(t *testing.T) {
	ctx := context.Background()
	for _, s := range []*mem.Store{mem.New(mem.WithArena(1), mem.WithPooledGets()), mem.New()} {
		if err := s.Put(ctx, "k", []byte("v"), objstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "k2", []byte("v"), objstore.PutOptions{}); err == nil {
			t.Fatal("Put after Close succeeded")
		}
		if _, err := s.GetRange(ctx, "k", 0, -1); err == nil {
			t.Fatal("GetRange after Close succeeded")
		}
		if _, err := s.GetRangeBody(ctx, "k", 0, -1); err == nil {
			t.Fatal("GetRangeBody after Close succeeded")
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}

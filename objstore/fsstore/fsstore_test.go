package fsstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fsstore"
	"github.com/kwal/kwal/objstore/objstoretest"
)

func newStore(t *testing.T) *fsstore.Store {
	s, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAcceptance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return newStore(t) })
}

func TestValidKey(t *testing.T) {
	for key, want := range map[string]bool{
		"a": true, "a/b/c": true, "a.b-c_d": true, "..a": true,
		"": false, "/a": false, "a/": false, "a//b": false, "a/../b": false, "./a": false,
		"..": false, "a\x00b": false, ".kwal-tmp": false, ".kwal-tmp/x": false, `a\b`: false,
	} {
		if got := fsstore.ValidKey(key); got != want {
			t.Errorf("ValidKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestPrefixConflicts(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, "a", []byte("x"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "a/b", []byte("y"), objstore.PutOptions{}); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Fatalf("Put(a/b) over object a: %v, want ErrInvalidKey", err)
	}
	if err := s.Put(ctx, "c/d", []byte("y"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, create := range []bool{false, true} {
		if err := s.Put(ctx, "c", []byte("z"), objstore.PutOptions{IfNoneMatch: create}); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Fatalf("Put(c, create=%v) over directory c: %v, want ErrInvalidKey", create, err)
		}
	}
}

func TestNoTempFilesLeft(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	_ = s.Put(ctx, "k", []byte("1"), objstore.PutOptions{IfNoneMatch: true})
	_ = s.Put(ctx, "k", []byte("2"), objstore.PutOptions{IfNoneMatch: true}) // ErrExists
	_ = s.Put(ctx, "k", []byte("3"), objstore.PutOptions{})
	left, err := os.ReadDir(filepath.Join(s.Root(), ".kwal-tmp"))
	if err != nil || len(left) != 0 {
		t.Fatalf("temp dir holds %d files (%v), want 0", len(left), err)
	}
	p, err := s.List(ctx, objstore.ListOptions{})
	if err != nil || len(p.Objects) != 1 || p.Objects[0].Key != "k" {
		t.Fatalf("List = %+v, %v; want only k", p, err)
	}
}

func TestDeletePrunesEmptyDirs(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, "x/y/z", []byte("1"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "x/y/z"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty parent left behind: %v", err)
	}
	// The key "x" is now free to be an object.
	if err := s.Put(ctx, "x", []byte("2"), objstore.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkLatency(b *testing.B) {
	s, err := fsstore.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	objstoretest.BenchLatency(b, s)
}

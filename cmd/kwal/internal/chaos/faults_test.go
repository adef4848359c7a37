package chaos

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
)

// TestDiskFSFull: a full disk fails the log's append with ENOSPC, and a
// log reopened on the freed disk keeps what was appended before and
// appends again (what the disk-full fault's restart relies on).
func TestDiskFSFull(t *testing.T) {
	dir := t.TempDir()
	d := NewDiskFS(nil)
	l, err := kafkalog.Open(dir, kafkalog.Config{FS: d})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(0, 0, 3, 50, now), 0); err != nil {
		t.Fatal(err)
	}
	d.SetFull(true)
	if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(0, 0, 3, 50, now), 0); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	d.SetFull(false)
	l.Close()
	if d.Failures() == 0 {
		t.Fatal("no write was refused")
	}
	l, err = kafkalog.Open(dir, kafkalog.Config{FS: d})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if end := l.LogEndOffset(); end != 3 {
		t.Fatalf("reopened log ends at %d, want 3", end)
	}
	if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(0, 0, 3, 50, now), 0); err != nil {
		t.Fatalf("append after space was freed and the log reopened: %v", err)
	}
}

func TestStoreGateCuts(t *testing.T) {
	ctx := context.Background()
	var g StoreGate
	s := g.Wrap(mem.New())
	if err := s.Put(ctx, "a", []byte("x"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	g.SetCut(true)
	if _, err := s.GetRange(ctx, "a", 0, 1); !errors.Is(err, ErrStoreCut) {
		t.Fatalf("get across a cut: %v", err)
	}
	if err := s.Put(ctx, "b", []byte("x"), objstore.PutOptions{}); !errors.Is(err, ErrStoreCut) {
		t.Fatalf("put across a cut: %v", err)
	}
	g.SetCut(false)
	if b, err := s.GetRange(ctx, "a", 0, 1); err != nil || string(b) != "x" {
		t.Fatalf("after heal: %q %v", b, err)
	}
}

package objstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fault"
	"github.com/kwal/kwal/objstore/latency"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/objstoretest"
)

func compose(t *testing.T, base objstore.Store, rules []fault.Rule, l *ledger.Ledger) objstore.Store {
	t.Helper()
	f, err := fault.New(base, fault.Config{Seed: 1, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	m, err := latency.Preset("none")
	if err != nil {
		t.Fatal(err)
	}
	lat, err := latency.New(f, m, clock.NewManual(time.Unix(0, 0)), 1)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Wrap(lat, l)
}

// The full decorator stack with faults off keeps the contract.
func TestAcceptanceComposed(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return compose(t, mem.New(), []fault.Rule{{Kind: fault.SlowDown, Prob: 0}}, ledger.New())
	})
}

// Injected errors pass through the outer decorators as *fault.Error and are
// counted as failed requests.
func TestComposedFaultsSurfaceTyped(t *testing.T) {
	l := ledger.New()
	s := compose(t, mem.New(), []fault.Rule{{Kind: fault.SlowDown, Prob: 1, Ops: []fault.Op{fault.OpGet}}}, l)
	ctx := objstore.WithTags(context.Background(), objstore.Tags{Component: "follower", Partition: 0})
	if err := s.Put(ctx, "k", []byte("x"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetRange(ctx, "k", 0, -1)
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Code != 503 || !fe.Retriable {
		t.Fatalf("GetRange error = %v, want *fault.Error 503", err)
	}
	snap := l.Snapshot()
	if got := snap.ByKind[ledger.Get]; got.Requests != 1 || got.Errors != 1 {
		t.Fatalf("ledger GET = %+v", got)
	}
	if got := snap.ByKind[ledger.Put]; got.Requests != 1 || got.Errors != 0 || got.BytesWritten != 1 {
		t.Fatalf("ledger PUT = %+v", got)
	}
}

func TestResolveRange(t *testing.T) {
	for _, tc := range []struct {
		size, off, length, start, end int64
		err                           error
	}{
		{10, 0, -1, 0, 10, nil},
		{10, 3, 4, 3, 7, nil},
		{10, 8, 100, 8, 10, nil},
		{10, 10, 1, 0, 0, objstore.ErrInvalidRange},
		{10, -3, 0, 7, 10, nil},
		{10, -30, 0, 0, 10, nil},
		{10, 2, 0, 2, 2, nil},
		{0, 0, -1, 0, 0, nil},
		{0, 0, 5, 0, 0, nil},
		{0, -1, 0, 0, 0, nil},
		{0, 1, 1, 0, 0, objstore.ErrInvalidRange},
	} {
		s, e, err := objstore.ResolveRange(tc.size, tc.off, tc.length)
		if !errors.Is(err, tc.err) || (err == nil && (s != tc.start || e != tc.end)) {
			t.Errorf("ResolveRange(%d, %d, %d) = %d, %d, %v; want %d, %d, %v", tc.size, tc.off, tc.length, s, e, err, tc.start, tc.end, tc.err)
		}
	}
}

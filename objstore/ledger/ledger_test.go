package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/objstoretest"
)

func TestAcceptance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return ledger.Wrap(mem.New(), ledger.New()) })
}

func TestRecordsRequestsByTags(t *testing.T) {
	l := ledger.New()
	s := ledger.Wrap(mem.New(), l)
	comb := objstore.WithTags(context.Background(), objstore.Tags{Component: "combiner", Partition: -1, Rack: "az1"})
	fol := objstore.WithTags(context.Background(), objstore.Tags{Component: "follower", Topic: "t", Partition: 3, Rack: "az2"})

	if err := s.Put(comb, "obj", make([]byte, 1000), objstore.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(comb, "obj", make([]byte, 1000), objstore.PutOptions{IfNoneMatch: true}); !errors.Is(err, objstore.ErrExists) {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.GetRange(fol, "obj", 100, 200); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = s.Head(context.Background(), "missing")
	_ = s.Delete(comb, "obj")
	_, _ = s.List(comb, objstore.ListOptions{})

	snap := l.Snapshot()
	want := map[ledger.Kind]ledger.Totals{
		ledger.Put:    {Requests: 2, Errors: 1, BytesWritten: 2000},
		ledger.Get:    {Requests: 3, BytesRead: 600},
		ledger.Head:   {Requests: 1, Errors: 1},
		ledger.Delete: {Requests: 1},
		ledger.List:   {Requests: 1},
	}
	for k, w := range want {
		if got := snap.ByKind[k]; got != w {
			t.Errorf("ByKind[%s] = %+v, want %+v", k, got, w)
		}
	}
	if got := snap.ByComponent["follower"]; got != (ledger.Totals{Requests: 3, BytesRead: 600}) {
		t.Errorf("ByComponent[follower] = %+v", got)
	}
	var found bool
	for _, r := range snap.Requests {
		if r.Kind == ledger.Get {
			found = true
			if r.Component != "follower" || r.Topic != "t" || r.Partition != 3 || r.Rack != "az2" {
				t.Errorf("GET row = %+v", r)
			}
		}
		if r.Kind == ledger.Head && r.Partition != -1 {
			t.Errorf("untagged request row = %+v, want partition -1", r)
		}
	}
	if !found {
		t.Error("no GET row")
	}
}

func TestTransfersAndSub(t *testing.T) {
	l := ledger.New()
	tp := ledger.TopicPartition{Topic: "t", Partition: 0}
	l.RecordTransfer("classic-follower", "az1", "az2", tp, 500)
	before := l.Snapshot()
	l.RecordTransfer("classic-follower", "az1", "az2", tp, 300)
	l.RecordTransfer("classic-follower", "az1", "az1", tp, 70)
	l.RecordTransfer("produce", "", "az1", tp, 5) // unknown rack counts as crossing
	after := l.Snapshot()
	if after.CrossRackBytes != 805 || after.SameRackBytes != 70 {
		t.Fatalf("cross %d same %d, want 805 and 70", after.CrossRackBytes, after.SameRackBytes)
	}
	d := after.Sub(before)
	if d.CrossRackBytes != 305 || d.SameRackBytes != 70 || len(d.Transfers) != 3 {
		t.Fatalf("Sub = %+v", d)
	}
	b, err := json.Marshal(after)
	if err != nil {
		t.Fatal(err)
	}
	var back ledger.Snapshot
	if err := json.Unmarshal(b, &back); err != nil || back.CrossRackBytes != 805 || len(back.Transfers) != 3 {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
}

func TestConcurrentRecording(t *testing.T) {
	l := ledger.New()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tags := objstore.Tags{Component: fmt.Sprint("c", g%2), Partition: int32(g % 3)}
			for range 1000 {
				l.RecordRequest(ledger.Get, tags, 0, 10, false)
				l.RecordTransfer("x", "a", "b", ledger.TopicPartition{Partition: int32(g)}, 1)
			}
		}()
	}
	wg.Wait()
	s := l.Snapshot()
	if got := s.ByKind[ledger.Get]; got.Requests != 8000 || got.BytesRead != 80000 {
		t.Fatalf("ByKind[GET] = %+v", got)
	}
	if s.CrossRackBytes != 8000 {
		t.Fatalf("CrossRackBytes = %d", s.CrossRackBytes)
	}
}

func BenchmarkRecordRequest(b *testing.B) {
	for _, keys := range []int{1, 1000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			l := ledger.New()
			tags := make([]objstore.Tags, keys)
			for i := range tags {
				tags[i] = objstore.Tags{Component: "follower", Topic: "t", Partition: int32(i), Rack: "az1"}
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					l.RecordRequest(ledger.Get, tags[i%keys], 0, 16384, false)
					i++
				}
			})
		})
	}
}

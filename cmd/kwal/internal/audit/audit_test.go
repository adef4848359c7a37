package audit

import (
	"context"
	"testing"
	"time"

	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
)

// put stores one combined object with one slice of tp and returns its key
// and metadata event (not applied).
func put(t *testing.T, s objstore.Store, n int, tp metadata.TopicPartition) (string, *metadata.ObjectMetadata, []byte) {
	t.Helper()
	data := kafkalogtest.MakeBatchN(int64(n*10), 1, 10, 100, 1)
	obj, entries, err := objformat.Encode([]objformat.Input{{TopicPartition: tp, LeaderEpoch: 1, BaseOffset: int64(n * 10), LastOffset: int64(n*10 + 9), Data: data}}, metadata.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	var id metadata.ObjectID
	id[15] = byte(n)
	key := combiner.Key("", 1, time.Unix(1700000000, 0), id)
	if err := s.Put(context.Background(), key, obj, objstore.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	return key, &metadata.ObjectMetadata{ID: id, Key: key, BrokerID: 1, State: metadata.CopySegmentFinished, EventTimestampMs: 1, Entries: entries}, obj
}

func TestAuditFindsEveryKind(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	st := metadata.NewState()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	apply := func(ev metadata.Event) {
		if err := st.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	_, good, _ := put(t, s, 1, tp)
	apply(good)
	orphan, _, _ := put(t, s, 2, tp)
	// missing: metadata for an object never stored.
	_, missing, _ := put(t, mem.New(), 3, tp)
	apply(missing)
	// mismatch: metadata names a different CRC.
	_, mism, _ := put(t, s, 4, tp)
	mism.Entries[0].CRC32C ^= 1
	apply(mism)
	// corrupt object: a truncated copy under a WAL key.
	ckey, corr, raw := put(t, mem.New(), 5, tp)
	if err := s.Put(ctx, ckey, raw[:len(raw)-3], objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	apply(corr)
	// corrupt slice: footer intact, one slice byte flipped.
	skey, sl, raw6 := put(t, mem.New(), 6, tp)
	bad := append([]byte(nil), raw6...)
	bad[sl.Entries[0].Position+20] ^= 0xff
	if err := s.Put(ctx, skey, bad, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	apply(sl)
	// deleted but still stored.
	_, del, _ := put(t, s, 7, tp)
	apply(del)
	for _, state := range []metadata.SegmentState{metadata.DeleteSegmentStarted, metadata.DeleteSegmentFinished} {
		d := *del
		d.State = state
		apply(&d)
	}

	rep, err := Run(ctx, Config{Store: s, Metadata: st, VerifySlices: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{Orphan: 1, Missing: 1, EntryMismatch: 1, CorruptObject: 1, CorruptSlice: 1, DeletedPresent: 1}
	for k, n := range want {
		if rep.Counts[k] != n {
			t.Errorf("%s: %d findings, want %d; report %+v", k, rep.Counts[k], n, rep.Findings)
		}
	}
	if len(rep.Findings) != 6 {
		t.Errorf("%d findings, want 6: %+v", len(rep.Findings), rep.Findings)
	}
	for _, f := range rep.Findings {
		if f.Kind == Orphan && f.Key != orphan {
			t.Errorf("orphan %s, want %s", f.Key, orphan)
		}
	}
	// Without metadata only the objects themselves are judged.
	rep, err = Run(ctx, Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if rep.MetadataChecked || len(rep.Findings) != 1 || rep.Findings[0].Kind != CorruptObject {
		t.Fatalf("objects alone: %+v", rep)
	}
}

func TestCleanStoreHasNoFindings(t *testing.T) {
	s := mem.New()
	st := metadata.NewState()
	for n := 1; n <= 3; n++ {
		_, ev, _ := put(t, s, n, metadata.TopicPartition{Topic: "t", Partition: int32(n)})
		if err := st.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Run(context.Background(), Config{Store: s, Metadata: st, VerifySlices: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Objects != 3 || rep.Slices != 3 {
		t.Fatalf("clean store: %+v", rep)
	}
}

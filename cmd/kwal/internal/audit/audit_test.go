package audit

import (
	"context"
	"strings"
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

// Dead ranges: an object whose every entry a new leader's dead range
// killed is a note while still stored and fine once gone; a live object
// missing from the store is still a finding.
func TestAuditAccountsForDeadRanges(t *testing.T) {
	s := mem.New()
	st := metadata.NewState()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	apply := func(ev metadata.Event) {
		if err := st.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	_, live, _ := put(t, s, 1, tp) // offsets 10–19, epoch 1
	apply(live)
	_, liveMissing, _ := put(t, mem.New(), 2, tp) // 20–29, never stored
	apply(liveMissing)
	deadKey, deadStored, _ := put(t, s, 5, tp) // 50–59
	apply(deadStored)
	_, deadGone, _ := put(t, mem.New(), 6, tp) // 60–69, its store lost
	apply(deadGone)
	// Epoch 2's leader continued at 50: epoch 1 is dead from 50 on.
	apply(&metadata.DeadRange{TopicPartition: tp, LeaderEpoch: 2, StartOffset: 50, BrokerID: 2})

	rep, err := Run(context.Background(), Config{Store: s, Metadata: st, VerifySlices: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Kind != Missing || rep.Findings[0].Key != liveMissing.Key {
		t.Fatalf("findings %+v, want only the live missing object", rep.Findings)
	}
	if len(rep.Notes) != 1 || rep.Notes[0].Kind != DeadAwaitingDeletion || rep.Notes[0].Key != deadKey {
		t.Fatalf("notes %+v, want %s awaiting deletion", rep.Notes, deadKey)
	}
	if rep.DeadSlices != 2 || rep.DeadGone != 1 {
		t.Fatalf("dead slices %d, dead gone %d; want 2 and 1", rep.DeadSlices, rep.DeadGone)
	}
	// Without the dead range the same store has two missing objects.
	st2 := metadata.NewState()
	for _, ev := range []metadata.Event{live, liveMissing, deadStored, deadGone} {
		if err := st2.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = Run(context.Background(), Config{Store: s, Metadata: st2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts[Missing] != 2 || len(rep.Notes) != 0 {
		t.Fatalf("without the dead range: %+v", rep)
	}
}

// With one store per rack, an audit of one store leaves out the objects the
// metadata places in the others instead of calling them missing.
func TestAuditOneStoreOfMany(t *testing.T) {
	az1, az2 := mem.New(), mem.New()
	st := metadata.NewState()
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	_, a, _ := put(t, az1, 1, tp)
	a.Bucket = "az1"
	_, b, _ := put(t, az2, 2, tp)
	b.Bucket = "az2"
	for _, ev := range []metadata.Event{a, b} {
		if err := st.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Run(context.Background(), Config{Store: az1, StoreID: "az1", Metadata: st})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.MetadataObjects != 1 || rep.OtherStores != 1 {
		t.Fatalf("audit of az1: %+v", rep)
	}
	rep, err = Run(context.Background(), Config{Store: az1, StoreID: "az2", Metadata: st})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts[Missing] != 1 || rep.Counts[Orphan] != 1 {
		t.Fatalf("az1 audited as az2 should show az2's object missing and az1's orphaned: %+v", rep)
	}
}

// TestAuditAcceptsPartialObjects: the combiner publishes an object without
// the slices it gave up for their own partition. Such an object is not a
// leak or a mismatch: its unpublished slices are counted with their bytes
// as dead bytes. A metadata entry the footer lacks is still a mismatch,
// and one whose published entries are all dead is a note, not a finding.
func TestAuditAcceptsPartialObjects(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	st := metadata.NewState()
	a, b, c := metadata.TopicPartition{Topic: "a"}, metadata.TopicPartition{Topic: "b"}, metadata.TopicPartition{Topic: "c"}
	putMany := func(n byte, tps ...metadata.TopicPartition) (string, *metadata.ObjectMetadata) {
		t.Helper()
		var in []objformat.Input
		for _, tp := range tps {
			in = append(in, objformat.Input{TopicPartition: tp, LeaderEpoch: 1, BaseOffset: 0, LastOffset: 9, Data: kafkalogtest.MakeBatchN(0, 1, 10, 100, 1)})
		}
		obj, entries, err := objformat.Encode(in, metadata.CodecNone)
		if err != nil {
			t.Fatal(err)
		}
		var id metadata.ObjectID
		id[15] = n
		key := combiner.Key("", 1, time.Unix(1700000000, 0), id)
		if err := s.Put(ctx, key, obj, objstore.PutOptions{IfNoneMatch: true}); err != nil {
			t.Fatal(err)
		}
		return key, &metadata.ObjectMetadata{ID: id, Key: key, BrokerID: 1, State: metadata.CopySegmentFinished, EventTimestampMs: 1, Entries: entries}
	}
	apply := func(ev metadata.Event) {
		t.Helper()
		if err := st.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	// b's slice was given up: the object is published with a's and c's.
	_, partial := putMany(1, a, b, c)
	bLen := partial.Entries[1].Length
	partial.Entries = []metadata.SliceEntry{partial.Entries[0], partial.Entries[2]}
	for _, p := range metadata.Split(partial, 8) {
		apply(p)
	}
	rep, err := Run(ctx, Config{Store: s, Metadata: st, VerifySlices: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.UnpublishedSlices != 1 || rep.DeadBytes != bLen || rep.Slices != 3 {
		t.Fatalf("partial object: %+v; want no findings, 1 unpublished slice of %d dead bytes", rep, bLen)
	}
	var text strings.Builder
	WriteText(&text, rep)
	if !strings.Contains(text.String(), "1 slices of published objects are unpublished") {
		t.Errorf("text report does not say so:\n%s", text.String())
	}

	// Metadata naming a slice the footer does not hold is still a mismatch.
	_, wrong := putMany(2, a)
	wrong.Entries = append(wrong.Entries, metadata.SliceEntry{TopicPartition: b, LeaderEpoch: 1, BaseOffset: 0, LastOffset: 9, Position: 5, Length: 7})
	for _, p := range metadata.Split(wrong, 8) {
		apply(p)
	}
	rep, err = Run(ctx, Config{Store: s, Metadata: st})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts[EntryMismatch] != 1 || len(rep.Findings) != 1 {
		t.Fatalf("an entry the footer lacks: %+v, want one entry-mismatch", rep.Findings)
	}
}

// TestAuditPartialObjectOfDeadEntries: an object published without its
// given-up slice, whose published entries a dead range then killed, is a
// note while stored and fine once gone; its bytes are all dead.
func TestAuditPartialObjectOfDeadEntries(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	st := metadata.NewState()
	tp := metadata.TopicPartition{Topic: "t"}
	key, ev, _ := put(t, s, 1, tp) // entry [10, 19] of epoch 1
	// Store, under the same key, an object that also holds a slice of
	// another partition, left unpublished.
	in := []objformat.Input{
		{TopicPartition: tp, LeaderEpoch: 1, BaseOffset: 10, LastOffset: 19, Data: kafkalogtest.MakeBatchN(10, 1, 10, 100, 1)},
		{TopicPartition: metadata.TopicPartition{Topic: "u"}, LeaderEpoch: 1, BaseOffset: 0, LastOffset: 9, Data: kafkalogtest.MakeBatchN(0, 1, 10, 100, 1)},
	}
	obj, entries, err := objformat.Encode(in, metadata.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, key, obj, objstore.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	ev.Entries = entries[:1]
	if err := st.Apply(ev); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(&metadata.DeadRange{TopicPartition: tp, LeaderEpoch: 2, StartOffset: 5, BrokerID: 2, EventTimestampMs: 2}); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, Config{Store: s, Metadata: st})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Counts[DeadAwaitingDeletion] != 1 || rep.UnpublishedSlices != 1 || rep.DeadBytes != entries[0].Length+entries[1].Length {
		t.Fatalf("stored: %+v; want a dead-awaiting-deletion note and all its slice bytes dead", rep)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	rep, err = Run(ctx, Config{Store: s, Metadata: st})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.DeadGone != 1 {
		t.Fatalf("gone: %+v; want no findings, one dead object gone", rep)
	}
}

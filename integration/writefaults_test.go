package integration

import (
	"context"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fault"
	"github.com/kwal/kwal/objstore/latency"
	"github.com/kwal/kwal/remotewal"
)

// TestWritePathUnderStoreFaults repeats the write-path check with the
// store behind the seeded fault decorator (500s, 503 SlowDown, PUTs that
// land but answer 500) and the S3 Express latency model: retries happen,
// and the metadata still names every byte once — no metadata for an object
// that is not there, no object published twice.
func TestWritePathUnderStoreFaults(t *testing.T) {
	for _, st := range stores() {
		t.Run("store="+st.name, func(t *testing.T) {
			model, err := latency.Preset("s3express")
			if err != nil {
				t.Fatal(err)
			}
			slow, err := latency.New(st.open(t), model, clock.Real{}, 11)
			if err != nil {
				t.Fatal(err)
			}
			faulty, err := fault.New(slow, fault.Config{Seed: 1176, Rules: []fault.Rule{
				{Kind: fault.SlowDown, Ops: []fault.Op{fault.OpPut}, Prob: 0.10},
				{Kind: fault.InternalError, Ops: []fault.Op{fault.OpPut}, Prob: 0.05},
				{Kind: fault.AmbiguousPut, Ops: []fault.Op{fault.OpPut}, Prob: 0.05},
			}})
			if err != nil {
				t.Fatal(err)
			}
			writeAndVerify(t, faulty)
			stats := faulty.Stats()
			t.Logf("injected: %+v", stats)
			if stats.SlowDowns+stats.InternalErrors+stats.AmbiguousPuts == 0 {
				t.Fatal("no fault was injected; the test proved nothing")
			}
		})
	}
}

// TestOrphanAfterCrashBetweenPutAndPublish stores a combined object the way
// a broker that crashed right after its PUT leaves it (no metadata), next to
// objects whose metadata was published, and runs the orphan collector with
// live metadata: the orphan survives its grace period, then goes; published
// objects stay.
func TestOrphanAfterCrashBetweenPutAndPublish(t *testing.T) {
	for _, st := range stores() {
		t.Run("store="+st.name, func(t *testing.T) {
			store := st.open(t)
			state := writeAndVerify(t, store)
			ctx := context.Background()

			obj, _, err := objformat.Encode([]objformat.Input{{
				TopicPartition: metadata.TopicPartition{Topic: "crashed", Partition: 0},
				LeaderEpoch:    3, BaseOffset: 0, LastOffset: 0,
				Data: mustBatch(t),
			}}, metadata.CodecNone)
			if err != nil {
				t.Fatal(err)
			}
			orphan := combiner.Key("", 9, time.Now(), metadata.ObjectID{0x0b, 0xad, 0xc0, 0xde, 6: 0x40, 8: 0x80, 15: 1})
			if err := store.Put(ctx, orphan, obj, objstore.PutOptions{IfNoneMatch: true}); err != nil {
				t.Fatal(err)
			}
			before := countObjects(t, store)

			clk := clock.NewManual(time.Now())
			oc, err := combiner.NewOrphanCollector(combiner.OrphanConfig{
				Store: store, Refs: remotewal.StateReferences{State: state},
				Grace: 10 * time.Minute, UploadTimeout: time.Minute, Clock: clk, Logger: testLogger(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			deleted, err := oc.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(deleted) != 0 {
				t.Fatalf("deleted %v inside the grace period", deleted)
			}
			clk.Advance(11 * time.Minute)
			deleted, err = oc.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(deleted) != 1 || deleted[0] != orphan {
				t.Fatalf("deleted %v, want only the orphan %s", deleted, orphan)
			}
			if _, err := store.Head(ctx, orphan); err == nil {
				t.Fatal("orphan still stored")
			}
			if after := countObjects(t, store); after != before-1 {
				t.Fatalf("%d objects after collection, want %d: a published object was deleted", after, before-1)
			}
		})
	}
}

func countObjects(t *testing.T, s objstore.Store) int {
	t.Helper()
	n := 0
	if err := objstore.ListAll(context.Background(), s, "", func(objstore.ObjectInfo) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

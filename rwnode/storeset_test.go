package rwnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/kwal/kwal/objstore/storeurl"
)

func TestStoreSetResolves(t *testing.T) {
	def, az1 := mem.New(), mem.New()
	opened := map[string]int{}
	set := NewStoreSet(map[string]objstore.Store{"": def, "az1": az1}, "mem://{rack}", func(_ context.Context, u string) (objstore.Store, error) {
		opened[u]++
		return mem.New(), nil
	})
	if got, _ := set.Store("az1"); got != az1 {
		t.Fatal("az1 not its configured store")
	}
	if got, _ := set.Store(""); got != def {
		t.Fatal("the default store")
	}
	a, err := set.Store("az9")
	b, _ := set.Store("az9")
	if err != nil || a != b || opened["mem://az9"] != 1 {
		t.Fatalf("template store: %v, opened %v", err, opened)
	}
	if set.IDFor("az1") != "az1" || set.IDFor("az7") != "az7" || set.IDFor("") != "" {
		t.Fatal("IDFor")
	}
	// Without a template an unconfigured rack uploads to the default and is
	// unknown to readers.
	fixed := NewStoreSet(map[string]objstore.Store{"": def, "az1": az1}, "", nil)
	if fixed.IDFor("az2") != "" {
		t.Fatal("unconfigured rack should upload to the default store")
	}
	var use *UnknownStoreError
	if _, err := fixed.Store("az2"); !errors.Is(err, ErrUnknownStore) || !errors.As(err, &use) || use.ID != "az2" {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := (oneStore{def}).Store("az1"); !errors.Is(err, ErrUnknownStore) {
		t.Fatalf("one store, named id: %v", err)
	}
}

func TestStoreRouterRoutesByID(t *testing.T) {
	ctx := context.Background()
	def, az1 := mem.New(), mem.New()
	r := &storeRouter{stores: NewStoreSet(map[string]objstore.Store{"": def, "az1": az1}, "", nil), log: quietLogger()}
	for _, c := range []struct {
		id, key string
		want    objstore.Store
	}{{"", "wal/a", def}, {"az1", "wal/a", az1}} {
		k := routeKey(c.id, c.key)
		if id, key := splitRouteKey(k); id != c.id || key != c.key {
			t.Fatalf("split(%q) = %q %q", k, id, key)
		}
		if err := r.Put(ctx, k, []byte(c.id+"!"), objstore.PutOptions{IfNoneMatch: true}); err != nil {
			t.Fatal(err)
		}
		got, err := c.want.GetRange(ctx, c.key, 0, -1)
		if err != nil || string(got) != c.id+"!" {
			t.Fatalf("%q in its store: %q %v", c.id, got, err)
		}
		if got, err := r.GetRange(ctx, k, 0, -1); err != nil || string(got) != c.id+"!" {
			t.Fatalf("routed read %q: %q %v", k, got, err)
		}
		// The follower's lent-body read takes the same route.
		if b, err := objstore.GetBody(ctx, r, k, 0, -1); err != nil || string(b.Bytes()) != c.id+"!" {
			t.Fatalf("routed body %q: %v", k, err)
		} else {
			b.Release()
		}
	}
	if _, err := r.GetRange(ctx, routeKey("az9", "wal/a"), 0, -1); !errors.Is(err, ErrUnknownStore) {
		t.Fatalf("unknown store id: %v", err)
	}
	if _, err := objstore.GetBody(ctx, r, routeKey("az9", "wal/a"), 0, -1); !errors.Is(err, ErrUnknownStore) {
		t.Fatalf("unknown store id, body: %v", err)
	}
}

// downStore is a store of an AZ that can be lost: every request fails.
type downStore struct {
	objstore.Store
	down *atomic.Bool
}

var errStoreDown = errors.New("test: the AZ's store is down")

func (s downStore) Put(ctx context.Context, k string, b []byte, o objstore.PutOptions) error {
	if s.down.Load() {
		return errStoreDown
	}
	return s.Store.Put(ctx, k, b, o)
}

func (s downStore) GetRange(ctx context.Context, k string, off, n int64) ([]byte, error) {
	if s.down.Load() {
		return nil, errStoreDown
	}
	return s.Store.GetRange(ctx, k, off, n)
}

func (s downStore) Head(ctx context.Context, k string) (objstore.ObjectInfo, error) {
	if s.down.Load() {
		return objstore.ObjectInfo{}, errStoreDown
	}
	return s.Store.Head(ctx, k)
}

func (s downStore) Delete(ctx context.Context, k string) error {
	if s.down.Load() {
		return errStoreDown
	}
	return s.Store.Delete(ctx, k)
}

func (s downStore) List(ctx context.Context, o objstore.ListOptions) (objstore.Page, error) {
	if s.down.Load() {
		return objstore.Page{}, errStoreDown
	}
	return s.Store.List(ctx, o)
}

func countKeys(t *testing.T, s objstore.Store) int {
	t.Helper()
	n := 0
	if err := objstore.ListAll(context.Background(), s, "", func(objstore.ObjectInfo) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRemoteWALStorePerRack: each leader uploads to its own AZ's store and
// names it; followers read from it; a follower without that AZ's store in
// its config falls back to the leader. Then the AZ of the leader is lost,
// broker and store at once: with acks=all nothing acknowledged is lost, and
// the new leader in another AZ uploads to its own store. Runs against mem
// stores and, under scripts/test-env.sh, two versitygw buckets.
func TestRemoteWALStorePerRack(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		runStorePerRack(t, func(t *testing.T, rack string) objstore.Store { return mem.New() })
	})
	t.Run("s3-versitygw", func(t *testing.T) {
		env := objstoretest.S3Env(t)
		run := strings.ToLower(strings.TrimSuffix(objstoretest.RandomPrefix(), "/"))
		// One bucket per AZ, through the {rack} template of remote.wal.storage.url.
		// Credentials come from KWAL_S3_* (storeurl refuses them in URLs).
		tmpl := fmt.Sprintf("s3://kwal-{rack}/%s?endpoint=%s&path_style=true&create_bucket=true&region=us-east-1",
			run, env.Endpoint)
		runStorePerRack(t, func(t *testing.T, rack string) objstore.Store {
			s, err := storeurl.Open(context.Background(), strings.ReplaceAll(tmpl, RackTemplate, rack))
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	if os.Getenv("KWAL_S3_ENDPOINT") == "" {
		t.Log("s3-versitygw SKIPPED: run under scripts/test-env.sh")
	}
}

func runStorePerRack(t *testing.T, open func(t *testing.T, rack string) objstore.Store) {
	racks := []string{"az1", "az2", "az3"}
	stores := map[string]objstore.Store{}
	var az1Down atomic.Bool
	for _, r := range racks {
		stores[r] = open(t, r)
	}
	stores["az1"] = downStore{Store: stores["az1"], down: &az1Down}
	c := startRemoteWALClusterWith(t, racks, nil, func(rc *RemoteWALReplicatorConfig) {
		mine := map[string]objstore.Store{}
		for r, s := range stores {
			if rc.BrokerID == 3 && r == "az1" {
				continue // B3 is not told of az1's store
			}
			mine[r] = s
		}
		rc.Store = nil
		rc.Stores = NewStoreSet(mine, "", nil)
	})
	topic := "racks"
	tp, _ := ledByB1(t, c, topic)
	b1, b2, b3 := c.broker(1), c.broker(2), c.broker(3)
	all := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const n = 20
	for i := range n {
		produceOne(t, all, topic, string(value(i)))
	}
	waitFor(t, "followers at the leader's end", 20*time.Second, func() bool {
		return logEnd(b2, tp) == n && logEnd(b3, tp) == n
	})
	if countKeys(t, stores["az1"]) == 0 || countKeys(t, stores["az2"]) != 0 || countKeys(t, stores["az3"]) != 0 {
		t.Fatalf("B1 (az1) uploaded to az1 %d, az2 %d, az3 %d objects", countKeys(t, stores["az1"]), countKeys(t, stores["az2"]), countKeys(t, stores["az3"]))
	}
	for _, s := range c.rep(2).State().Slices(mtp(tp), 0) {
		if s.Bucket != "az1" {
			t.Fatalf("slice [%d, %d] names store %q, want az1", s.BaseOffset, s.LastOffset, s.Bucket)
		}
	}
	// The leader's ledger records the fallback bytes it served, by rack.
	fallbackTo := func(rack string) (n int64) {
		for _, r := range c.ledgers[0].Snapshot().Transfers {
			if r.Component == "fallback" && r.ToRack == rack {
				n += r.Bytes
			}
		}
		return n
	}
	if fallbackTo("az3") == 0 {
		t.Fatal("B3, without az1's store, did not fall back to the leader")
	}
	if got := fallbackTo("az2"); got != 0 {
		t.Fatalf("B2 read %d bytes from the leader, not from az1's store", got)
	}

	// az1 is lost: B1 and its store at once.
	az1Down.Store(true)
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	ps, err := c.ctrl.ElectLeader(tp, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ctrl.AlterISR(tp, ps.LeaderEpoch, ps.PartitionEpoch, []int32{2, 3}); err != nil {
		t.Fatal(err)
	}
	for i := n; i < 2*n; i++ {
		produceOne(t, all, topic, string(value(i)))
	}
	waitFor(t, "B3 to follow B2", 20*time.Second, func() bool { return logEnd(b3, tp) == 2*n })
	if countKeys(t, stores["az2"]) == 0 {
		t.Fatal("the new leader in az2 uploaded nothing to az2's store")
	}
	for _, b := range []*broker.Broker{b2, b3} {
		l, _ := b.PartitionLog(tp)
		recs := logRecords(t, l)
		if len(recs) != 2*n {
			t.Fatalf("broker %d holds %d records, want %d", b.Info().ID, len(recs), 2*n)
		}
		for _, r := range recs {
			if r.value != string(value(int(r.offset))) {
				t.Fatalf("broker %d offset %d holds %q", b.Info().ID, r.offset, r.value)
			}
		}
	}
	newer := 0
	for _, s := range c.rep(3).State().Slices(mtp(tp), n) {
		if s.Bucket != "az2" {
			t.Fatalf("new leader's slice [%d, %d] names store %q, want az2", s.BaseOffset, s.LastOffset, s.Bucket)
		}
		newer++
	}
	if newer == 0 {
		t.Fatal("no slices of the new leader indexed")
	}
}

func TestOpenRemoteWALPartsPerRack(t *testing.T) {
	dir := t.TempDir()
	open := func(rw broker.RemoteWALConfig, rack string) (*RemoteWALParts, error) {
		rw.SystemEnable = true
		rw.MetadataBootstrapServers = "127.0.0.1:1" // no embedded Kafka
		cfg := broker.Config{BrokerID: 1, Rack: rack, LogDir: t.TempDir(), Controller: broker.NewMemController(nil, 1), RemoteWAL: rw}
		return OpenRemoteWALParts(context.Background(), &cfg, nil)
	}
	// A template: every rack's store opens on first use.
	parts, err := open(broker.RemoteWALConfig{StorageURL: "file://" + dir + "/{rack}"}, "az1")
	if err != nil {
		t.Fatal(err)
	}
	if parts.Stores == nil || parts.Stores.IDFor("az1") != "az1" {
		t.Fatalf("template: stores %+v", parts.Stores)
	}
	az2, err := parts.Stores.Store("az2")
	if err != nil {
		t.Fatal(err)
	}
	if err := az2.Put(context.Background(), "wal/x", []byte("x"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/az2/wal/x"); err != nil {
		t.Fatalf("az2's object not under its directory: %v", err)
	}
	if _, err := open(broker.RemoteWALConfig{StorageURL: "file://" + dir + "/{rack}"}, ""); !errors.Is(err, ErrUnknownStore) {
		t.Fatalf("a template without broker.rack: %v", err)
	}
	// Fixed stores per rack, plus the default.
	parts, err = open(broker.RemoteWALConfig{StorageURL: "mem://", RackStorageURLs: map[string]string{"az1": "file://" + dir + "/one"}}, "az2")
	if err != nil {
		t.Fatal(err)
	}
	if parts.Stores.IDFor("az2") != "" || parts.Stores.IDFor("az1") != "az1" {
		t.Fatal("a rack without a store uploads to the default")
	}
	if _, err := parts.Stores.Store("az3"); !errors.Is(err, ErrUnknownStore) {
		t.Fatalf("unconfigured rack: %v", err)
	}
	// Without per-rack keys nothing changes: one store.
	if parts, err = open(broker.RemoteWALConfig{StorageURL: "mem://"}, "az1"); err != nil || parts.Stores != nil || parts.Store == nil {
		t.Fatalf("one store: %+v %v", parts, err)
	}
}

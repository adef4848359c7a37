package localcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/internal/kclient"
	"github.com/kwal/kwal/objstore/ledger"
)

// startWithTopic starts a cluster of cfg (in a temporary directory, by
// default no latency model and a 5 ms combiner interval) and creates an RF-3 remotewal
// topic; the client produces to it with acks=all.
func startWithTopic(t *testing.T, ctx context.Context, cfg Config, topic string, partitions int32, opts ...kgo.Opt) (*Cluster, *kgo.Client) {
	t.Helper()
	cfg.Dir = t.TempDir()
	if cfg.LatencyModel == "" {
		cfg.LatencyModel = "none"
	}
	if cfg.RemoteWAL.CombinerTaskInterval == 0 {
		cfg.RemoteWAL.CombinerTaskInterval = 5 * time.Millisecond
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	lc, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lc.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(lc.Bootstrap()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if err := kclient.CreateTopic(ctx, cl, topic, partitions, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"}, false); err != nil {
		t.Fatal(err)
	}
	return lc, cl
}

// The cluster kwal demo, the benches and kwal broker run (rwnode's
// production assembly over a ledger-wrapped store) must count every PUT
// of a combined object as the combiner's: a request with another
// component, or none, means a writer that does not tag its requests is
// wired in, and the cost model would misattribute them.
func TestCombinerPutsAreTaggedInProductionAssembly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lc, cl := startWithTopic(t, ctx, Config{StorageURL: "mem://"}, "tagged", 2)
	// acks=all in remotewal mode answers only after every follower read
	// the bytes back from the store, so each record below was PUT first.
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var puts int64
	for i, l := range lc.Ledgers {
		for _, r := range l.Snapshot().Requests {
			if r.Kind != ledger.Put {
				continue
			}
			if r.Component != combiner.Component {
				t.Errorf("broker %d: %d PUTs recorded with component %q, want %q", i+1, r.Requests, r.Component, combiner.Component)
			}
			puts += r.Requests
		}
	}
	if puts == 0 {
		t.Fatal("no PUT reached the ledger: the store is not ledger-wrapped, or nothing was uploaded")
	}
}

// With a store per rack every leader uploads to its own rack's store and
// names it: each object's bucket is its uploader's rack, and each rack's
// store holds objects.
func TestStorePerRack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lc, cl := startWithTopic(t, ctx, Config{StorePerRack: true, Racks: []string{"az1", "az2", "az1"}}, "racks", 4,
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 40 {
		r := &kgo.Record{Value: fmt.Appendf(nil, "v%d", i), Partition: int32(i % 4)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rackOf := map[int32]string{}
	for _, b := range lc.Brokers {
		rackOf[b.Info().ID] = b.Info().Rack
	}
	objects := lc.Replicators[0].State().Objects()
	if len(objects) == 0 {
		t.Fatal("no objects in the metadata")
	}
	byRack := map[string]int{}
	for _, o := range objects {
		if o.Bucket != rackOf[o.BrokerID] {
			t.Fatalf("object %s of broker %d (rack %s) names store %q", o.Key, o.BrokerID, rackOf[o.BrokerID], o.Bucket)
		}
		if _, err := lc.RackStores[o.Bucket].Head(ctx, o.Key); err != nil {
			t.Fatalf("object %s not in its rack's store: %v", o.Key, err)
		}
		byRack[o.Bucket]++
	}
	if len(byRack) != 2 {
		t.Fatalf("objects by rack %v: want uploads in both racks", byRack)
	}
}

// A restarted broker binds the ports of its first life, as a Kafka broker
// restarts on its static listeners: a client that knows the cluster only
// by addresses it saw before every broker restarted (its seeds, its last
// metadata) must still reach it. On new ports such a client can reach no
// broker ever again (chaos seed 538: producers waiting forever for
// outcomes, consumers reading nothing after the faults).
func TestRestartedBrokersKeepTheirAddresses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lc, cl := startWithTopic(t, ctx, Config{}, "restarts", 1)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := lc.Bootstrap()
	for _, b := range slices.Clone(lc.Brokers) {
		id := b.Info().ID
		if err := lc.StopBroker(id); err != nil {
			t.Fatalf("stop %d: %v", id, err)
		}
		if err := lc.RestartBroker(id); err != nil {
			t.Fatalf("restart %d: %v", id, err)
		}
	}
	if after := lc.Bootstrap(); !slices.Equal(after, before) {
		t.Fatalf("addresses after restarting every broker %v, before %v", after, before)
	}
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	defer pcancel()
	if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("a client that knew the brokers before they restarted: %v", err)
	}
}

package rwnode

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/changefeed"
	"github.com/kwal/kwal/internal/changefeed/feedtest"
	"github.com/kwal/kwal/internal/kclient"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/ledger"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testCluster is an in-process cluster on loopback sharing one controller,
// each broker with its remote-WAL replicator.
type testCluster struct {
	// feed is the test's own change source: the replicators' object
	// stores and stage observers signal it (notifyStore, notifyObserver),
	// and so may a test's callbacks.
	feed        changefeed.Feed
	ctrl        *broker.MemController
	brokers     []*broker.Broker
	ledgers     []*ledger.Ledger
	replicators []*RemoteWALReplicator
}

// startCluster starts one broker per rack given (ids 1..n); tweak sets up
// each broker's config (and its replicator) before it starts.
func startCluster(t testing.TB, racks []string, tweak func(*broker.Config, *testCluster)) *testCluster {
	t.Helper()
	c := &testCluster{ctrl: broker.NewMemController(nil, 1000)}
	for i, rack := range racks {
		l := ledger.New()
		cfg := broker.Config{
			BrokerID: int32(i + 1), Rack: rack, Listener: "127.0.0.1:0", LogDir: t.TempDir(),
			Controller: c.ctrl, Ledger: l, Logger: quietLogger(),
			ReplicaFetchBackoff: 50 * time.Millisecond,
		}
		tweak(&cfg, c)
		b, err := broker.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Errorf("close broker %d: %v", cfg.BrokerID, err)
			}
		})
		c.brokers = append(c.brokers, b)
		c.ledgers = append(c.ledgers, l)
	}
	return c
}

func (c *testCluster) broker(id int32) *broker.Broker {
	for _, b := range c.brokers {
		if b.Info().ID == id {
			return b
		}
	}
	return nil
}

func newClient(t testing.TB, c *testCluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	var seeds []string
	for _, b := range c.brokers {
		seeds = append(seeds, b.Addr())
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t testing.TB, cl *kgo.Client, name string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kclient.CreateTopic(ctx, cl, name, partitions, rf, configs, false); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until cond holds, re-checking it on each change of srcs
// (feedtest.WaitFor); d only bounds a hung test.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool, srcs ...changefeed.Source) {
	t.Helper()
	feedtest.WaitFor(t, what, d, cond, srcs...)
}

// sources is everything of the cluster a condition can depend on: every
// broker (its logs, topic states, groups, followers' fetches), the
// controller, every replicator's metadata index, and the cluster's feed
// (object stores, stage observers, test callbacks).
func (c *testCluster) sources() []changefeed.Source {
	out := []changefeed.Source{c.ctrl, &c.feed}
	for _, b := range c.brokers {
		out = append(out, b)
	}
	for _, r := range c.replicators {
		out = append(out, r.State(), r)
	}
	return out
}

// notifyStore signals f after every write or delete that reached the
// store (a test waiting for objects to appear or go wakes on it).
type notifyStore struct {
	objstore.Store
	f *changefeed.Feed
}

var _ objstore.Store = notifyStore{}

func (s notifyStore) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	defer s.f.Signal()
	return s.Store.Put(ctx, key, body, opts)
}

func (s notifyStore) Delete(ctx context.Context, key string) error {
	defer s.f.Signal()
	return s.Store.Delete(ctx, key)
}

// notifyObserver signals f after each stage observed (a test waiting for
// a histogram count wakes on it).
type notifyObserver struct {
	next stagehist.Observer
	f    *changefeed.Feed
}

func (o notifyObserver) Observe(s stagehist.Stage, d time.Duration) {
	o.next.Observe(s, d)
	o.f.Signal()
}

func consumeBytes(l *ledger.Ledger, component string) int64 {
	var n int64
	for _, r := range l.Snapshot().Transfers {
		if r.Component == component {
			n += r.Bytes
		}
	}
	return n
}

func value(i int) []byte { return []byte(fmt.Sprintf("record-%05d", i)) }

package rwnode

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
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
	feed        changeFeed
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

// changeSource is something whose changes a test waits on: a broker, the
// controller, a replicator's metadata index, the cluster's feed.
type changeSource interface{ Changed() <-chan struct{} }

// waitFor waits until cond holds: it evaluates cond now and again after
// each change of any of srcs (taking their channels before each check, so
// no change is missed), never polling. d only bounds a hung test.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool, srcs ...changeSource) {
	t.Helper()
	if len(srcs) == 0 {
		t.Fatalf("waitFor %s: nothing to wait on", what)
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	cases := make([]reflect.SelectCase, len(srcs)+1)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)}
	for {
		for i, s := range srcs {
			cases[i+1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.Changed())}
		}
		if cond() {
			return
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// sources is everything of the cluster a condition can depend on: every
// broker (its logs, topic states, groups, followers' fetches), the
// controller, every replicator's metadata index, and the cluster's feed
// (object stores, stage observers, test callbacks).
func (c *testCluster) sources() []changeSource {
	out := []changeSource{c.ctrl, &c.feed}
	for _, b := range c.brokers {
		out = append(out, b)
	}
	for _, r := range c.replicators {
		out = append(out, r.State())
	}
	return out
}

// changeFeed is a broadcast of "something changed": Changed returns a
// channel that the next signal closes.
type changeFeed struct {
	mu sync.Mutex
	ch chan struct{}
}

func (f *changeFeed) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch
}

func (f *changeFeed) signal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch != nil {
		close(f.ch)
		f.ch = nil
	}
}

// notifyStore signals f after every write or delete that reached the
// store (a test waiting for objects to appear or go wakes on it).
type notifyStore struct {
	objstore.Store
	f *changeFeed
}

var _ objstore.Store = notifyStore{}

func (s notifyStore) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	defer s.f.signal()
	return s.Store.Put(ctx, key, body, opts)
}

func (s notifyStore) Delete(ctx context.Context, key string) error {
	defer s.f.signal()
	return s.Store.Delete(ctx, key)
}

// notifyObserver signals f after each stage observed (a test waiting for
// a histogram count wakes on it).
type notifyObserver struct {
	next stagehist.Observer
	f    *changeFeed
}

func (o notifyObserver) Observe(s stagehist.Stage, d time.Duration) {
	o.next.Observe(s, d)
	o.f.signal()
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

package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/changefeed"
	"github.com/kwal/kwal/internal/changefeed/feedtest"
	"github.com/kwal/kwal/internal/kclient"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testLogWriter sends log lines to t.Log until the test ends.
type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t testing.TB, level slog.Level) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testCluster is an in-process cluster on loopback sharing one controller
// and one manual clock: time passes only when a test advances clk.
type testCluster struct {
	clk     *clock.Manual
	ctrl    *MemController
	brokers []*Broker
	ledgers []*ledger.Ledger
}

// startCluster starts one broker per rack given (ids 1..n), on the
// cluster's manual clock (a tweak may set another Clock; see doc.go for the
// tests that run on the real clock and why).
func startCluster(t testing.TB, racks []string, tweak func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{clk: clock.NewManual(time.Now()), ctrl: NewMemController(nil, 1000)}
	for i, rack := range racks {
		l := ledger.New()
		cfg := Config{
			BrokerID: int32(i + 1), Rack: rack, Listener: "127.0.0.1:0", LogDir: t.TempDir(),
			Controller: c.ctrl, Ledger: l, Logger: testLogger(t, slog.LevelWarn),
			ReplicaFetchBackoff: 50 * time.Millisecond, Clock: c.clk,
		}
		// No initial rebalance delay: it is time, and only the tests about
		// it wait it out (they set it and advance clk).
		cfg.Groups.InitialRebalanceDelay = -1
		if tweak != nil {
			tweak(&cfg)
		}
		b, err := New(cfg)
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

// onRealClock is the tweak of the tests that must run on the wall clock
// (see doc.go): a librdkafka consumer (kcat -e) learns it reached the end
// of a partition only from an empty answer to its long poll, which the
// manual clock would hold for ever.
func onRealClock(cfg *Config) { cfg.Clock = clock.Real{} }

func (c *testCluster) seeds() []string {
	var out []string
	for _, b := range c.brokers {
		out = append(out, b.Addr())
	}
	return out
}

func (c *testCluster) broker(id int32) *Broker {
	for _, b := range c.brokers {
		if b.cfg.BrokerID == id {
			return b
		}
	}
	return nil
}

func newClient(t testing.TB, c *testCluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic through the CreateTopics API.
func createTopic(t testing.TB, cl *kgo.Client, name string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kclient.CreateTopic(ctx, cl, name, partitions, rf, configs, false); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until cond holds, re-checking it on each change of srcs
// (a Broker, a controller, a test's own changefeed.Feed: feedtest.WaitFor),
// never polling; d only bounds a hung test.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool, srcs ...changefeed.Source) {
	t.Helper()
	feedtest.WaitFor(t, what, d, cond, srcs...)
}

// sources is every broker and the controller of the cluster.
func (c *testCluster) sources() []changefeed.Source {
	out := []changefeed.Source{c.ctrl}
	for _, b := range c.brokers {
		out = append(out, b)
	}
	return out
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

// advanceFetching moves the cluster's clock on by total while the
// followers in fetching keep fetching tp from leader, so that only the
// others fall behind (one jump of total would leave a follower that is
// still fetching its way to the leader's log end looking as lagging as a
// stopped one). It steps by the leader's replica fetch long poll plus the
// purgatory's tick, the longest a parked poll can last past its arrival
// (purgatory.Op.Start), and after each step waits until leader has
// recorded a fetch of tp from every broker in fetching at the new time:
// their polls were answered and they fetched again. What is left of total
// is one last, shorter step after which nobody is waited for, so those
// followers' last fetches are less than one step old when it returns.
func (c *testCluster) advanceFetching(t testing.TB, leader *Broker, tp TopicPartition, total time.Duration, fetching ...int32) {
	t.Helper()
	p := leader.partition(tp)
	if p == nil {
		t.Fatalf("broker %d has no replica of %s", leader.cfg.BrokerID, tp)
	}
	step := leader.cfg.ReplicaFetchWaitMax + leader.fetchWait.Timer().Tick()
	for ; total >= step; total -= step {
		c.clk.Advance(step)
		now := c.clk.Now()
		waitFor(t, fmt.Sprintf("followers %v to fetch %s at %v", fetching, tp, now), 10*time.Second, func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.mu.leader == nil {
				return false
			}
			for _, id := range fetching {
				if pr, ok := p.mu.leader.Follower(id); !ok || pr.LastFetchTime.Before(now) {
					return false
				}
			}
			return true
		}, leader)
	}
	c.clk.Advance(total)
}

// replicaFetchAt is a replica's Fetch, as kwal's fetcher sends it, of
// partition 0 of topic from offset at p's current leader epoch, for
// replica id (1 MiB limits, no fetch session).
func replicaFetchAt(p *partition, topic string, id int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = replicaFetchVersion, id, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	st, _ := p.snapshot()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes, rp.LastFetchedEpoch = 0, offset, st.LeaderEpoch, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

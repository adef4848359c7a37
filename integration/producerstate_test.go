package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIdempotentProducerLeaderKill is issue 11 item 8 as a user meets it:
// three `kwal broker` processes (versitygw for the remote WAL, one kfake
// for the metadata and the controller state), an idempotent acks=all
// franz-go producer, and the partition's leader killed with SIGKILL and
// restarted, in classic and in remotewal mode. Before the kill both
// followers are stopped (SIGSTOP) for a second, so that the leader holds
// batches it appended but did not acknowledge; the client resends them
// to the restarted leader.
//
// With producer state rebuilt on open (the default) every acknowledged
// record is read exactly once and in order, from the leader and from each
// follower. With kwal.producer.state.rebuild.enable=false (the behaviour
// before the fix) the same run must show duplicates: the test asserts
// them, so that it keeps showing what the fix fixes.
func TestIdempotentProducerLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: the multi-process leader-kill tests did not run")
	}
	env := objstoretest.S3Env(t)
	bin := buildKwal(t)
	logger := testLogger(t)
	for _, rebuild := range []bool{true, false} {
		t.Run("rebuild="+strconv.FormatBool(rebuild), func(t *testing.T) {
			emb, err := metadata.StartEmbedded(t.TempDir(), logger)
			if err != nil {
				t.Fatal(err)
			}
			defer emb.Close()
			c := startCompatCluster(t, bin, []string{"az1", "az2", "az1"}, clusterProps(s3StoreURL(env, "prodstate"), emb.Bootstrap(), map[string]string{
				"replica.lag.time.max.ms":            "20000", // the stalled followers stay in the ISR
				"log.segment.bytes":                  "65536", // rolls, so snapshots are used
				"kwal.producer.state.rebuild.enable": strconv.FormatBool(rebuild),
			}))
			defer c.stopAll(t)
			for _, mode := range []string{"classic", "remotewal"} {
				t.Run(mode, func(t *testing.T) {
					configs := modeConfigs(mode)
					topic := "idem-" + mode
					c.createTopic(t, topic, 1, configs)
					testLeaderKill(t, c, topic, rebuild)
				})
			}
		})
	}
}

func testLeaderKill(t *testing.T, c *compatCluster, topic string, rebuild bool) {
	const n = 30_000
	want := make([][]byte, n)
	for i := range want {
		want[i] = fmt.Appendf(nil, "%s-%08d-%s", topic, i, strings.Repeat("p", 40))
	}
	leaderID := c.leaderOf(t, topic, 0)
	li := int(leaderID - 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(5_000), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var acked, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	go func() {
		for i := range want {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: want[i]}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				acked.Add(1)
			})
		}
	}()
	waitUntil(t, ctx, "a third acknowledged", func() bool { return acked.Load() >= n/3 })
	var followers []int
	for i, b := range c.brokers {
		if b.id != leaderID {
			followers = append(followers, i)
			if err := b.proc.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The stall is the fault being modelled (the issue's "stall the
	// followers for a second"), not a wait for state: the leader keeps
	// appending what it cannot acknowledge.
	time.Sleep(time.Second)
	before := acked.Load()
	c.kill(t, li)
	for _, i := range followers {
		if err := c.brokers[i].proc.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("killed leader %d (SIGKILL) after %d acks, followers stalled for 1 s", leaderID, before)
	c.start(t, li)
	waitUntil(t, ctx, "every record answered", func() bool { return acked.Load()+failed.Load() == n })
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d records not acknowledged; first error: %v", f, n, *firstErr.Load())
	}
	for _, i := range followers {
		id := c.brokers[i].id
		waitUntil(t, ctx, fmt.Sprintf("broker %d in the ISR", id), func() bool { return slices.Contains(c.isr(t, topic, 0), id) })
	}

	got := consumeFranz(t, c, topic, 0, n)
	if now := c.leaderOf(t, topic, 0); !rebuild && now != leaderID {
		// Liveness (broker/doc.go): the restarted broker registered a new
		// life, its old one was fenced and a follower that had learned the
		// producer from replication was elected, so the resends reached a
		// leader that knows the producer: exactly once, as Kafka does. The
		// restarted-leader duplicate without the rebuild is still shown in
		// process (broker/producerstate_test.go), where no election runs.
		t.Logf("rebuild disabled, but broker %d now leads instead of the restarted %d: the resends must be exactly once", now, leaderID)
		rebuild = true
	}
	if !rebuild {
		if len(got) == n {
			t.Fatalf("rebuild disabled, yet %d records for %d acknowledged: the test no longer shows the duplicates it guards against", len(got), n)
		}
		t.Logf("rebuild disabled: %d records read for %d acknowledged (the duplicates of issue 11 item 8)", len(got), n)
		return
	}
	checkValues(t, got, want)
	for _, b := range c.brokers {
		var fromB [][]byte
		waitUntil(t, ctx, fmt.Sprintf("broker %d's high watermark at %d", b.id, n), func() bool {
			fromB = fetchFromBroker(t, ctx, b.addr(), topic, 0)
			return len(fromB) >= n
		})
		checkValues(t, fromB, want)
	}
	t.Logf("%d acknowledged records read once and in order from the leader and from each follower", n)
}

// leaderOf is the leader of topic-p as the brokers' metadata says.
func (c *compatCluster) leaderOf(t *testing.T, topic string, p int32) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := c.admin(t).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	pd, ok := md.Topics[topic].Partitions[p]
	if !ok || pd.Leader < 0 {
		t.Fatalf("no leader for %s-%d", topic, p)
	}
	return pd.Leader
}

package rwnode

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
)

// slowStore answers every PUT after a fixed delay: a store whose upload
// bandwidth the hot partition exceeds.
type slowStore struct {
	objstore.Store
	delay time.Duration
}

func (s slowStore) Put(ctx context.Context, k string, b []byte, o objstore.PutOptions) error {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Put(ctx, k, b, o)
}

// TestHotPartitionLeavesOthersOnTheStore: one partition's producer far
// outruns the store's upload bandwidth, so its slices back up in the
// leader's combiner without end, while three other partitions of the same
// leader take acks=all produce. Its backlog is held to its partition's
// share of the combiner's bound, so the others' slices keep being
// admitted and published behind at most that share: their acks=all stay
// within replica.lag.time.max.ms, their followers stay in the ISR, and
// they read the others' records from the store, not from the leader.
// (With one shared bound the hot backlog fills it; the others wait behind
// all of it and their followers fall back to the leader.) KWAL_HOL_SHARED=1
// runs it with the per-partition bound as large as the whole one, to see
// the difference.
func TestHotPartitionLeavesOthersOnTheStore(t *testing.T) {
	const (
		lag      = 3 * time.Second
		putDelay = 50 * time.Millisecond
		share    = 256 << 10
		run      = 3 * time.Second
	)
	shared := os.Getenv("KWAL_HOL_SHARED") != ""
	store := slowStore{Store: mem.New(), delay: putDelay}
	c := startRemoteWALClusterBrokers(t, []string{"az1", "az2", "az3"}, store, func(rc *RemoteWALReplicatorConfig) {
		rc.Combiner = combiner.Config{Interval: 5 * time.Millisecond, UploadBytes: 256 << 10, ThreadPoolSize: 1,
			QueueBytes: 8 << 20, PartitionQueueBytes: share}
		rc.Tasks.MaxSliceBytes = 128 << 10 // slices of the backlog stay small beside the share
		if shared {
			rc.Combiner.PartitionQueueBytes = rc.Combiner.QueueBytes
		}
	}, func(cfg *broker.Config) { cfg.ReplicaLagTimeMax = lag })
	admin := newClient(t, c)
	createTopic(t, admin, "hot", 1, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	createTopic(t, admin, "cold", 3, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	// Every partition led by B1, so they share its combiner.
	tps := []broker.TopicPartition{{Topic: "hot"}, {Topic: "cold"}, {Topic: "cold", Partition: 1}, {Topic: "cold", Partition: 2}}
	for _, tp := range tps {
		if ts, _ := c.ctrl.Topic(tp.Topic); ts.Partitions[tp.Partition].Leader != 1 {
			if _, err := c.ctrl.ElectLeader(tp, 1); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "B1 to lead "+tp.String(), 10*time.Second, func() bool { return leaderOf(c.broker(1), tp) })
	}

	ctx, cancel := context.WithTimeout(context.Background(), run+30*time.Second)
	defer cancel()
	hot := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(64), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cold := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var hotAcked atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		v := make([]byte, 32<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			hot.Produce(ctx, &kgo.Record{Topic: "hot", Value: v}, func(_ *kgo.Record, err error) {
				if err == nil {
					hotAcked.Add(1)
				}
			})
			// About 20 MB/s: eight times the store's bandwidth, without
			// writing gigabytes to the test's disk.
			time.Sleep(1500 * time.Microsecond)
		}
	}()
	var mu sync.Mutex
	var worst time.Duration
	coldAcked := 0
	for p := range int32(3) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				err := cold.ProduceSync(ctx, &kgo.Record{Topic: "cold", Partition: p, Value: []byte("cold")}).FirstErr()
				d := time.Since(t0)
				mu.Lock()
				if err == nil {
					coldAcked++
					worst = max(worst, d)
				} else {
					t.Errorf("cold-%d acks=all: %v", p, err)
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // a steady, light rate
			}
		}()
	}
	held := int64(0)
	deadline := time.Now().Add(run)
	for time.Now().Before(deadline) {
		held = max(held, c.rep(1).WritePath().Combiner.Metrics().HeldBytes)
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	hot.Flush(ctx)

	var coldFallback int64
	for _, l := range c.ledgers {
		for _, r := range l.Snapshot().Transfers {
			if r.Topic == "cold" && r.Component == "follower" {
				coldFallback += r.Bytes
			}
		}
	}
	ts, _ := c.ctrl.Topic("cold")
	t.Logf("shared bound %v: hot acks=1 acknowledged %d (32 KiB each), combiner held up to %d bytes; cold acks=all %d, worst %v; cold bytes from the leader %d",
		shared, hotAcked.Load(), held, coldAcked, worst, coldFallback)
	if hotAcked.Load()*(32<<10) < 4*share {
		t.Fatalf("the hot partition produced %d records: not enough to back up", hotAcked.Load())
	}
	if coldAcked == 0 || worst >= lag {
		t.Errorf("cold acks=all: %d acknowledged, worst wait %v; want some, each within %v", coldAcked, worst, lag)
	}
	for i, p := range ts.Partitions {
		if len(p.ISR) != 3 {
			t.Errorf("cold-%d ISR %v: a follower was dropped", i, p.ISR)
		}
	}
	// Each follower holds every cold byte; those it fetched from the
	// leader fell back because the store had not served them in time.
	// (A stray one on a loaded machine is noise; with the hot backlog in
	// the way, nearly all of them fall back.)
	var coldBytes int64
	for _, tp := range tps[1:] {
		l, _ := c.broker(1).PartitionLog(tp)
		for _, s := range l.Segments() {
			coldBytes += s.Size
		}
	}
	if followed := 2 * coldBytes; coldFallback*10 > followed {
		t.Errorf("cold followers fetched %d of %d bytes from the leader: the hot backlog held the others' slices back", coldFallback, followed)
	}
}

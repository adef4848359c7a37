package localcluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/kclient"
	"github.com/kwal/kwal/kafkalog/faultfs"
)

// TestLeaderLogDirFails: RF 3, idempotent acks=all producers, in both
// replication modes; the log dir of a partition's leader turns read-only
// under load. The broker reports it and the partition gets a new leader
// from the ISR at once: the heartbeat interval and session are an hour,
// so nothing but the report can move it. Producers continue with no
// failed record; every acknowledged record is read once, in order, at the
// offset it was acknowledged at; nothing is read twice; the failed broker
// is in no ISR at the end.
func TestLeaderLogDirFails(t *testing.T) {
	for _, mode := range []string{"classic", "remotewal"} {
		t.Run("mode="+mode, func(t *testing.T) { testLeaderLogDirFails(t, mode == "remotewal") })
	}
}

type ackedRecord struct {
	seq    int
	offset int64
}

func testLeaderLogDirFails(t *testing.T, remote bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var mu sync.Mutex
	disks := map[int32]*faultfs.ReadOnlyFS{}
	lc, cl := startWithTopic(t, ctx, Config{StorageURL: "mem://", Tweak: func(c *broker.Config) {
		d := faultfs.NewReadOnlyFS(c.LogDir)
		mu.Lock()
		disks[c.BrokerID] = d
		mu.Unlock()
		c.LogFS = d
		c.BrokerHeartbeatInterval, c.BrokerSessionTimeout = time.Hour, 2*time.Hour
	}}, "unused", 1, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// kgo refreshes metadata after KAFKA_STORAGE_ERROR at most every
		// MetadataMinAge (default 5 s); the hand-off itself takes
		// milliseconds.
		kgo.MetadataMinAge(100*time.Millisecond))
	const topic = "disk"
	configs := map[string]string{}
	if remote {
		configs[broker.TopicConfigRemoteWAL] = "true"
	}
	if err := kclient.CreateTopic(ctx, cl, topic, 2, 3, configs, false); err != nil {
		t.Fatal(err)
	}
	leaderOf := func(p int) broker.PartitionState {
		ts, _ := lc.Controller.Topic(topic)
		return ts.Partitions[p]
	}
	failed := leaderOf(0).Leader
	// The log files stay open on the failed dir until the end; the disk
	// is writable again for the cluster's Close, which closes them.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		disks[failed].SetBroken(false)
	})
	// Time the hand-off on the controller's changes.
	movedAt := make(chan time.Time, 1)
	go func() {
		for {
			ch := lc.Controller.Changed()
			if leaderOf(0).Leader != failed {
				movedAt <- time.Now()
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	const before, after = 1500, 1500
	acked := map[int32][]ackedRecord{}
	var failures []error
	var wg sync.WaitGroup
	produce := func(seq int) {
		wg.Add(1)
		r := &kgo.Record{Topic: topic, Partition: int32(seq % 2), Value: []byte(strconv.Itoa(seq))}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, fmt.Errorf("record %d: %w", seq, err))
				return
			}
			acked[r.Partition] = append(acked[r.Partition], ackedRecord{seq: seq, offset: r.Offset})
		})
	}
	for seq := range before {
		produce(seq)
	}
	// Break the leader's disk while the first records are in flight.
	mu.Lock()
	disks[failed].SetBroken(true)
	mu.Unlock()
	broke := time.Now()
	for seq := before; seq < before+after; seq++ {
		produce(seq)
	}
	wg.Wait()
	produced := time.Since(broke)
	var took time.Duration
	select {
	case at := <-movedAt:
		took = at.Sub(broke)
	case <-ctx.Done():
		t.Fatal("partition 0 never changed leader")
	}
	moved := leaderOf(0)
	t.Logf("broker %d's log dir failed; partition 0 led by %d at epoch %d %v after the fault (the records after it took %v)",
		failed, moved.Leader, moved.LeaderEpoch, took.Round(time.Millisecond), produced.Round(time.Millisecond))
	if len(failures) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failures), failures[0])
	}
	for p := range 2 {
		ps := leaderOf(p)
		if ps.Leader == failed || ps.Leader == broker.NoLeader || slices.Contains(ps.ISR, failed) {
			t.Fatalf("partition %d at the end: %+v; broker %d must lead nothing and be in no ISR", p, ps, failed)
		}
	}
	// Read both partitions from the start to the end offsets.
	ends := map[int32]int64{}
	for p, recs := range acked {
		slices.SortFunc(recs, func(a, b ackedRecord) int { return int(a.offset - b.offset) })
		ends[p] = recs[len(recs)-1].offset + 1
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(lc.Bootstrap()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	read := map[int32][]ackedRecord{}
	for read0, read1 := int64(0), int64(0); read0 < ends[0] || read1 < ends[1]; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading: %v; read to %d and %d of %v", ctx.Err(), read0, read1, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seq, err := strconv.Atoi(string(r.Value))
			if err != nil {
				t.Fatalf("partition %d offset %d: value %q", r.Partition, r.Offset, r.Value)
			}
			read[r.Partition] = append(read[r.Partition], ackedRecord{seq: seq, offset: r.Offset})
			if r.Partition == 0 {
				read0 = r.Offset + 1
			} else {
				read1 = r.Offset + 1
			}
		})
	}
	for p := range int32(2) {
		at := map[int64]int{}
		seen := map[int]bool{}
		last := -1
		for _, r := range read[p] {
			if seen[r.seq] {
				t.Fatalf("partition %d: record %d read twice", p, r.seq)
			}
			if r.seq < last {
				t.Fatalf("partition %d: record %d read after %d", p, r.seq, last)
			}
			seen[r.seq], last, at[r.offset] = true, r.seq, r.seq
		}
		for _, a := range acked[p] {
			if got, ok := at[a.offset]; !ok || got != a.seq {
				t.Fatalf("partition %d: record %d acknowledged at offset %d, read there: %d (present %v)", p, a.seq, a.offset, got, ok)
			}
		}
		t.Logf("partition %d: %d acknowledged, %d read", p, len(acked[p]), len(read[p]))
	}
}

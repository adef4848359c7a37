package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSelfHostedMetadataTopic runs the KIP's intended layout: three `kwal
// broker` processes whose remote.wal.metadata.bootstrap.servers name the
// cluster itself, so __remote_wal_log_metadata is a classic, compacted
// topic of this cluster (RF 3), while the controller's
// __kwal_cluster_state lives on a kfake (controller.bootstrap.servers).
// An acks=all producer writes a remotewal topic; every replica (the
// followers rebuilt theirs from object storage through the self-hosted
// metadata) holds every acknowledged record once and in order. Then the
// leader of the metadata partition that carries the topic's events is
// killed (SIGKILL) and restarted: the metadata partition gets a new
// leader, produces continue, and again every replica, the restarted one
// included, holds every acknowledged record.
func TestSelfHostedMetadataTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: the multi-process self-hosted metadata test did not run")
	}
	env := objstoretest.S3Env(t)
	bin := buildKwal(t)
	ctrl, err := metadata.StartEmbedded(t.TempDir(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrl.Close)
	c := startCompatCluster(t, bin, []string{"az1", "az2", "az3"}, clusterProps(s3StoreURL(env, "selfhosted"), []string{clusterAddrs}, map[string]string{
		"controller.bootstrap.servers": strings.Join(ctrl.Bootstrap(), ","),
		"replica.lag.time.max.ms":      "3000",
		"broker.session.timeout.ms":    "3000",
		"broker.heartbeat.interval.ms": "300",
	}))
	t.Cleanup(func() { c.stopAll(t) })
	t.Cleanup(func() {
		if t.Failed() { // the remote WAL's own lines, which the log tails miss
			for _, b := range c.brokers {
				if b.proc == nil {
					continue
				}
				data, _ := os.ReadFile(b.proc.LogPath)
				var keep []string
				for _, l := range strings.Split(string(data), "\n") {
					if (strings.Contains(l, "remote WAL") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "ISR")) &&
						!strings.Contains(l, "has no leader") {
						keep = append(keep, l)
					}
				}
				t.Logf("broker %d remote WAL lines:\n%s", b.id, strings.Join(keep[:min(len(keep), 60)], "\n"))
			}
		}
	})

	const topic, partitions = "selfhosted", 2
	c.createTopic(t, topic, partitions, modeConfigs("remotewal"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	acked := map[int32][]string{}
	produce := func(prefix string, n int) {
		t.Helper()
		// The first produces wait for every broker's remote WAL to reach
		// the metadata topic its cluster hosts.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var recs []*kgo.Record
		for i := range n {
			p := int32(i % partitions)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-p%d-%06d", prefix, p, i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", prefix, err)
		}
		for _, r := range recs {
			acked[r.Partition] = append(acked[r.Partition], string(r.Value))
		}
	}
	checkReplicas := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		for p := int32(0); p < partitions; p++ {
			want := len(acked[p])
			for _, b := range c.brokers {
				var log [][]byte
				var lastErr error
				waitUntil(t, ctx, fmt.Sprintf("%s: broker %d to hold %s-%d's %d acknowledged records (last read: %d records, %v)", when, b.id, topic, p, want, len(log), lastErr), func() bool {
					l, err := readBroker(ctx, b.addr(), topic, p)
					log, lastErr = l, err
					if err != nil {
						t.Logf("read broker %d: %v", b.id, err)
					}
					return err == nil && len(l) >= want
				})
				checkAcked(t, fmt.Sprintf("%s: broker %d %s-%d", when, b.id, topic, p), log, acked[p])
			}
		}
	}
	produce("before", 2000)
	checkReplicas("before the restart")

	// The metadata partition carrying partition 0's events, and its leader.
	mdCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mdParts := int32(0)
	waitUntil(t, mdCtx, "the self-hosted metadata topic", func() bool {
		md, err := brokerMetadata(mdCtx, c.brokers[0].addr(), metadata.DefaultTopic)
		if err != nil || len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 {
			return false
		}
		mdParts = int32(len(md.Topics[0].Partitions))
		return mdParts > 0
	})
	mp := metadata.MetadataPartition(metadata.TopicPartition{Topic: topic, Partition: 0}, mdParts)
	view := c.partitionView(t, metadata.DefaultTopic, mp)
	if len(view.replicas) != 3 {
		t.Fatalf("metadata partition %d has replicas %v, want 3 (RF min(3, brokers))", mp, view.replicas)
	}
	victim := c.index(view.leader)
	t.Logf("killing broker %d, leader of %s-%d (epoch %d)", view.leader, metadata.DefaultTopic, mp, view.epoch)
	c.kill(t, victim)
	waitUntil(t, mdCtx, "a new leader of the metadata partition", func() bool {
		v := c.partitionView(t, metadata.DefaultTopic, mp, view.leader)
		return v.leader >= 0 && v.leader != view.leader && v.epoch > view.epoch
	})
	produce("during", 1000)
	c.start(t, victim)
	produce("after", 1000)
	checkReplicas("after the restart")
}

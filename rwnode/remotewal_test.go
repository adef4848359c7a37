package rwnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/remotewal"
)

// startRemoteWALCluster starts brokers that share one object store and one
// embedded metadata cluster, each with its own remote-WAL replicator.
func startRemoteWALCluster(t *testing.T, racks []string, store objstore.Store) *testCluster {
	t.Helper()
	return startRemoteWALClusterWith(t, racks, store, nil)
}

func startRemoteWALClusterWith(t *testing.T, racks []string, store objstore.Store, tweak func(*RemoteWALReplicatorConfig)) *testCluster {
	t.Helper()
	return startRemoteWALClusterBrokers(t, racks, store, tweak, nil)
}

// startRemoteWALClusterBrokers is startRemoteWALClusterWith with a tweak of
// each broker's config too.
func startRemoteWALClusterBrokers(t *testing.T, racks []string, store objstore.Store, tweak func(*RemoteWALReplicatorConfig), brokerTweak func(*broker.Config)) *testCluster {
	t.Helper()
	emb, err := metadata.StartEmbedded(t.TempDir(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	return startCluster(t, racks, func(cfg *broker.Config, c *testCluster) {
		rc := RemoteWALReplicatorConfig{
			BrokerID: cfg.BrokerID, Rack: cfg.Rack,
			Metadata: metadata.TopicConfig{Bootstrap: emb.Bootstrap(), Partitions: 4},
			Tasks:    remotewal.Config{Interval: 2 * time.Millisecond, UploadBytes: 64 << 10},
			Combiner: combiner.Config{Interval: 5 * time.Millisecond, UploadBytes: 128 << 10},
			Ledger:   cfg.Ledger,
			Logger:   quietLogger(),
		}
		// As NewRemoteWALReplicatorFor does: the broker serves the
		// replicator's stage histograms.
		if store != nil {
			rc.Store = ledger.Wrap(notifyStore{Store: store, f: &c.feed}, cfg.Ledger)
		}
		cfg.Stages = stagehist.New()
		rc.Observer = notifyObserver{next: cfg.Stages, f: &c.feed}
		if tweak != nil {
			tweak(&rc)
		}
		r, err := NewRemoteWALReplicator(rc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.Close(ctx); err != nil {
				t.Errorf("close replicator %d: %v", cfg.BrokerID, err)
			}
		})
		c.replicators = append(c.replicators, r)
		cfg.Replicator = r
		cfg.RemoteWAL.SystemEnable = true
		if brokerTweak != nil {
			brokerTweak(cfg)
		}
	})
}

// In remotewal mode a 3-broker, 2-rack cluster takes acks=all produce,
// replicates through object storage only (no record bytes between
// brokers), serves the consumer from the follower in its rack, and every
// follower's log is byte-identical to the leader's.
func TestRemoteWALClusterEndToEnd(t *testing.T) {
	store := mem.New()
	c := startRemoteWALCluster(t, []string{"az1", "az2", "az1"}, store)
	admin := newClient(t, c)
	const topic = "wal-orders"
	createTopic(t, admin, topic, 2, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	ts, _ := c.ctrl.Topic(topic)

	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.ProduceRequestTimeout(20*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 600
	var (
		mu       sync.Mutex
		problems []string
		wg       sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		prod.Produce(context.Background(), &kgo.Record{Partition: int32(i % 2), Value: value(i)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				problems = append(problems, err.Error())
				return
			}
			ps := ts.Partitions[r.Partition]
			for _, rid := range ps.Replicas {
				l, _ := c.broker(rid).PartitionLog(broker.TopicPartition{Topic: topic, Partition: r.Partition})
				if leo := l.LogEndOffset(); leo <= r.Offset {
					problems = append(problems, fmt.Sprintf("offset %d acked before broker %d had it (log end %d)", r.Offset, rid, leo))
				}
			}
		})
		if i%50 == 49 {
			prod.Flush(context.Background())
		}
	}
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %s", len(problems), problems[0])
	}

	// Consume partition 0 from the rack of a follower.
	ps := ts.Partitions[0]
	leader := c.broker(ps.Leader)
	var follower *broker.Broker
	for _, r := range ps.Replicas {
		if b := c.broker(r); r != ps.Leader && b.Info().Rack != leader.Info().Rack {
			follower = b
		}
	}
	if follower == nil {
		t.Fatalf("no follower outside the leader's rack: %+v", ps)
	}
	cons := newClient(t, c, kgo.Rack(follower.Info().Rack),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := 0
	for got < n/2 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			for _, rid := range ps.Replicas {
				st, _ := c.broker(rid).PartitionStatus(broker.TopicPartition{Topic: topic, Partition: 0})
				t.Logf("broker %d: %+v", rid, st)
			}
			t.Fatalf("consumed %d of %d records", got, n/2)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(got) || !bytes.Equal(r.Value, value(2*got)) {
				t.Fatalf("record %d: offset %d value %q", got, r.Offset, r.Value)
			}
			got++
		})
	}

	for pi, ps := range ts.Partitions {
		tp := broker.TopicPartition{Topic: topic, Partition: int32(pi)}
		ll, _ := c.broker(ps.Leader).PartitionLog(tp)
		want := segmentBytes(t, ll.Segments(), ll.ReadSegmentRange)
		for _, rid := range ps.Replicas {
			if rid == ps.Leader {
				continue
			}
			fl, _ := c.broker(rid).PartitionLog(tp)
			if !bytes.Equal(segmentBytes(t, fl.Segments(), fl.ReadSegmentRange), want) {
				t.Errorf("%s: broker %d's log is not byte-identical to the leader's", tp, rid)
			}
		}
	}
	var puts, gets, recordBytesBetweenBrokers int64
	for _, l := range c.ledgers {
		s := l.Snapshot()
		puts += s.ByKind[ledger.Put].Requests
		gets += s.ByKind[ledger.Get].Requests
		recordBytesBetweenBrokers += consumeBytes(l, "replica-fetch")
	}
	if recordBytesBetweenBrokers != 0 {
		t.Errorf("%d record bytes went leader → follower over the broker network", recordBytesBetweenBrokers)
	}
	if puts == 0 || gets == 0 {
		t.Errorf("object store saw %d PUTs and %d GETs", puts, gets)
	}
	if b := consumeBytes(c.ledgers[indexOf(c, follower)], "consume"); b == 0 {
		t.Errorf("the follower in the consumer's rack served no consumer bytes")
	}
	t.Logf("%d PUTs, %d GETs for %d records", puts, gets, n)
}

func indexOf(c *testCluster, b *broker.Broker) int {
	for i, x := range c.brokers {
		if x == b {
			return i
		}
	}
	return -1
}

func segmentBytes(t *testing.T, segs []kafkalog.SegmentInfo, read func(int64, int64, int64) ([]byte, error)) []byte {
	t.Helper()
	var all []byte
	for _, s := range segs {
		b, err := read(s.BaseOffset, 0, s.Size)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

func TestMetricsEndpoint(t *testing.T) {
	store := mem.New()
	c := startRemoteWALCluster(t, []string{"az1", "az2"}, store)
	admin := newClient(t, c)
	createTopic(t, admin, "m", 1, 2, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("m"))
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, b := range c.brokers {
		body := scrape(t, b)
		for _, want := range []string{"kwal_requests_total", "kwal_purgatory_pending", "kwal_combiner", "kwal_follower_total", "kwal_remotewal_reconcile_total", "kwal_partition_log_end_offset", "kwal_objstore_requests_total"} {
			if !strings.Contains(body, want) {
				t.Errorf("broker %d /metrics lacks %s", b.Info().ID, want)
			}
		}
		for _, s := range stagehist.Stages {
			if !strings.Contains(body, "# TYPE "+s.Metric()+" histogram") {
				t.Errorf("broker %d /metrics lacks the histogram %s", b.Info().ID, s.Metric())
			}
		}
	}
}

// After one acks=all produce to a remotewal partition, every stage
// histogram has counted something on the broker of its side: the leader's
// PUT, cut-to-PUT, publish and acks=all wait, the follower's GET and
// replication lag, and metadata delivery on both. The acks=all answer
// comes after the follower's GET, append and its consumer's delivery; the
// leader learns its publish finished only when the combiner calls back,
// which may be after the answer, so the scrape is retried until then.
func TestMetricsHistogramsCount(t *testing.T) {
	store := mem.New()
	c := startRemoteWALCluster(t, []string{"az1", "az2"}, store)
	admin := newClient(t, c)
	createTopic(t, admin, "h", 1, 2, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("h"))
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ts, _ := c.ctrl.Topic("h")
	leaderID := ts.Partitions[0].Leader
	var leader, follower *broker.Broker
	for _, b := range c.brokers {
		if b.Info().ID == leaderID {
			leader = b
		} else {
			follower = b
		}
	}
	// The follower side is done when the produce is answered.
	fc := histogramCounts(t, scrape(t, follower))
	for _, s := range []stagehist.Stage{stagehist.Get, stagehist.ReplicationLag, stagehist.MetadataDelivery} {
		if fc[s.Metric()] == 0 {
			t.Errorf("follower broker %d: %s has count 0 after an acks=all produce", follower.Info().ID, s.Metric())
		}
	}
	leaderStages := []stagehist.Stage{stagehist.CutToPut, stagehist.Put, stagehist.Publish, stagehist.AcksAllWait, stagehist.MetadataDelivery}
	var lc map[string]float64
	leaderMetrics := scraper(t, leader)
	waitFor(t, "the leader's publish callback", 10*time.Second, func() bool {
		lc = histogramCounts(t, leaderMetrics())
		for _, s := range leaderStages {
			if lc[s.Metric()] == 0 {
				return false
			}
		}
		return true
	}, c.sources()...)
	if lc[stagehist.AcksAllWait.Metric()] != 1 {
		t.Errorf("leader: %s count %v, want 1 (one acks=all produce)", stagehist.AcksAllWait.Metric(), lc[stagehist.AcksAllWait.Metric()])
	}
	if n := fc[stagehist.AcksAllWait.Metric()]; n != 0 {
		t.Errorf("follower: %s count %v, want 0", stagehist.AcksAllWait.Metric(), n)
	}
}

// scrape serves b's /metrics on a loopback port and returns a function
// that reads it.
func scraper(t *testing.T, b *broker.Broker) func() string {
	t.Helper()
	addr, err := b.ServeMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return func() string { return scrapeAddr(t, addr) }
}

func scrape(t *testing.T, b *broker.Broker) string {
	t.Helper()
	return scraper(t, b)()
}

func scrapeAddr(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// histogramCounts returns, by histogram name, its _count sample.
func histogramCounts(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || !strings.HasSuffix(name, "_count") || strings.Contains(name, "{") {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[strings.TrimSuffix(name, "_count")] = v
	}
	return out
}

// Invariant 6 (nothing leaks): once every in-sync replica holds an
// object's slices and the WAL retention has passed, the uploading leader
// deletes the object (DELETE_SEGMENT_STARTED, delete, FINISHED,
// tombstone). The store ends empty, the metadata names no live object, and
// the followers' logs keep every record.
func TestRemoteWALRetentionDeletesObjects(t *testing.T) {
	store := mem.New()
	c := startRemoteWALClusterWith(t, []string{"az1", "az2", "az2"}, store, func(rc *RemoteWALReplicatorConfig) {
		rc.Retention = metadata.RetentionPolicy{Retention: time.Millisecond}
		rc.MaintenanceInterval = 20 * time.Millisecond
	})
	admin := newClient(t, c)
	createTopic(t, admin, "ret", 2, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("ret"))
	const n = 300
	for i := range n {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: value(i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	countObjects := func() int {
		k := 0
		if err := objstore.ListAll(context.Background(), store, "", func(objstore.ObjectInfo) error { k++; return nil }); err != nil {
			t.Fatal(err)
		}
		return k
	}
	waitFor(t, "retention to empty the store", 20*time.Second, func() bool { return countObjects() == 0 }, c.sources()...)
	var total int64
	ts, _ := c.ctrl.Topic("ret")
	for _, ps := range ts.Partitions {
		for _, rid := range ps.Replicas {
			l, _ := c.broker(rid).PartitionLog(broker.TopicPartition{Topic: "ret", Partition: ps.Partition})
			if rid == ps.Leader {
				total += l.LogEndOffset()
			}
		}
		ll, _ := c.broker(ps.Leader).PartitionLog(broker.TopicPartition{Topic: "ret", Partition: ps.Partition})
		for _, rid := range ps.Replicas {
			fl, _ := c.broker(rid).PartitionLog(broker.TopicPartition{Topic: "ret", Partition: ps.Partition})
			if fl.LogEndOffset() != ll.LogEndOffset() {
				t.Errorf("broker %d holds %d of %d offsets of partition %d after retention", rid, fl.LogEndOffset(), ll.LogEndOffset(), ps.Partition)
			}
		}
	}
	if total != n {
		t.Fatalf("leaders hold %d records, want %d", total, n)
	}
	waitFor(t, "metadata to drop the deleted objects", 10*time.Second, func() bool {
		for _, r := range c.replicators {
			for _, o := range r.State().Objects() {
				for _, part := range o.Parts {
					if part.State != metadata.DeleteSegmentFinished {
						return false
					}
				}
			}
		}
		return true
	}, c.sources()...)
}

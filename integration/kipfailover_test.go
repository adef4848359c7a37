package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKIPFailoverProcesses is KIP-1176's failover example as written, with
// three `kwal broker` processes, versitygw (one store per rack: a prefix
// per rack, reached by each broker through its own cuttable link) and a
// shared metadata Kafka: RF 3; leader B1 has offsets 0–10 uploaded and
// published, B2 is at 5 (log end 6), B3 at 7 (log end 8); B1 is killed
// (SIGKILL) and its AZ's store becomes unreachable. Liveness fences B1 and
// the controller elects, cleanly, the first in-sync replica in replica
// order:
//   - elect=B2 (replicas [1 2 3]): the partition continues at 6, B3
//     truncates 8 → 6, a dead range (the KIP's DELETE for 6–10) kills B1's
//     entries from 6 on;
//   - elect=B3 (B3 in az2 and B2 in az3, so replicas [1 3 2]): it continues
//     at 8, B2 catches up to 8 from B3 (B1's objects are out of reach) and
//     B1's 8–10 are dead.
//
// Followers are held at their offsets by cutting their links, both to B1
// (fetches, fallbacks, OffsetForLeaderEpoch) and to az1's store, while
// their heartbeats through the metadata Kafka keep them live;
// replica.lag.time.max.ms is long enough that they stay in the ISR. What
// is checked: nothing of B1's past the new leader's log end is ever
// served by any broker (every broker, followers too, is read every 20 ms
// all along);
// the dead range is in __remote_wal_log_metadata and covers every entry
// of B1's epoch past it; the survivors hold the same records; the new
// leader uploads to its own rack's store; `kwal audit` of az1's store
// finds nothing wrong and accounts for every dead entry and dead object.
func TestKIPFailoverProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: the multi-process KIP failover test did not run")
	}
	env := objstoretest.S3Env(t)
	bin := buildKwal(t)
	for _, elect := range []int32{2, 3} {
		t.Run(fmt.Sprintf("elect=B%d", elect), func(t *testing.T) { runKIPFailoverProcesses(t, env, bin, elect) })
	}
}

// kipCluster is the three brokers with the links the test cuts.
type kipCluster struct {
	*compatCluster
	meta   []string            // the metadata Kafka
	toB1   map[int32]*tcpProxy // follower id → its link to B1
	toAZ1  map[int32]*tcpProxy // broker id → its link to az1's store
	stores map[string]string   // rack → the store's URL, reached directly
}

func startKIPCluster(t *testing.T, env objstoretest.Env, bin string, racks []string) *kipCluster {
	t.Helper()
	emb, err := metadata.StartEmbedded(t.TempDir(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	base := "kip-" + objstoretest.RandomPrefix()
	kc := &kipCluster{meta: emb.Bootstrap(), toB1: map[int32]*tcpProxy{}, toAZ1: map[int32]*tcpProxy{}, stores: map[string]string{}}
	for _, rack := range racks {
		kc.stores[rack] = s3StoreURLAt(env, env.Endpoint, base+rack+"/")
	}
	s3Host := strings.TrimPrefix(env.Endpoint, "http://")
	props := clusterProps(s3StoreURLAt(env, env.Endpoint, base+"default/"), emb.Bootstrap(), map[string]string{
		// Held followers lag for the whole test and must stay in the ISR.
		"replica.lag.time.max.ms": "60000",
		// 4 s: a held follower, live, must not be fenced by a stall of
		// the loaded machine (that would change who is elected).
		"broker.session.timeout.ms":    "4000",
		"broker.heartbeat.interval.ms": "300",
		"auto.leader.rebalance.enable": "false",
	})
	for _, rack := range racks[1:] {
		props["remote.wal.storage.url."+rack] = kc.stores[rack]
	}
	var b1 string
	kc.compatCluster = startCompatClusterWith(t, bin, racks, props, func(b *compatBroker) (map[int32]string, map[string]string) {
		az1 := startProxy(t, s3Host)
		kc.toAZ1[b.id] = az1
		extra := map[string]string{
			"kwal.metrics.listener":      fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			"remote.wal.storage.url.az1": s3StoreURLAt(env, "http://"+az1.addr(), base+racks[0]+"/"),
		}
		if b.id == 1 {
			b1 = b.addr()
			return nil, extra
		}
		link := startProxy(t, b1)
		kc.toB1[b.id] = link
		return map[int32]string{1: link.addr()}, extra
	})
	t.Cleanup(func() { kc.stopAll(t) })
	return kc
}

// kipTopic is a topic name whose one partition AssignReplicas places as
// replicas (B1 first, so B1 leads).
func kipTopic(t *testing.T, c *compatCluster, replicas []int32) string {
	t.Helper()
	var infos []broker.BrokerInfo
	for _, b := range c.brokers {
		infos = append(infos, broker.BrokerInfo{ID: b.id, Rack: b.rack})
	}
	for i := range 1000 {
		name := fmt.Sprintf("kip-%d", i)
		ps, err := broker.AssignReplicas(name, 1, int16(len(replicas)), infos)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(ps[0].Replicas, replicas) {
			return name
		}
	}
	t.Fatalf("no topic name is placed on replicas %v", replicas)
	return ""
}

func runKIPFailoverProcesses(t *testing.T, env objstoretest.Env, bin string, elect int32) {
	racks := []string{"az1", "az2", "az3"}
	replicas := []int32{1, 2, 3}
	start := int64(6) // the new leader's log end: where the partition continues
	if elect == 3 {
		racks = []string{"az1", "az3", "az2"} // B3 in az2 comes before B2 in az3
		replicas = []int32{1, 3, 2}
		start = 8
	}
	kc := startKIPCluster(t, env, bin, racks)
	c := kc.compatCluster
	b1, b2, b3 := c.brokers[0], c.brokers[1], c.brokers[2]
	topic := kipTopic(t, c, replicas)
	c.createTopic(t, topic, 1, modeConfigs("remotewal"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	before := c.partitionView(t, topic, 0)
	if before.leader != 1 || !slices.Equal(before.replicas, replicas) {
		t.Fatalf("%s: leader %d, replicas %v; want B1 leading replicas %v", topic, before.leader, before.replicas, replicas)
	}
	tp := metadata.TopicPartition{Topic: topic, Partition: 0}
	want := func(off int64) string {
		if off >= start {
			return fmt.Sprintf("after-%d", off-start)
		}
		return fmt.Sprintf("kip-%d", off)
	}
	watch := watchServed(c, topic, want)

	// 0–5 acknowledged by every replica.
	for i := range 6 {
		if code := produceTo(t, ctx, b1.addr(), topic, -1, fmt.Sprintf("kip-%d", i)); code != 0 {
			t.Fatalf("acks=all produce of kip-%d: error code %d", i, code)
		}
	}
	for _, b := range c.brokers {
		waitLogEnd(t, ctx, b, topic, 6)
	}
	// B2 stays at 5.
	kc.toB1[2].cut()
	kc.toAZ1[2].cut()
	for i := 6; i < 8; i++ {
		if code := produceTo(t, ctx, b1.addr(), topic, 1, fmt.Sprintf("kip-%d", i)); code != 0 {
			t.Fatalf("acks=1 produce of kip-%d: error code %d", i, code)
		}
	}
	waitLogEnd(t, ctx, b3, topic, 8)
	// B3 stays at 7.
	kc.toB1[3].cut()
	kc.toAZ1[3].cut()
	for i := 8; i < 11; i++ {
		if code := produceTo(t, ctx, b1.addr(), topic, 1, fmt.Sprintf("kip-%d", i)); code != 0 {
			t.Fatalf("acks=1 produce of kip-%d: error code %d", i, code)
		}
	}
	waitLogEnd(t, ctx, b1, topic, 11)
	var md kipMetadata
	waitUntil(t, ctx, "B1's 0–10 uploaded and published", func() bool {
		md = readKIPMetadata(t, ctx, kc.meta, tp)
		return md.lastOffset(before.epoch) == 10
	})
	if e2, e3 := logEndOf(t, b2, topic), logEndOf(t, b3, topic); e2 != 6 || e3 != 8 {
		t.Fatalf("before the failover B2 at log end %d, B3 at %d; want 6 and 8", e2, e3)
	}
	if isr := c.isr(t, topic, 0); !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Fatalf("before the failover the ISR is %v, want [1 2 3]", isr)
	}
	for _, o := range md.objects {
		if o.BrokerID == 1 && o.Bucket != "az1" {
			t.Fatalf("B1 uploaded object %s to store %q, want its rack's (az1)", o.ID, o.Bucket)
		}
	}

	// B1's AZ is lost: the broker and its store.
	killed := time.Now()
	c.kill(t, 0)
	for _, p := range kc.toAZ1 {
		p.cut()
	}
	var after leaderView
	waitUntil(t, ctx, fmt.Sprintf("B%d elected", elect), func() bool {
		after = c.partitionView(t, topic, 0, 1)
		return after.leader >= 0 && after.epoch > before.epoch
	})
	if after.leader != elect {
		t.Fatalf("B%d elected (ISR %v, epoch %d), want B%d", after.leader, after.isr, after.epoch, elect)
	}
	t.Logf("B1 killed at leader epoch %d; B%d leads at epoch %d after %v (ISR %v)", before.epoch, elect, after.epoch,
		time.Since(killed).Round(time.Millisecond), after.isr)
	leader := c.brokers[elect-1]
	other := b3
	if elect == 3 {
		other = b2
	}
	// B3 truncates to the new leader's log end (elect=B2); B2 catches up
	// to it from B3 (elect=B3).
	waitLogEnd(t, ctx, leader, topic, start)
	waitLogEnd(t, ctx, other, topic, start)
	t.Logf("B%d at the new leader's log end %d, %v after the kill", other.id, start, time.Since(killed).Round(time.Millisecond))
	waitUntil(t, ctx, "the new leader's dead range", func() bool {
		md = readKIPMetadata(t, ctx, kc.meta, tp)
		return len(md.dead) > 0
	})
	for _, d := range md.dead { // a retried publish may repeat it
		if d.LeaderEpoch != after.epoch || d.StartOffset != start || d.BrokerID != elect {
			t.Fatalf("dead ranges %+v, want only one of epoch %d from %d by B%d", md.dead, after.epoch, start, elect)
		}
	}
	deadEntries, deadObjects := md.deadIn("az1", before.epoch, start)
	var covered []int64
	for _, e := range deadEntries {
		for o := e.BaseOffset; o <= e.LastOffset; o++ {
			covered = append(covered, o)
		}
	}
	slices.Sort(covered)
	if first, last := covered[0], covered[len(covered)-1]; first != start || last != 10 || len(covered) != int(11-start) {
		t.Fatalf("B1's dead entries cover %v, want %d–10", covered, start)
	}
	t.Logf("dead range of epoch %d from %d: %d of B1's entries (%d–10) dead, %d of its objects dead", after.epoch, start,
		len(deadEntries), start, len(deadObjects))

	// The partition continues at start with the new epoch.
	for i := range 3 {
		if code := produceTo(t, ctx, leader.addr(), topic, -1, fmt.Sprintf("after-%d", i)); code != 0 {
			t.Fatalf("acks=all produce of after-%d to B%d: error code %d", i, elect, code)
		}
	}
	end := start + 3
	waitLogEnd(t, ctx, leader, topic, end)
	waitLogEnd(t, ctx, other, topic, end)
	waitUntil(t, ctx, "the new leader's slices published", func() bool {
		md = readKIPMetadata(t, ctx, kc.meta, tp)
		return md.lastOffset(after.epoch) == end-1
	})
	for _, o := range md.objects {
		for _, e := range o.Entries {
			if e.TopicPartition != tp || e.LeaderEpoch != after.epoch {
				continue
			}
			if o.Bucket != leader.rack {
				t.Errorf("the new leader uploaded [%d, %d] to store %q, want its rack's (%s)", e.BaseOffset, e.LastOffset, o.Bucket, leader.rack)
			}
			if e.BaseOffset < start {
				t.Errorf("the new leader's slice [%d, %d] starts before its log end at election (%d)", e.BaseOffset, e.LastOffset, start)
			}
		}
	}
	survivors := []*compatBroker{leader, other}
	for _, b := range survivors {
		var got [][]byte
		waitUntil(t, ctx, fmt.Sprintf("B%d to serve up to %d", b.id, end), func() bool {
			got = fetchFromBrokerQuiet(ctx, b.addr(), topic, 0)
			return int64(len(got)) >= end
		})
		checkKIPValues(t, fmt.Sprintf("B%d", b.id), got, end, want)
	}
	for _, b := range survivors {
		got := consumeFranzWith(t, []string{leader.addr(), other.addr()}, topic, 0, int(end), kgo.Rack(b.rack))
		checkKIPValues(t, "a consumer in "+b.rack, got, end, want)
	}
	served := watch.stop()
	if len(served.bad) > 0 {
		t.Errorf("served against the new leader's log (first %d of %d): %v", min(5, len(served.bad)), len(served.bad), served.bad[:min(5, len(served.bad))])
	}
	for _, b := range c.brokers {
		if served.reads[b.id] == 0 {
			t.Errorf("B%d was never read: the watch saw nothing of it", b.id)
		}
	}
	t.Logf("brokers read all along (reads by broker %v): nothing of B1's past %d served", served.reads, start-1)

	// kwal audit of the lost AZ's store (read directly, as an operator
	// would once the AZ is back): no finding, every dead entry and dead
	// object accounted for.
	rep := runAudit(t, ctx, bin, kc.stores["az1"], "az1", kc.meta)
	awaiting := 0
	for _, n := range rep.Notes {
		if n.Kind == "dead-awaiting-deletion" {
			awaiting++
		}
	}
	if len(rep.Findings) > 0 || rep.DeadSlices != len(deadEntries) || awaiting+rep.DeadGone != len(deadObjects) || len(deadObjects) == 0 {
		t.Errorf("kwal audit of az1: findings %+v, %d dead slices, %d dead objects stored and %d gone; want none, %d and %d (>0) in all",
			rep.Findings, rep.DeadSlices, awaiting, rep.DeadGone, len(deadEntries), len(deadObjects))
	}
	t.Logf("kwal audit of az1: %d objects, %d dead slices, %d dead objects awaiting deletion, %d gone", rep.Objects, rep.DeadSlices, awaiting, rep.DeadGone)
}

// checkKIPValues checks that got is want(0), …, want(n-1) exactly.
func checkKIPValues(t *testing.T, who string, got [][]byte, n int64, want func(int64) string) {
	t.Helper()
	if int64(len(got)) != n {
		t.Errorf("%s: %d records, want %d", who, len(got), n)
	}
	for off, v := range got {
		if string(v) != want(int64(off)) {
			t.Errorf("%s: offset %d holds %q, want %q", who, off, v, want(int64(off)))
		}
	}
}

// servedWatch reads every broker of a cluster from offset 0 to its high
// watermark over and over until stopped, and keeps every record served
// that differs from the expected log.
type servedWatch struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	bad   []string
	reads map[int32]int // successful reads, by broker
}

func watchServed(c *compatCluster, topic string, want func(int64) string) *servedWatch {
	w := &servedWatch{stopc: make(chan struct{}), done: make(chan struct{}), reads: map[int32]int{}}
	go func() {
		defer close(w.done)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { <-w.stopc; cancel() }()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond): // a sampling interval, not a wait for state
			}
			for _, b := range c.brokers {
				got, err := readBroker(ctx, b.addr(), topic, 0)
				if err != nil {
					continue // a dead broker, a leader moving: served nothing
				}
				w.mu.Lock()
				w.reads[b.id]++
				for off, v := range got {
					if string(v) != want(int64(off)) {
						w.bad = append(w.bad, fmt.Sprintf("B%d served %q at offset %d", b.id, v, off))
					}
				}
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// stop ends the watch and returns it, read.
func (w *servedWatch) stop() *servedWatch {
	close(w.stopc)
	<-w.done
	return w
}

// logEndOf is the log end of b's replica of topic-0 as its
// kwal_partition_log_end_offset metric says, or -1.
func logEndOf(t *testing.T, b *compatBroker, topic string) int64 {
	t.Helper()
	if b.metricsAddr == "" {
		t.Fatalf("broker %d has no kwal.metrics.listener", b.id)
	}
	resp, err := http.Get("http://" + b.metricsAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "kwal_partition_log_end_offset{") || !strings.Contains(line, `partition="0"`) ||
			!strings.Contains(line, `topic="`+topic+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics of broker %d: %q: %v", b.id, line, err)
		}
		return int64(v)
	}
	return -1
}

func waitLogEnd(t *testing.T, ctx context.Context, b *compatBroker, topic string, want int64) {
	t.Helper()
	last := int64(-2)
	waitUntil(t, ctx, fmt.Sprintf("B%d at log end %d", b.id, want), func() bool {
		last = logEndOf(t, b, topic)
		return last == want
	})
}

// kipMetadata is what __remote_wal_log_metadata says about one partition.
type kipMetadata struct {
	tp      metadata.TopicPartition
	objects []*metadata.ObjectMetadata // the last snapshot of each object with an entry of tp
	dead    []metadata.DeadRange
}

func readKIPMetadata(t *testing.T, ctx context.Context, bootstrap []string, tp metadata.TopicPartition) kipMetadata {
	t.Helper()
	md := kipMetadata{tp: tp}
	byRef := map[metadata.ObjectRef]int{}
	err := metadata.ReadTopic(ctx, metadata.TopicConfig{Bootstrap: bootstrap, ClientID: "kip-test"}, testLogger(t), func(r metadata.TopicRecord) error {
		if r.Err != nil {
			return fmt.Errorf("metadata record %d/%d: %w", r.Partition, r.Offset, r.Err)
		}
		switch ev := r.Event.(type) {
		case *metadata.ObjectMetadata:
			if !slices.ContainsFunc(ev.Entries, func(e metadata.SliceEntry) bool { return e.TopicPartition == tp }) {
				return nil
			}
			if i, ok := byRef[ev.Ref()]; ok {
				md.objects[i] = ev
			} else {
				byRef[ev.Ref()] = len(md.objects)
				md.objects = append(md.objects, ev)
			}
		case *metadata.DeadRange:
			if ev.TopicPartition == tp {
				md.dead = append(md.dead, *ev)
			}
		}
		return nil
	})
	if err != nil {
		t.Logf("reading the metadata topic: %v", err) // polled again
		return kipMetadata{tp: tp}
	}
	return md
}

// lastOffset is the highest LastOffset of tp's entries of epoch, or -1.
func (m kipMetadata) lastOffset(epoch int32) int64 {
	last := int64(-1)
	for _, o := range m.objects {
		for _, e := range o.Entries {
			if e.TopicPartition == m.tp && e.LeaderEpoch == epoch {
				last = max(last, e.LastOffset)
			}
		}
	}
	return last
}

// deadIn returns tp's entries of epoch from offset from on, in store, and
// the objects of store whose every entry is such an entry.
func (m kipMetadata) deadIn(store string, epoch int32, from int64) (entries []metadata.SliceEntry, objects []metadata.ObjectID) {
	for _, o := range m.objects {
		if o.Bucket != store {
			continue
		}
		dead := 0
		for _, e := range o.Entries {
			if e.TopicPartition == m.tp && e.LeaderEpoch == epoch && e.BaseOffset >= from {
				entries = append(entries, e)
				dead++
			}
		}
		if dead > 0 && dead == len(o.Entries) {
			objects = append(objects, o.ID)
		}
	}
	return entries, objects
}

// auditReport is the part of `kwal audit --json` the tests read.
type auditReport struct {
	Objects  int `json:"objects"`
	Findings []struct {
		Kind, Key, Detail string
	} `json:"findings"`
	Notes []struct {
		Kind, Key, Detail string
	} `json:"notes"`
	DeadSlices int `json:"dead_slices"`
	DeadGone   int `json:"dead_gone"`
}

// runAudit runs `kwal audit` on the store with id storeID against the
// metadata Kafka and returns its JSON report.
func runAudit(t *testing.T, ctx context.Context, bin, store, storeID string, bootstrap []string) auditReport {
	t.Helper()
	out := filepath.Join(t.TempDir(), "audit.json")
	cmd := exec.CommandContext(ctx, bin, "audit", "--store", store, "--store-id", storeID,
		"--bootstrap", strings.Join(bootstrap, ","), "--json", out)
	text, err := cmd.CombinedOutput()
	t.Logf("kwal audit --store-id %s:\n%s", storeID, text)
	data, rerr := os.ReadFile(out)
	if rerr != nil {
		t.Fatalf("kwal audit: %v (no report: %v)", err, rerr)
	}
	var rep auditReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("kwal audit report: %v", err)
	}
	return rep
}

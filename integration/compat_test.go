package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kwal/kwal/internal/procs"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/kwal/kwal/objstore/storeurl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCompat runs real clients against a real three-process cluster:
// three `kwal broker` processes in two racks (1@az1, 2@az2, 3@az1), one
// versitygw for the remote WAL and one kfake (in this process) for the
// remote-WAL metadata and the controller state (__kwal_cluster_state), in
// classic and in remotewal mode:
//
//   - franz-go produces 100,000 records with acks=all to a partition led in
//     az1 while broker 2 (the follower in az2) is killed with SIGKILL and
//     restarted; kcat then consumes the partition with client.rack=az2
//     (fetch from follower) and the bytes must equal every acknowledged
//     record, exactly once and in order;
//   - kcat -P and kafkajs 2.2.4 produce, franz-go reads back.
//
// It needs versitygw (KWAL_S3_ENDPOINT), kcat (KWAL_KCAT or PATH) and node
// with kafkajs (KWAL_KAFKAJS_DIR); scripts/test-env.sh provides all three.
// Each missing one skips what needs it, loudly.
func TestCompat(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: the cross-process compatibility tests did not run")
	}
	env := objstoretest.S3Env(t)
	bin := buildKwal(t)
	logger := testLogger(t)
	emb, err := metadata.StartEmbedded(t.TempDir(), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	store := s3StoreURL(env, "compat")
	c := startCompatCluster(t, bin, []string{"az1", "az2", "az1"}, clusterProps(store, emb.Bootstrap(), map[string]string{
		"replica.lag.time.max.ms": "3000",
	}))
	defer c.stopAll(t)

	for _, mode := range []string{"classic", "remotewal"} {
		configs := modeConfigs(mode)
		t.Run(mode, func(t *testing.T) {
			t.Run("franz-go-produce-kcat-consume-az2-follower-killed", func(t *testing.T) {
				kcat := kcatPath(t)
				topic := "compat-" + mode + "-kill"
				c.createTopic(t, topic, 3, configs)
				p := c.partitionLedIn(t, topic, "az1")
				testKillFollower(t, c, kcat, topic, p, 1) // broker 2, az2
				// classic runs first: only remotewal topics upload objects.
				n := countStoreObjects(t, store)
				if (mode == "remotewal") != (n > 0) {
					t.Fatalf("%d objects in the remote WAL store after the %s run", n, mode)
				}
				t.Logf("%d combined objects in the remote WAL store", n)
			})
			t.Run("kcat-produce-franz-go-consume", func(t *testing.T) {
				kcat := kcatPath(t)
				topic := "compat-" + mode + "-kcat"
				c.createTopic(t, topic, 1, configs)
				const n = 5000
				var in bytes.Buffer
				want := make([][]byte, n)
				for i := range want {
					want[i] = fmt.Appendf(nil, "kcat-%s-%08d-%s", mode, i, strings.Repeat("k", 60))
					in.Write(want[i])
					in.WriteByte('\n')
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, kcat, "-P", "-b", c.bootstrap(), "-t", topic, "-p", "0",
					"-X", "acks=all", "-X", "enable.idempotence=true")
				cmd.Stdin = &in
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("kcat -P: %v\n%s", err, out)
				}
				checkValues(t, consumeFranz(t, c, topic, 0, n), want)
			})
			for _, comp := range []string{"none", "gzip"} {
				t.Run("kafkajs-produce-franz-go-consume/compression="+comp, func(t *testing.T) {
					node, dir := kafkajsPath(t)
					topic := "compat-" + mode + "-kafkajs-" + comp
					c.createTopic(t, topic, 1, configs)
					const n = 5000
					prefix := "kafkajs-" + mode + "-" + comp
					ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
					defer cancel()
					args := []string{filepath.Join(dir, "produce.js"), c.bootstrap(), topic, "0", strconv.Itoa(n), prefix}
					if comp != "none" {
						args = append(args, comp)
					}
					cmd := exec.CommandContext(ctx, node, args...)
					cmd.Dir = dir
					out, err := cmd.Output()
					if err != nil {
						var ee *exec.ExitError
						if errors.As(err, &ee) {
							t.Fatalf("kafkajs: %v\n%s%s", err, out, ee.Stderr)
						}
						t.Fatalf("kafkajs: %v", err)
					}
					var res struct{ Acked int }
					if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil || res.Acked != n {
						t.Fatalf("kafkajs said %q (%v), want %d acknowledged", out, err, n)
					}
					want := make([][]byte, n)
					for i := range want {
						want[i] = fmt.Appendf(nil, "%s-%08d", prefix, i)
					}
					checkValues(t, consumeFranz(t, c, topic, 0, n), want)
				})
			}
			t.Run("kafkajs-admin", func(t *testing.T) {
				node, dir := kafkajsPath(t)
				topic := "compat-" + mode + "-admin"
				c.createTopic(t, topic, 1, configs)
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "admin.js"), c.bootstrap(), topic)
				cmd.Dir = dir
				out, err := cmd.Output()
				if err != nil {
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						t.Fatalf("kafkajs admin: %v\n%s%s", err, out, ee.Stderr)
					}
					t.Fatalf("kafkajs admin: %v", err)
				}
				var res struct {
					Partitions        int
					OffsetAtTimestamp int64
					ListedAfterDelete bool
				}
				if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
					t.Fatalf("kafkajs admin said %q: %v", out, err)
				}
				if res.Partitions != 3 || res.OffsetAtTimestamp != 5 || res.ListedAfterDelete {
					t.Fatalf("kafkajs admin saw %+v, want 3 partitions after createPartitions, offset 5 at t0+5s, the topic gone after deleteTopics", res)
				}
				// Every broker process removes the topic's logs from disk.
				waitUntil(t, ctx, "every broker to remove the deleted topic's logs", func() bool {
					for _, b := range c.brokers {
						if m, _ := filepath.Glob(filepath.Join(b.dir, "logs", topic+"-*")); len(m) > 0 {
							return false
						}
					}
					return true
				})
			})
		})
	}
}

// s3StoreURL is a remote.wal.storage.url for the test S3 server, under a
// fresh prefix starting with name.
func s3StoreURL(env objstoretest.Env, name string) string {
	return s3StoreURLAt(env, env.Endpoint, name+"-"+objstoretest.RandomPrefix())
}

// s3StoreURLAt is a remote.wal.storage.url for prefix in the test S3
// server's bucket, reached at endpoint (env.Endpoint, or a tcpProxy to it).
func s3StoreURLAt(env objstoretest.Env, endpoint, prefix string) string {
	store := url.URL{Scheme: "s3", Host: env.Bucket, Path: "/" + prefix}
	store.RawQuery = url.Values{
		"endpoint": {endpoint}, "region": {"us-east-1"}, "path_style": {"true"}, "create_bucket": {"true"},
	}.Encode()
	return store.String()
}

// clusterProps are the server.properties of a three-broker RF 3 cluster
// with the remote WAL enabled on store and the metadata Kafka at
// bootstrap, with extra on top.
func clusterProps(store string, bootstrap []string, extra map[string]string) map[string]string {
	props := map[string]string{
		"default.replication.factor":            "3",
		"min.insync.replicas":                   "2",
		"remote.log.wal.storage.system.enable":  "true",
		"remote.wal.storage.url":                store,
		"remote.wal.metadata.bootstrap.servers": strings.Join(bootstrap, ","),
	}
	for k, v := range extra {
		props[k] = v
	}
	return props
}

// testKillFollower produces 100,000 records to tp with acks=all, kills the
// broker victim (a follower of the partition) after a third of them are
// acknowledged and restarts it after two thirds; then it waits for the
// victim to be back in the ISR and reads the partition with kcat from the
// victim's rack. The log must hold every record once, in order.
func testKillFollower(t *testing.T, c *compatCluster, kcat, topic string, p int32, victim int) {
	const n = 100_000
	want := make([][]byte, n)
	for i := range want {
		want[i] = fmt.Appendf(nil, "%s-%08d-%s", topic, i, strings.Repeat("v", 70))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(20_000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var acked, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	go func() {
		for i := range want {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: want[i]}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				acked.Add(1)
			})
		}
	}()
	start := time.Now()
	waitUntil(t, ctx, "a third acknowledged", func() bool { return acked.Load() >= n/3 })
	c.kill(t, victim)
	t.Logf("killed broker %d (SIGKILL) after %d acks in %v", c.brokers[victim].id, acked.Load(), time.Since(start))
	waitUntil(t, ctx, "two thirds acknowledged", func() bool { return acked.Load()+failed.Load() >= 2*n/3 })
	c.start(t, victim)
	t.Logf("restarted broker %d after %d acks", c.brokers[victim].id, acked.Load())
	waitUntil(t, ctx, "every record answered", func() bool { return acked.Load()+failed.Load() == n })
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d records not acknowledged; first error: %v", f, n, *firstErr.Load())
	}
	t.Logf("%d records acknowledged in %v", n, time.Since(start))
	waitUntil(t, ctx, fmt.Sprintf("broker %d back in the ISR of %s-%d", c.brokers[victim].id, topic, p), func() bool {
		return slices.Contains(c.isr(t, topic, p), c.brokers[victim].id)
	})

	// kcat from the follower's rack; -f '%s\n' prints each raw value.
	out, err := exec.CommandContext(ctx, kcat, "-C", "-b", c.bootstrap(), "-t", topic, "-p", strconv.Itoa(int(p)),
		"-o", "beginning", "-e", "-q", "-f", `%s\n`, "-X", "client.rack="+c.brokers[victim].rack).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kcat -C: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("kcat -C: %v", err)
	}
	var expect bytes.Buffer
	for _, v := range want {
		expect.Write(v)
		expect.WriteByte('\n')
	}
	if !bytes.Equal(out, expect.Bytes()) {
		got := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
		checkValues(t, got, want) // names the first difference
		t.Fatalf("kcat output differs from the produced bytes (%d vs %d bytes)", len(out), expect.Len())
	}
	// The restarted follower's own log, read with Fetch requests sent to it
	// alone (a consumer fetch from a follower, v11+).
	checkValues(t, fetchFromBroker(t, ctx, c.brokers[victim].addr(), topic, p), want)
}

// fetchFromBroker reads partition p from offset 0 to the high watermark
// of the broker at addr with Fetch requests sent to that broker only, and
// checks offsets are dense.
func fetchFromBroker(t *testing.T, ctx context.Context, addr, topic string, p int32) [][]byte {
	t.Helper()
	out, err := readBroker(ctx, addr, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readBroker is fetchFromBroker, returning its failure.
func readBroker(ctx context.Context, addr, topic string, p int32) ([][]byte, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	br := cl.SeedBrokers()[0]
	// kgo sends the highest version both sides speak (Fetch v17): topics
	// are named by id there.
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, br)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s from %s: %w", topic, addr, err)
	}
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("metadata of %s from %s: %d topics, error %v", topic, addr, len(mresp.Topics), mresp.Topics)
	}
	topicID := mresp.Topics[0].TopicID
	var out [][]byte
	var next int64
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 8<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = p, next, -1, 4<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, br)
		if err != nil {
			return nil, fmt.Errorf("fetch %s-%d at %d from %s: %w", topic, p, next, addr, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, fmt.Errorf("fetch from %s: %d topics in the answer", addr, len(resp.Topics))
		}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: next, Topic: topic, Partition: p},
			&resp.Topics[0].Partitions[0], kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return nil, fmt.Errorf("fetch %s-%d at %d from %s: %w", topic, p, next, addr, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset != next {
				return nil, fmt.Errorf("%s: offset %d after %d: a gap or a duplicate", addr, r.Offset, next-1)
			}
			next++
			out = append(out, r.Value)
		}
		if next >= fp.HighWatermark {
			return out, nil
		}
		if len(fp.Records) == 0 {
			return nil, fmt.Errorf("%s: no progress at offset %d, high watermark %d", addr, next, fp.HighWatermark)
		}
	}
}

// countStoreObjects counts the objects of the store at storeURL.
func countStoreObjects(t *testing.T, storeURL string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := storeurl.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	n, after := 0, ""
	for {
		page, err := st.List(ctx, objstore.ListOptions{StartAfter: after})
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Objects)
		if !page.Truncated || len(page.Objects) == 0 {
			return n
		}
		after = page.Objects[len(page.Objects)-1].Key
	}
}

// checkValues fails at the first value that differs.
func checkValues(t *testing.T, got, want [][]byte) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: got %q, want %q", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
}

// consumeFranz reads partition p from the start until n records and then
// until the high watermark, so extra records are seen too.
func consumeFranz(t *testing.T, c *compatCluster, topic string, p int32, n int) [][]byte {
	t.Helper()
	return consumeFranzWith(t, c.addrs(), topic, p, n)
}

// consumeFranzWith is consumeFranz through the brokers at seeds, with
// more client options (kgo.Rack to fetch from a follower).
func consumeFranzWith(t *testing.T, seeds []string, topic string, p int32, n int, opts ...kgo.Opt) [][]byte {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out [][]byte
	var next int64
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records of %s-%d: %v", len(out), n, topic, p, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		done := false
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				if r.Offset != next {
					t.Fatalf("offset %d after %d: a gap or a duplicate", r.Offset, next-1)
				}
				next++
				out = append(out, r.Value)
			}
			done = len(out) >= n && next >= fp.HighWatermark
		})
		if done {
			return out
		}
	}
}

func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func kcatPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KWAL_KCAT"); p != "" {
		return p
	}
	p, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("SKIPPED: kcat not found (set KWAL_KCAT or run under scripts/test-env.sh, which installs it); the librdkafka compatibility test did not run")
	}
	return p
}

func kafkajsPath(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("SKIPPED: node not found (scripts/test-env.sh installs it); the kafkajs compatibility test did not run")
	}
	dir = os.Getenv("KWAL_KAFKAJS_DIR")
	if dir == "" {
		dir, _ = filepath.Abs("kafkajs")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json")); err != nil {
		t.Skipf("SKIPPED: kafkajs is not installed in %s/node_modules (run scripts/test-env.sh, which runs npm ci); the kafkajs compatibility test did not run", dir)
	}
	return node, dir
}

// buildKwal builds the kwal binary once into a temporary directory.
func buildKwal(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kwal")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kwal")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kwal: %v\n%s", err, out)
	}
	return bin
}

type compatBroker struct {
	id    int32
	rack  string
	port  int
	dir   string
	props string
	proc  *procs.Process
	// metricsAddr is its kwal.metrics.listener, if set.
	metricsAddr string
}

func (b *compatBroker) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// compatCluster is a cluster of `kwal broker` processes.
type compatCluster struct {
	bin     string
	brokers []*compatBroker
}

// clusterAddrs in a property value stands for the cluster's own broker
// addresses (host:port,...), known only once startCompatCluster picks them.
const clusterAddrs = "$CLUSTER"

func startCompatCluster(t *testing.T, bin string, racks []string, props map[string]string) *compatCluster {
	t.Helper()
	return startCompatClusterWith(t, bin, racks, props, nil)
}

// brokerSetup adjusts one broker's server.properties before the cluster
// starts, once every broker has its port: peers replaces the address by
// which this broker knows a peer in its cluster.brokers (with a static
// list, that address is where it fetches from the peer: a link the test
// can put a tcpProxy on), props adds or overrides keys.
type brokerSetup func(b *compatBroker) (peers map[int32]string, props map[string]string)

// startCompatClusterWith is startCompatCluster with a brokerSetup (nil:
// every broker alike).
func startCompatClusterWith(t *testing.T, bin string, racks []string, props map[string]string, setup brokerSetup) *compatCluster {
	t.Helper()
	c := &compatCluster{bin: bin}
	for i, rack := range racks {
		b := &compatBroker{id: int32(i + 1), rack: rack, port: freePort(t), dir: t.TempDir()}
		c.brokers = append(c.brokers, b)
	}
	props = maps.Clone(props)
	for k, v := range props {
		props[k] = strings.ReplaceAll(v, clusterAddrs, c.bootstrap())
	}
	for _, b := range c.brokers {
		var peers map[int32]string
		all := maps.Clone(props)
		if setup != nil {
			var extra map[string]string
			peers, extra = setup(b)
			maps.Copy(all, extra)
		}
		b.metricsAddr = all["kwal.metrics.listener"]
		var list []string
		for _, o := range c.brokers {
			addr := o.addr()
			if a, ok := peers[o.id]; ok {
				addr = a
			}
			list = append(list, fmt.Sprintf("%d@%s#%s", o.id, addr, o.rack))
		}
		all["broker.id"] = strconv.Itoa(int(b.id))
		all["listeners"] = "PLAINTEXT://" + b.addr()
		all["log.dirs"] = filepath.Join(b.dir, "logs")
		all["cluster.brokers"] = strings.Join(list, ",")
		b.props = filepath.Join(b.dir, "server.properties")
		if err := procs.WriteProperties(b.props, all); err != nil {
			t.Fatal(err)
		}
		b.proc = procs.Broker(fmt.Sprintf("broker %d", b.id), bin, b.props, b.addr())
	}
	for i := range c.brokers {
		c.start(t, i)
	}
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := procs.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// start starts broker i and waits until it accepts connections.
func (c *compatCluster) start(t *testing.T, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.brokers[i].proc.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// kill sends SIGKILL to broker i and waits for it to die.
func (c *compatCluster) kill(t *testing.T, i int) {
	t.Helper()
	if err := c.brokers[i].proc.Kill(); err != nil {
		t.Fatal(err)
	}
}

// stopAll stops every running broker with SIGTERM (SIGKILL after 15 s)
// and logs the tail of each broker's log if the test failed.
func (c *compatCluster) stopAll(t *testing.T) {
	for _, b := range c.brokers {
		if b.proc != nil && !b.proc.Stop(15*time.Second) {
			t.Logf("broker %d did not stop on SIGTERM in 15 s; killed it", b.id)
		}
	}
	if t.Failed() {
		for _, b := range c.brokers {
			t.Logf("broker %d log tail:\n%s", b.id, procs.Tail(b.proc.LogPath, 40))
		}
	}
	if dir := os.Getenv("KWAL_TEST_LOG_DIR"); dir != "" {
		keepLogs(t, dir, c.brokers)
	}
}

// keepLogs copies every broker's whole log into dir (KWAL_TEST_LOG_DIR),
// named after the test, for reading after the test's temporary directories
// are gone.
func keepLogs(t *testing.T, dir string, brokers []*compatBroker) {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("KWAL_TEST_LOG_DIR: %v", err)
		return
	}
	for _, b := range brokers {
		data, err := os.ReadFile(b.proc.LogPath)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d-broker%d.log", name, time.Now().UnixNano(), b.id)), data, 0o644)
		}
		if err != nil {
			t.Logf("KWAL_TEST_LOG_DIR: broker %d: %v", b.id, err)
		}
	}
}

func (c *compatCluster) addrs() []string {
	var out []string
	for _, b := range c.brokers {
		out = append(out, b.addr())
	}
	return out
}

func (c *compatCluster) bootstrap() string { return strings.Join(c.addrs(), ",") }

func (c *compatCluster) admin(t *testing.T) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopic creates topic through one broker and waits until every
// broker's metadata shows it with a leader for each partition: the
// controller state reaches the other processes through the metadata Kafka.
func (c *compatCluster) createTopic(t *testing.T, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.admin(t).CreateTopic(ctx, partitions, 3, configs, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	waitTopicEverywhere(t, ctx, c, topic, int(partitions))
}

// waitTopicEverywhere waits until every broker's metadata shows topic
// with partitions partitions, each with a leader: the condition of
// createTopic, also for topics a client under test created. opts are the
// clients' options besides the seed (a secure listener's TLS and SASL).
func waitTopicEverywhere(t *testing.T, ctx context.Context, c *compatCluster, topic string, partitions int, opts ...kgo.Opt) {
	t.Helper()
	for _, b := range c.brokers {
		waitUntil(t, ctx, fmt.Sprintf("broker %d to show %s with %d partitions", b.id, topic, partitions), func() bool {
			md, err := brokerMetadata(ctx, b.addr(), topic, opts...)
			if err != nil || len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 || len(md.Topics[0].Partitions) != partitions {
				return false
			}
			for _, pd := range md.Topics[0].Partitions {
				if pd.Leader < 0 {
					return false
				}
			}
			return true
		})
	}
}

// brokerMetadata asks the broker at addr (only it) about topic; opts are
// the client's options besides the seed.
func brokerMetadata(ctx context.Context, addr, topic string, opts ...kgo.Opt) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	return req.RequestWith(ctx, cl.SeedBrokers()[0])
}

// partitionLedIn returns a partition of topic whose leader is in rack.
func (c *compatCluster) partitionLedIn(t *testing.T, topic, rack string) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := c.admin(t).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	racks := map[int32]string{}
	for _, b := range c.brokers {
		racks[b.id] = b.rack
	}
	for _, pd := range md.Topics[topic].Partitions.Sorted() {
		if racks[pd.Leader] == rack {
			return pd.Partition
		}
	}
	t.Fatalf("no partition of %s led in %s: %+v", topic, rack, md.Topics[topic].Partitions)
	return 0
}

// isr is the ISR of topic-p as the partition's leader reports it.
func (c *compatCluster) isr(t *testing.T, topic string, p int32) []int32 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, b := range c.brokers {
		md, err := brokerMetadata(ctx, b.addr(), topic)
		if err != nil || len(md.Topics) != 1 || int(p) >= len(md.Topics[0].Partitions) {
			continue
		}
		pd := md.Topics[0].Partitions[p]
		if pd.Leader != b.id {
			continue
		}
		return pd.ISR
	}
	return nil
}

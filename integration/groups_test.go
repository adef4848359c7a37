package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kwal/kwal/metadata"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroups runs consumer groups of real clients against a three-process
// cluster (`kwal broker` processes in two racks, controller state in an
// in-process kfake, classic replication, __consumer_offsets with RF 3):
//
//   - kcat -G: two members split the partitions; one leaves and the other
//     takes its partitions; after the coordinator's broker restarts, a new
//     member resumes from the committed offsets (no record of before);
//   - kafkajs consumer.run with two consumers in one group;
//   - franz-go group consumers committing while records flow and the
//     coordinator's broker is killed (SIGKILL) and restarted: no record is
//     lost, a record is read again only above the last offset committed
//     for its partition (duplicates are counted and logged), and a member
//     that joins afterwards reads only records produced after the commits.
//
// kcat and kafkajs come from scripts/test-env.sh; each missing one skips
// its part, loudly.
func TestGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: the cross-process group tests did not run")
	}
	bin := buildKwal(t)
	emb, err := metadata.StartEmbedded(t.TempDir(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	c := startCompatCluster(t, bin, []string{"az1", "az2", "az1"}, map[string]string{
		"default.replication.factor":            "3",
		"min.insync.replicas":                   "2",
		"offsets.topic.num.partitions":          "10",
		"group.initial.rebalance.delay.ms":      "0",
		"remote.wal.metadata.bootstrap.servers": strings.Join(emb.Bootstrap(), ","),
	})
	defer c.stopAll(t)

	t.Run("kcat-G", func(t *testing.T) { testKcatGroup(t, c, kcatPath(t)) })
	t.Run("kafkajs-consumer-run", func(t *testing.T) {
		node, dir := kafkajsPath(t)
		testKafkajsGroup(t, c, node, dir)
	})
	t.Run("franz-go-commit-across-coordinator-restart", func(t *testing.T) { testFranzGroupRestart(t, c) })
}

// produceSpread produces values prefix-from..from+n-1, record i to
// partition i % partitions, acks=all.
func produceSpread(t *testing.T, c *compatCluster, topic string, partitions int32, prefix string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := produceSpreadErr(ctx, c, topic, partitions, prefix, from, n); err != nil {
		t.Fatal(err)
	}
}

func produceSpreadErr(ctx context.Context, c *compatCluster, topic string, partitions int32, prefix string, from, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // kafkajs reads no snappy
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "%s-%08d", prefix, i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	return nil
}

// coordinatorIndex is the index in c.brokers of the group's coordinator
// (FindCoordinator; it creates __consumer_offsets on first use).
func (c *compatCluster) coordinatorIndex(t *testing.T, groupID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var leader int32 = -1
	waitUntil(t, ctx, "the coordinator of "+groupID, func() bool {
		res := c.admin(t).FindGroupCoordinators(ctx, groupID)
		r, ok := res[groupID]
		if !ok || r.Err != nil {
			return false
		}
		leader = r.NodeID
		return true
	})
	for i, b := range c.brokers {
		if b.id == leader {
			return i
		}
	}
	t.Fatalf("coordinator %d is not a broker of the cluster", leader)
	return -1
}

// waitGroup waits until the group is Stable with members members, each
// assigned at least one partition.
func (c *compatCluster) waitGroup(t *testing.T, groupID string, members int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitUntil(t, ctx, fmt.Sprintf("group %s stable with %d members", groupID, members), func() bool {
		dg, err := c.admin(t).DescribeGroups(ctx, groupID)
		if err != nil {
			return false
		}
		g := dg[groupID]
		if g.State != "Stable" || len(g.Members) != members {
			return false
		}
		for _, m := range g.Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok || len(ca.Topics) == 0 || len(ca.Topics[0].Partitions) == 0 {
				return false
			}
		}
		return true
	})
}

// kcatMember is a running `kcat -G` whose output lines ("partition value")
// arrive on lines.
type kcatMember struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	errb  bytes.Buffer
}

func startKcatMember(t *testing.T, c *compatCluster, kcat, groupID, topic string) *kcatMember {
	t.Helper()
	m := &kcatMember{lines: make(chan string, 100_000), done: make(chan struct{})}
	m.cmd = exec.Command(kcat, "-b", c.bootstrap(), "-G", groupID, "-f", `%p %s\n`, "-q", "-u",
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=10000", "-X", "auto.commit.interval.ms=200",
		"-X", "partition.assignment.strategy=range", topic)
	m.cmd.Stderr = &m.errb
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			m.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
		m.cmd.Wait()
	}()
	t.Cleanup(func() { m.stop() })
	return m
}

// stop ends the member the way a user does (SIGTERM): kcat commits and
// leaves the group.
func (m *kcatMember) stop() {
	select {
	case <-m.done:
		return
	default:
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
}

// collect reads lines until want distinct values arrived (or the
// deadline); it returns value → partition and the count of duplicates.
func collect(t *testing.T, what string, want int, ms ...*kcatMember) (map[string]int32, map[*kcatMember]map[int32]bool, int) {
	t.Helper()
	got := map[string]int32{}
	parts := map[*kcatMember]map[int32]bool{}
	dups := 0
	// One select over every member's lines and exit, and the deadline:
	// the loop blocks until something happens, it never polls.
	cases := make([]reflect.SelectCase, 0, 2*len(ms)+1)
	for _, m := range ms {
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.lines)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.done)})
	}
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(time.After(90 * time.Second))})
	for len(got) < want {
		i, v, _ := reflect.Select(cases)
		if i == len(cases)-1 {
			t.Fatalf("%s: %d of %d records after 90 s", what, len(got), want)
		}
		m := ms[i/2]
		if i%2 == 1 {
			// done closes after the member's last line was queued:
			// lines still buffered come first, then it is an exit.
			select {
			case l := <-m.lines:
				v = reflect.ValueOf(l)
			default:
				t.Fatalf("%s: kcat exited: %s", what, m.errb.String())
			}
		}
		l := v.String()
		p, val, ok := strings.Cut(l, " ")
		pn, err := strconv.Atoi(p)
		if !ok || err != nil {
			t.Fatalf("%s: kcat printed %q", what, l)
		}
		if _, dup := got[val]; dup {
			dups++
		}
		got[val] = int32(pn)
		if parts[m] == nil {
			parts[m] = map[int32]bool{}
		}
		parts[m][int32(pn)] = true
	}
	return got, parts, dups
}

func testKcatGroup(t *testing.T, c *compatCluster, kcat string) {
	const topic, groupID, parts = "groups-kcat", "kcat-group", 4
	c.createTopic(t, topic, parts, nil)
	a := startKcatMember(t, c, kcat, groupID, topic)
	b := startKcatMember(t, c, kcat, groupID, topic)
	c.waitGroup(t, groupID, 2)
	produceSpread(t, c, topic, parts, "first", 0, 400)
	got, byMember, dups := collect(t, "two members", 400, a, b)
	if len(byMember[a]) == 0 || len(byMember[b]) == 0 {
		t.Fatalf("the partitions were not split: a read %v, b read %v", byMember[a], byMember[b])
	}
	for p := range byMember[a] {
		if byMember[b][p] {
			t.Fatalf("partition %d read by both members", p)
		}
	}
	t.Logf("two members: a read partitions %v, b %v; %d records, %d duplicates", keys(byMember[a]), keys(byMember[b]), len(got), dups)

	// a leaves; b takes every partition.
	a.stop()
	c.waitGroup(t, groupID, 1)
	produceSpread(t, c, topic, parts, "second", 0, 400)
	_, byMember, _ = collect(t, "after a left", 400, b)
	if len(byMember[b]) != parts {
		t.Fatalf("after a left, b read partitions %v, want all %d", keys(byMember[b]), parts)
	}
	b.stop()

	// The coordinator's broker restarts; a new member resumes from the
	// committed offsets: it reads only what came after.
	ci := c.coordinatorIndex(t, groupID)
	c.kill(t, ci)
	c.start(t, ci)
	t.Logf("restarted the coordinator, broker %d", c.brokers[ci].id)
	produceSpread(t, c, topic, parts, "third", 0, 200)
	n := startKcatMember(t, c, kcat, groupID, topic)
	got, _, _ = collect(t, "after the restart", 200, n)
	for v := range got {
		if !strings.HasPrefix(v, "third-") {
			t.Fatalf("after the restart the group read %q again: committed offsets were not resumed", v)
		}
	}
	n.stop()
}

func keys(m map[int32]bool) []int32 {
	var out []int32
	for k := range m {
		out = append(out, k)
	}
	return out
}

func testKafkajsGroup(t *testing.T, c *compatCluster, node, dir string) {
	const topic, groupID, parts, n = "groups-kafkajs", "kafkajs-group", 4, 2000
	c.createTopic(t, topic, parts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "consume-group.js"), c.bootstrap(), topic, groupID, strconv.Itoa(n))
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.waitGroup(t, groupID, 2)
	produceSpread(t, c, topic, parts, "kafkajs", 0, n)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kafkajs consumers: %v\n%s%s", err, out.String(), errb.String())
	}
	var res struct {
		Members    []int
		Distinct   int
		Duplicates int
		Partitions [][]int32
	}
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &res); err != nil {
		t.Fatalf("kafkajs said %q: %v", out.String(), err)
	}
	if res.Distinct != n || len(res.Members) != 2 || res.Members[0] == 0 || res.Members[1] == 0 {
		t.Fatalf("kafkajs group: %+v", res)
	}
	t.Logf("kafkajs: members read %v records of partitions %v; %d duplicates", res.Members, res.Partitions, res.Duplicates)
}

func testFranzGroupRestart(t *testing.T, c *compatCluster) {
	const topic, groupID, parts, n = "groups-franz", "franz-group", 6, 30_000
	c.createTopic(t, topic, parts, nil)
	ci := c.coordinatorIndex(t, groupID)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()

	var (
		mu        sync.Mutex
		seen      = map[string]int{}
		committed = map[int32]int64{} // partition → highest offset committed (next to read)
		dups      int
		bad       []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for m := range 2 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.SessionTimeout(10*time.Second), kgo.RetryTimeout(60*time.Second),
			// A member loses partitions only between polls, after it
			// committed what it read (else a commit racing a revocation
			// legitimately lets another member read those records again).
			kgo.BlockRebalanceOnPoll())
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				fs := cl.PollFetches(pctx)
				pcancel()
				var recs []*kgo.Record
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					v := string(r.Value)
					if seen[v] > 0 {
						dups++
						if r.Offset < committed[r.Partition] {
							bad = append(bad, fmt.Sprintf("%s (partition %d offset %d) read again below the committed offset %d", v, r.Partition, r.Offset, committed[r.Partition]))
						}
					}
					seen[v]++
					recs = append(recs, r)
				})
				mu.Unlock()
				if len(recs) == 0 {
					cl.AllowRebalance()
					continue
				}
				cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
				err := cl.CommitRecords(cctx, recs...)
				ccancel()
				if err != nil {
					t.Logf("member %d: commit failed (its records stay uncommitted): %v", m, err)
				} else {
					mu.Lock()
					for _, r := range recs {
						committed[r.Partition] = max(committed[r.Partition], r.Offset+1)
					}
					mu.Unlock()
				}
				cl.AllowRebalance()
			}
		}()
	}
	c.waitGroup(t, groupID, 2)
	distinct := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	// Records keep flowing (acks=all, asynchronously: partitions led
	// elsewhere go on while the dead broker's retry) while the coordinator
	// is down.
	produced := make(chan error, 1)
	go func() { produced <- produceAsync(ctx, c, topic, parts, "franz", n) }()
	waitUntil(t, ctx, "a tenth consumed", func() bool { return distinct() >= n/10 })
	c.kill(t, ci)
	t.Logf("killed the coordinator, broker %d (SIGKILL), after %d records consumed", c.brokers[ci].id, distinct())
	time.Sleep(2 * time.Second) // an outage: the members' commits fail meanwhile
	c.start(t, ci)
	t.Logf("restarted broker %d after %d records consumed", c.brokers[ci].id, distinct())
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	waitUntil(t, ctx, "every record consumed", func() bool { return distinct() == n })
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d records read again below a committed offset, e.g. %s", len(bad), bad[0])
	}
	for i := range n {
		if v := fmt.Sprintf("franz-%08d", i); seen[v] == 0 {
			t.Fatalf("%s lost", v)
		}
	}
	t.Logf("franz-go: %d records, %d read twice (all above the last committed offset of their partition)", n, dups)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("timed out")
	}

	// The members left; a new one resumes from what they committed
	// (before, during and after the restart): it reads only newer records.
	produceSpread(t, c, topic, parts, "after", 0, 60)
	late, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	got := 0
	for got < 60 {
		fs := late.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("a new member read %d of 60 records: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !strings.HasPrefix(string(r.Value), "after-") {
				t.Fatalf("a new member read %s again: the committed offsets did not survive", r.Value)
			}
			got++
		})
	}
}

// produceAsync produces prefix-0..n-1, record i to partition i %
// partitions, acks=all, without waiting record by record.
func produceAsync(ctx context.Context, c *compatCluster, topic string, partitions int32, prefix string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(n))
	if err != nil {
		return err
	}
	defer cl.Close()
	errs := make(chan error, n)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "%s-%08d", prefix, i)},
			func(_ *kgo.Record, err error) { errs <- err })
	}
	for range n {
		if err := <-errs; err != nil {
			return fmt.Errorf("produce to %s: %w", topic, err)
		}
	}
	return nil
}

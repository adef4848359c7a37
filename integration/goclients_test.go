package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestGoClients runs the two other mainstream Go Kafka clients, IBM/sarama
// and segmentio/kafka-go, against a three-process cluster (as TestCompat:
// `kwal broker` processes 1@az1, 2@az2, 3@az1, versitygw, an in-process
// kfake), on classic and on remote-WAL topics:
//
//   - sarama: an idempotent SyncProducer (acks=all, LZ4) writes 3,000
//     records to three partitions, each acknowledged at dense offsets
//     0..999 of its partition; two sarama ConsumerGroup members (one
//     fetching from a follower in az2) read them from the oldest offset,
//     marking and committing: every record is read at least once (a
//     rebalance may hand out records whose offsets were not yet
//     committed), and each claim reads its partition densely in offset
//     order with the produced values; after the members stop, the group's
//     committed offsets (kadm, and sarama's ListConsumerGroupOffsets) are
//     the partitions' end offsets; the Empty group is described and listed
//     with sarama's ClusterAdmin, still of protocol type consumer as in
//     Kafka, and deleted;
//   - sarama ClusterAdmin: CreateTopic with a config, DescribeTopics,
//     ListTopics (Metadata + DescribeConfigs), DescribeConfig,
//     IncrementalAlterConfig, CreatePartitions (the new partition takes a
//     record), DeleteTopic;
//   - kafka-go: kafka.Client.Metadata and Conn.ReadPartitions show the
//     brokers, their racks and the topic's partitions; a Writer (acks=all,
//     round robin, Snappy) writes 3,000 records; a group Reader
//     (ReadMessage commits) reads each once, densely and in order per
//     partition; the committed offsets (kadm) are the end offsets, and
//     the group, once the Reader has left, is Empty and of type consumer; a
//     partition Reader without a group reads partition 0 from the first
//     offset and sees the same records.
//
// It needs versitygw (KWAL_S3_ENDPOINT; scripts/test-env.sh provides it).
// KWAL_TEST_DEBUG=1 sends sarama's and kafka-go's logs to the test log.
func TestGoClients(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: the sarama and kafka-go compatibility tests did not run")
	}
	env := objstoretest.S3Env(t)
	bin := buildKwal(t)
	emb, err := metadata.StartEmbedded(t.TempDir(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	c := startCompatCluster(t, bin, []string{"az1", "az2", "az1"}, clusterProps(s3StoreURL(env, "goclients"), emb.Bootstrap(), map[string]string{
		"offsets.topic.num.partitions":     "10",
		"group.initial.rebalance.delay.ms": "0",
	}))
	defer c.stopAll(t)

	for _, mode := range []string{"classic", "remotewal"} {
		configs := modeConfigs(mode)
		t.Run(mode, func(t *testing.T) {
			t.Run("sarama-idempotent-producer-consumer-group", func(t *testing.T) { testSaramaProduceGroup(t, c, mode, configs) })
			t.Run("sarama-cluster-admin", func(t *testing.T) { testSaramaAdmin(t, c, mode, configs) })
			t.Run("kafka-go-writer-group-reader", func(t *testing.T) { testKafkaGo(t, c, mode, configs) })
		})
	}
}

// goClientsRecords is how many records each client produces per mode.
const goClientsRecords = 3000

// clientLogger sends a client library's log lines to t.Log until t ends
// (the libraries' goroutines may still log after that: those lines are
// dropped). It is a sarama.StdLogger and a kafka.Logger.
type clientLogger struct {
	mu     sync.Mutex
	t      *testing.T
	prefix string
}

func newClientLogger(t *testing.T, prefix string) *clientLogger {
	l := &clientLogger{t: t, prefix: prefix}
	t.Cleanup(func() {
		l.mu.Lock()
		l.t = nil
		l.mu.Unlock()
	})
	return l
}

func (l *clientLogger) Printf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.t != nil {
		l.t.Log(l.prefix + strings.TrimSuffix(fmt.Sprintf(format, v...), "\n"))
	}
}
func (l *clientLogger) Print(v ...any)   { l.Printf("%s", fmt.Sprint(v...)) }
func (l *clientLogger) Println(v ...any) { l.Printf("%s", fmt.Sprintln(v...)) }

// saramaLog is sarama.Logger (a package variable, set once so no sarama
// goroutine ever reads it while it changes); with KWAL_TEST_DEBUG set,
// useSaramaLog points it at the running test.
var (
	saramaLogOnce sync.Once
	saramaLog     = &saramaForward{}
)

type saramaForward struct {
	mu sync.Mutex
	to *clientLogger
}

func (f *saramaForward) Printf(format string, v ...any) {
	f.mu.Lock()
	to := f.to
	f.mu.Unlock()
	if to != nil {
		to.Printf(format, v...)
	}
}
func (f *saramaForward) Print(v ...any)   { f.Printf("%s", fmt.Sprint(v...)) }
func (f *saramaForward) Println(v ...any) { f.Printf("%s", fmt.Sprintln(v...)) }

func useSaramaLog(t *testing.T) {
	if os.Getenv("KWAL_TEST_DEBUG") == "" {
		return
	}
	saramaLogOnce.Do(func() { sarama.Logger = saramaLog })
	l := newClientLogger(t, "sarama: ")
	saramaLog.mu.Lock()
	saramaLog.to = l
	saramaLog.mu.Unlock()
	t.Cleanup(func() {
		saramaLog.mu.Lock()
		saramaLog.to = nil
		saramaLog.mu.Unlock()
	})
}

// saramaConfig is a sarama configuration for the cluster: the newest Kafka
// version sarama knows (it caps each request at the version the broker
// advertises in ApiVersions).
func saramaConfig(clientID string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.MaxVersion
	cfg.ClientID = clientID
	cfg.Net.DialTimeout = 10 * time.Second
	return cfg
}

// bounded runs f, a client call without a context (sarama's), and fails
// the test if f has not returned when ctx ends; f's goroutine is left
// behind then.
func bounded(t *testing.T, ctx context.Context, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatalf("%s: no answer: %v", what, ctx.Err())
		return nil
	}
}

// endOffsets is each partition's end offset (kadm ListEndOffsets).
func endOffsets(t *testing.T, adm *kadm.Client, topic string, partitions int32) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	ends := make([]int64, partitions)
	for p := range partitions {
		o, ok := lo.Lookup(topic, p)
		if !ok || o.Err != nil {
			t.Fatalf("end offset of %s-%d: %v (found: %v)", topic, p, o.Err, ok)
		}
		ends[p] = o.Offset
	}
	return ends
}

// checkCommittedAtEnd checks with kadm FetchOffsets that group committed
// exactly the end offset ends[p] for every partition p of topic.
func checkCommittedAtEnd(t *testing.T, c *compatCluster, group, topic string, ends []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := c.admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch the offsets of group %s: %v", group, err)
	}
	for p, end := range ends {
		o, ok := offs.Lookup(topic, int32(p))
		if !ok {
			t.Fatalf("group %s committed nothing for %s-%d (end offset %d)", group, topic, p, end)
		}
		if o.Err != nil || o.At != end {
			t.Fatalf("group %s committed offset %d (error %v) for %s-%d, want the end offset %d", group, o.At, o.Err, topic, p, end)
		}
	}
}

// saramaClaim is one claim being consumed: the member holding it and the
// next offset it reads (every offset below was read and marked).
type saramaClaim struct {
	member int
	next   int64
}

// saramaGroupState is what the members of a sarama consumer group read.
type saramaGroupState struct {
	mu       sync.Mutex
	produced [][]string // partition → offset → value
	seen     map[string]int
	dups     int
	bad      []string
	active   map[int32]*saramaClaim // partition → its running claim
	parts    map[int]map[int32]bool // member → partitions of its session
	sessions map[int]int            // member → sessions started
}

func (s *saramaGroupState) failf(format string, args ...any) {
	s.bad = append(s.bad, fmt.Sprintf(format, args...))
}

// saramaMember is a sarama.ConsumerGroupHandler.
type saramaMember struct {
	id    int
	topic string
	st    *saramaGroupState
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	m.st.mu.Lock()
	defer m.st.mu.Unlock()
	parts := map[int32]bool{}
	for _, p := range s.Claims()[m.topic] {
		parts[p] = true
	}
	m.st.parts[m.id] = parts
	m.st.sessions[m.id]++
	return nil
}

func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error {
	m.st.mu.Lock()
	defer m.st.mu.Unlock()
	delete(m.st.parts, m.id)
	return nil
}

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	p := claim.Partition()
	cl := &saramaClaim{member: m.id, next: claim.InitialOffset()}
	if cl.next < 0 { // nothing committed: the oldest offset, 0 here
		cl.next = 0
	}
	m.st.mu.Lock()
	if o, ok := m.st.active[p]; ok {
		m.st.failf("partition %d claimed by member %d while member %d still consumes it", p, m.id, o.member)
	}
	m.st.active[p] = cl
	m.st.mu.Unlock()
	defer func() {
		m.st.mu.Lock()
		if m.st.active[p] == cl {
			delete(m.st.active, p)
		}
		m.st.mu.Unlock()
	}()
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			v := string(msg.Value)
			m.st.mu.Lock()
			if msg.Offset != cl.next {
				m.st.failf("member %d read %s-%d offset %d, want %d (dense, in order from the claim's start)", m.id, msg.Topic, p, msg.Offset, cl.next)
			}
			if prod := m.st.produced[p]; msg.Offset < 0 || msg.Offset >= int64(len(prod)) || prod[msg.Offset] != v {
				m.st.failf("member %d read %q at %s-%d offset %d: not the value produced there", m.id, v, msg.Topic, p, msg.Offset)
			}
			if m.st.seen[v] > 0 {
				m.st.dups++
			}
			m.st.seen[v]++
			cl.next = msg.Offset + 1
			m.st.mu.Unlock()
			s.MarkMessage(msg, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

func testSaramaProduceGroup(t *testing.T, c *compatCluster, mode string, configs map[string]*string) {
	useSaramaLog(t)
	const parts, n = 3, goClientsRecords
	topic := "goclients-" + mode + "-sarama"
	groupID := topic + "-group"
	c.createTopic(t, topic, parts, configs)

	cfg := saramaConfig("kwal-test-sarama-producer")
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Producer.Retry.Max = 10
	prod, err := sarama.NewSyncProducer(c.addrs(), cfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	closed := false // a second Close of a sarama producer panics
	defer func() {
		if !closed {
			prod.Close()
		}
	}()
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Partition: int32(i % parts),
			Value: sarama.StringEncoder(fmt.Sprintf("sarama-%s-%08d", mode, i))}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := bounded(t, ctx, "sarama SendMessages", func() error { return prod.SendMessages(msgs) }); err != nil {
		var pe sarama.ProducerErrors
		if errors.As(err, &pe) && len(pe) > 0 {
			t.Fatalf("sarama SendMessages: %d of %d records not acknowledged; first: %v", len(pe), n, pe[0].Err)
		}
		t.Fatalf("sarama SendMessages: %v", err)
	}
	closed = true
	if err := prod.Close(); err != nil {
		t.Fatalf("close the sarama producer: %v", err)
	}
	// The idempotent producer acknowledged each record once: partition p
	// holds records p, p+3, ... at offsets 0, 1, ...
	st := &saramaGroupState{produced: make([][]string, parts), seen: map[string]int{},
		active: map[int32]*saramaClaim{}, parts: map[int]map[int32]bool{}, sessions: map[int]int{}}
	for i, m := range msgs {
		want := int64(i / parts)
		if m.Partition != int32(i%parts) || m.Offset != want {
			t.Fatalf("record %d acknowledged at %s-%d offset %d, want partition %d offset %d", i, topic, m.Partition, m.Offset, i%parts, want)
		}
		st.produced[m.Partition] = append(st.produced[m.Partition], string(m.Value.(sarama.StringEncoder)))
	}
	ends := endOffsets(t, c.admin(t), topic, parts)
	for p, end := range ends {
		if end != int64(n/parts) {
			t.Fatalf("%s-%d ends at %d, want %d", topic, p, end, n/parts)
		}
	}
	t.Logf("sarama SyncProducer: %d records acknowledged in %v", n, time.Since(start))

	// Two members, each its own sarama.ConsumerGroup (client, connections).
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	var groups []sarama.ConsumerGroup
	var wg sync.WaitGroup
	errLog := newClientLogger(t, "sarama consumer group: ")
	for m := range 2 {
		gcfg := saramaConfig(fmt.Sprintf("kwal-test-sarama-member-%d", m))
		gcfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		gcfg.Consumer.Offsets.AutoCommit.Enable = true
		gcfg.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
		gcfg.Consumer.Return.Errors = true
		gcfg.Consumer.MaxWaitTime = 200 * time.Millisecond
		if m == 1 {
			// Fetch from a follower in az2 (KIP-392: the leader names a
			// preferred read replica in its Fetch answer).
			gcfg.RackID = "az2"
		}
		g, err := sarama.NewConsumerGroup(c.addrs(), groupID, gcfg)
		if err != nil {
			t.Fatalf("sarama consumer group member %d: %v", m, err)
		}
		groups = append(groups, g)
		defer g.Close() // after a failure; Close is idempotent
		wg.Add(2)
		go func() {
			defer wg.Done()
			for err := range g.Errors() {
				errLog.Printf("member %d: %v", m, err)
			}
		}()
		go func() {
			defer wg.Done()
			h := &saramaMember{id: m, topic: topic, st: st}
			for consumeCtx.Err() == nil {
				err := g.Consume(consumeCtx, []string{topic}, h)
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				if err != nil {
					errLog.Printf("member %d: Consume: %v", m, err)
				}
			}
		}()
	}
	// Done when every value was read, both members hold partitions (each
	// partition once), and each partition's running claim read it to the
	// end (after a rebalance a claim re-reads what was not committed).
	waitUntil(t, ctx, "the two members to read every record and split the partitions", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.seen) < n || len(st.parts[0]) == 0 || len(st.parts[1]) == 0 || len(st.active) != parts {
			return false
		}
		for p := range int32(parts) {
			if st.parts[0][p] == st.parts[1][p] { // in both, or in neither
				return false
			}
			if cl := st.active[p]; !st.parts[cl.member][p] || cl.next != ends[p] {
				return false
			}
		}
		return true
	})
	c.waitGroup(t, groupID, 2) // the coordinator's view: Stable, two members, each assigned
	// The members stop consuming (their sessions end: each commits what it
	// marked), and only then leave: a member leaving first would start a
	// rebalance that could refuse the other's last commit.
	stopConsuming()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for _, g := range groups {
			g.Close() // closes Errors(): the error loggers return
		}
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the sarama consumer group members did not close in 90 s")
	}
	wg.Wait()

	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.bad) > 0 {
		t.Fatalf("%d bad reads, first: %s", len(st.bad), st.bad[0])
	}
	for p, vals := range st.produced {
		for o, v := range vals {
			if st.seen[v] == 0 {
				t.Fatalf("%s (%s-%d offset %d) never read", v, topic, p, o)
			}
		}
	}
	if len(st.seen) != n {
		t.Fatalf("read %d distinct values, want %d", len(st.seen), n)
	}
	t.Logf("sarama group: %d records read, %d read again after a rebalance; sessions per member %v", n, st.dups, st.sessions)
	checkCommittedAtEnd(t, c, groupID, topic, ends)
	// Both members left: the group is empty.
	adm := c.admin(t)
	waitUntil(t, ctx, "group "+groupID+" empty after both members left", func() bool {
		dg, err := adm.DescribeGroups(ctx, groupID)
		return err == nil && dg[groupID].State == "Empty" && len(dg[groupID].Members) == 0
	})

	// The same through sarama's ClusterAdmin: the group, its offsets, and
	// its deletion. An Empty group keeps its protocol type, as Kafka's
	// does: DescribeGroups and ListGroups still say "consumer".
	sadm, err := sarama.NewClusterAdmin(c.addrs(), saramaConfig("kwal-test-sarama-group-admin"))
	if err != nil {
		t.Fatalf("sarama cluster admin: %v", err)
	}
	defer sadm.Close()
	var gds []*sarama.GroupDescription
	err = bounded(t, ctx, "DescribeConsumerGroups", func() (err error) { gds, err = sadm.DescribeConsumerGroups([]string{groupID}); return err })
	if err != nil || len(gds) != 1 || gds[0].GroupId != groupID || !errors.Is(gds[0].Err, sarama.ErrNoError) ||
		gds[0].State != "Empty" || gds[0].ProtocolType != "consumer" || len(gds[0].Members) != 0 {
		for _, gd := range gds {
			t.Logf("DescribeConsumerGroups: group %q, error %v, state %q, protocol type %q, %d members", gd.GroupId, gd.Err, gd.State, gd.ProtocolType, len(gd.Members))
		}
		t.Fatalf("sarama DescribeConsumerGroups %s: %v, %d groups; want it Empty, of protocol type consumer, with no members", groupID, err, len(gds))
	}
	var ofr *sarama.OffsetFetchResponse
	err = bounded(t, ctx, "ListConsumerGroupOffsets", func() (err error) {
		ofr, err = sadm.ListConsumerGroupOffsets(groupID, map[string][]int32{topic: {0, 1, 2}})
		return err
	})
	if err != nil || !errors.Is(ofr.Err, sarama.ErrNoError) {
		t.Fatalf("sarama ListConsumerGroupOffsets %s: %v", groupID, err)
	}
	for p, end := range ends {
		b := ofr.GetBlock(topic, int32(p))
		if b == nil || !errors.Is(b.Err, sarama.ErrNoError) || b.Offset != end {
			t.Fatalf("sarama ListConsumerGroupOffsets %s: %s-%d: %+v, want offset %d", groupID, topic, p, b, end)
		}
	}
	var groupsBefore map[string]string
	err = bounded(t, ctx, "ListConsumerGroups", func() (err error) { groupsBefore, err = sadm.ListConsumerGroups(); return err })
	if pt, ok := groupsBefore[groupID]; err != nil || !ok || pt != "consumer" {
		t.Fatalf("sarama ListConsumerGroups: %v; groups %v, want %s among them, of protocol type consumer", err, groupsBefore, groupID)
	}
	if err := bounded(t, ctx, "DeleteConsumerGroup", func() error { return sadm.DeleteConsumerGroup(groupID) }); err != nil {
		t.Fatalf("sarama DeleteConsumerGroup %s: %v", groupID, err)
	}
	var groupsAfter map[string]string
	err = bounded(t, ctx, "ListConsumerGroups", func() (err error) { groupsAfter, err = sadm.ListConsumerGroups(); return err })
	if _, ok := groupsAfter[groupID]; err != nil || ok {
		t.Fatalf("sarama ListConsumerGroups after DeleteConsumerGroup: %v; groups %v", err, groupsAfter)
	}
	offs, err := adm.FetchOffsets(ctx, groupID)
	if err != nil || len(offs) != 0 {
		t.Fatalf("kadm FetchOffsets of the deleted group %s: %v, %v; want no offsets", groupID, err, offs)
	}
}

func testSaramaAdmin(t *testing.T, c *compatCluster, mode string, configs map[string]*string) {
	useSaramaLog(t)
	topic := "goclients-" + mode + "-sarama-admin"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := saramaConfig("kwal-test-sarama-admin")
	adm, err := sarama.NewClusterAdmin(c.addrs(), cfg)
	if err != nil {
		t.Fatalf("sarama cluster admin: %v", err)
	}
	defer adm.Close()

	retention := "3600000"
	entries := map[string]*string{"retention.ms": &retention}
	maps.Copy(entries, configs)
	if err := bounded(t, ctx, "CreateTopic", func() error {
		return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 3, ConfigEntries: entries}, false)
	}); err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	waitTopicEverywhere(t, ctx, c, topic, 2)
	err = bounded(t, ctx, "CreateTopic", func() error {
		return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 3}, false)
	})
	if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Fatalf("CreateTopic %s again: %v, want %v", topic, err, sarama.ErrTopicAlreadyExists)
	}

	var md []*sarama.TopicMetadata
	err = bounded(t, ctx, "DescribeTopics", func() (err error) { md, err = adm.DescribeTopics([]string{topic}); return err })
	if err != nil {
		t.Fatalf("DescribeTopics: %v", err)
	}
	if len(md) != 1 || md[0].Name != topic || !errors.Is(md[0].Err, sarama.ErrNoError) || len(md[0].Partitions) != 2 {
		for _, tm := range md {
			t.Logf("DescribeTopics: topic %q, error %v, %d partitions", tm.Name, tm.Err, len(tm.Partitions))
		}
		t.Fatalf("DescribeTopics %s: %d topics, want %s with 2 partitions", topic, len(md), topic)
	}
	ids := []int32{}
	for _, b := range c.brokers {
		ids = append(ids, b.id)
	}
	for _, pm := range md[0].Partitions {
		reps := slices.Sorted(slices.Values(pm.Replicas))
		if !slices.Equal(reps, ids) || !slices.Contains(ids, pm.Leader) {
			t.Fatalf("DescribeTopics %s-%d: leader %d, replicas %v, want a leader among %v, replicas %v", topic, pm.ID, pm.Leader, pm.Replicas, ids, ids)
		}
	}

	// ListTopics: an all-topics Metadata, then DescribeConfigs of every
	// topic (non-default entries only).
	var topics map[string]sarama.TopicDetail
	err = bounded(t, ctx, "ListTopics", func() (err error) { topics, err = adm.ListTopics(); return err })
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	d, ok := topics[topic]
	if !ok {
		t.Fatalf("ListTopics: no %s among %v", topic, slices.Sorted(maps.Keys(topics)))
	}
	if d.NumPartitions != 2 || d.ReplicationFactor != 3 {
		t.Fatalf("ListTopics %s: %d partitions, replication factor %d, want 2 and 3", topic, d.NumPartitions, d.ReplicationFactor)
	}
	for k, v := range entries {
		if got := d.ConfigEntries[k]; got == nil || *got != *v {
			t.Fatalf("ListTopics %s: config %s = %v, want %q (entries %v)", topic, k, got, *v, d.ConfigEntries)
		}
	}

	var ces []sarama.ConfigEntry
	err = bounded(t, ctx, "DescribeConfig", func() (err error) {
		ces, err = adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"retention.ms", "cleanup.policy"}})
		return err
	})
	if err != nil {
		t.Fatalf("DescribeConfig %s: %v", topic, err)
	}
	got := map[string]sarama.ConfigEntry{}
	for _, e := range ces {
		got[e.Name] = e
	}
	if e := got["retention.ms"]; e.Value != retention || e.Default || e.Source != sarama.SourceTopic {
		t.Fatalf("DescribeConfig %s: retention.ms %+v, want %s set on the topic", topic, e, retention)
	}
	if e := got["cleanup.policy"]; e.Value != "delete" || e.Source == sarama.SourceTopic {
		t.Fatalf("DescribeConfig %s: cleanup.policy %+v, want the default delete", topic, e)
	}

	// IncrementalAlterConfig sets retention.ms; every broker learns it
	// through the controller state, so DescribeConfig (any broker) shows it
	// eventually.
	altered := "7200000"
	if err := bounded(t, ctx, "IncrementalAlterConfig", func() error {
		return adm.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
			"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &altered}}, false)
	}); err != nil {
		t.Fatalf("IncrementalAlterConfig %s retention.ms=%s: %v", topic, altered, err)
	}
	waitUntil(t, ctx, "DescribeConfig to show retention.ms "+altered, func() bool {
		var ces []sarama.ConfigEntry
		err := bounded(t, ctx, "DescribeConfig", func() (err error) {
			ces, err = adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"retention.ms"}})
			return err
		})
		return err == nil && len(ces) == 1 && ces[0].Value == altered && ces[0].Source == sarama.SourceTopic
	})

	// CreatePartitions grows it to 4; the new partition takes a record.
	if err := bounded(t, ctx, "CreatePartitions", func() error { return adm.CreatePartitions(topic, 4, nil, false) }); err != nil {
		t.Fatalf("CreatePartitions %s to 4: %v", topic, err)
	}
	waitTopicEverywhere(t, ctx, c, topic, 4)
	err = bounded(t, ctx, "DescribeTopics", func() (err error) { md, err = adm.DescribeTopics([]string{topic}); return err })
	if err != nil || len(md) != 1 || len(md[0].Partitions) != 4 {
		for _, tm := range md {
			t.Logf("DescribeTopics: topic %q, error %v, %d partitions", tm.Name, tm.Err, len(tm.Partitions))
		}
		t.Fatalf("DescribeTopics after CreatePartitions: %v; want %s with 4 partitions", err, topic)
	}
	if err := bounded(t, ctx, "CreatePartitions", func() error { return adm.CreatePartitions(topic, 3, nil, false) }); err == nil {
		t.Fatalf("CreatePartitions %s down to 3 succeeded", topic)
	}
	pcfg := saramaConfig("kwal-test-sarama-admin-producer")
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.Partitioner = sarama.NewManualPartitioner
	prod, err := sarama.NewSyncProducer(c.addrs(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	var p int32
	var off int64
	err = bounded(t, ctx, "SendMessage", func() (err error) {
		p, off, err = prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 3, Value: sarama.StringEncoder("new-partition")})
		return err
	})
	prod.Close()
	if err != nil || p != 3 || off != 0 {
		t.Fatalf("produce to the new partition %s-3: partition %d offset %d, %v", topic, p, off, err)
	}

	// DeleteTopic: gone from ListTopics, and from every broker's disk.
	if err := bounded(t, ctx, "DeleteTopic", func() error { return adm.DeleteTopic(topic) }); err != nil {
		t.Fatalf("DeleteTopic %s: %v", topic, err)
	}
	waitUntil(t, ctx, "ListTopics without the deleted topic", func() bool {
		var topics map[string]sarama.TopicDetail
		err := bounded(t, ctx, "ListTopics", func() (err error) { topics, err = adm.ListTopics(); return err })
		if err != nil {
			return false
		}
		_, ok := topics[topic]
		return !ok
	})
	waitUntil(t, ctx, "every broker to remove the deleted topic's logs", func() bool {
		for _, b := range c.brokers {
			if m, _ := filepath.Glob(filepath.Join(b.dir, "logs", topic+"-*")); len(m) > 0 {
				return false
			}
		}
		return true
	})
	if err := bounded(t, ctx, "DeleteTopic", func() error { return adm.DeleteTopic(topic) }); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Fatalf("DeleteTopic %s again: %v, want %v", topic, err, sarama.ErrUnknownTopicOrPartition)
	}
}

func testKafkaGo(t *testing.T, c *compatCluster, mode string, configs map[string]*string) {
	const parts, n = 3, goClientsRecords
	topic := "goclients-" + mode + "-kafka-go"
	groupID := topic + "-group"
	c.createTopic(t, topic, parts, configs)
	errLog := newClientLogger(t, "kafka-go: ")
	var debugLog kafka.Logger
	if os.Getenv("KWAL_TEST_DEBUG") != "" {
		debugLog = newClientLogger(t, "kafka-go debug: ")
	}
	transport := &kafka.Transport{ClientID: "kwal-test-kafka-go"}
	defer transport.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// kafka.Client.Metadata: the brokers with their racks, the topic.
	cl := &kafka.Client{Addr: kafka.TCP(c.addrs()...), Timeout: 30 * time.Second, Transport: transport}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		t.Fatalf("kafka-go Metadata: %v", err)
	}
	if len(md.Brokers) != len(c.brokers) {
		t.Fatalf("kafka-go Metadata: brokers %+v, want %d", md.Brokers, len(c.brokers))
	}
	for _, b := range c.brokers {
		i := slices.IndexFunc(md.Brokers, func(mb kafka.Broker) bool { return mb.ID == int(b.id) })
		if i < 0 || md.Brokers[i].Rack != b.rack || md.Brokers[i].Port != b.port {
			t.Fatalf("kafka-go Metadata: brokers %+v, want broker %d on port %d in rack %s", md.Brokers, b.id, b.port, b.rack)
		}
	}
	if len(md.Topics) != 1 || md.Topics[0].Name != topic || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) != parts {
		t.Fatalf("kafka-go Metadata %s: %+v", topic, md.Topics)
	}
	for _, pm := range md.Topics[0].Partitions {
		if pm.Error != nil || pm.Leader.ID <= 0 || len(pm.Replicas) != 3 {
			t.Fatalf("kafka-go Metadata %s-%d: leader %d, %d replicas, error %v", topic, pm.ID, pm.Leader.ID, len(pm.Replicas), pm.Error)
		}
	}

	// kafka.Conn.ReadPartitions (Metadata through a single connection).
	conn, err := kafka.DialContext(ctx, "tcp", c.brokers[1].addr())
	if err != nil {
		t.Fatalf("kafka-go DialContext: %v", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	cps, err := conn.ReadPartitions(topic)
	if err != nil || len(cps) != parts {
		t.Fatalf("kafka-go Conn.ReadPartitions %s: %d partitions, %v; want %d", topic, len(cps), err, parts)
	}
	for _, pm := range cps {
		if pm.Topic != topic || pm.Leader.ID <= 0 || len(pm.Replicas) != 3 {
			t.Fatalf("kafka-go Conn.ReadPartitions %s: partition %+v", topic, pm)
		}
	}
	conn.Close()

	w := &kafka.Writer{Addr: kafka.TCP(c.addrs()...), Topic: topic, Balancer: &kafka.RoundRobin{},
		RequiredAcks: kafka.RequireAll, BatchSize: 200, BatchTimeout: 20 * time.Millisecond,
		Compression: kafka.Snappy, Transport: transport, ErrorLogger: errLog, Logger: debugLog}
	msgs := make([]kafka.Message, n)
	written := map[string]bool{}
	for i := range msgs {
		v := fmt.Sprintf("kafka-go-%s-%08d", mode, i)
		msgs[i] = kafka.Message{Value: []byte(v)}
		written[v] = true
	}
	start := time.Now()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		var we kafka.WriteErrors
		if errors.As(err, &we) {
			t.Fatalf("kafka-go Writer: %d of %d messages failed: %v", we.Count(), n, err)
		}
		t.Fatalf("kafka-go Writer: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close the kafka-go Writer: %v", err)
	}
	ws := w.Stats()
	if ws.Messages != n || ws.Errors != 0 {
		t.Fatalf("kafka-go Writer stats: %d messages, %d errors, want %d and 0", ws.Messages, ws.Errors, n)
	}
	t.Logf("kafka-go: %d messages written in %d requests, %d retries, in %v", ws.Messages, ws.Writes, ws.Retries, time.Since(start))
	// Round robin, one message at a time: a third to each partition.
	ends := endOffsets(t, c.admin(t), topic, parts)
	for p, end := range ends {
		if end != n/parts {
			t.Fatalf("%s-%d ends at %d, want %d", topic, p, end, n/parts)
		}
	}

	// A group Reader; ReadMessage commits each message before returning it
	// (CommitInterval 0: synchronous commits). One member that never
	// rebalances: each message exactly once.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.addrs(), GroupID: groupID, Topic: topic,
		StartOffset: kafka.FirstOffset, MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 200 * time.Millisecond,
		ErrorLogger: errLog, Logger: debugLog})
	defer r.Close()
	byPart := make([][]string, parts) // partition → offset → value
	last := map[string]int{}          // value → its sequence number
	for i := range n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go group Reader: message %d of %d: %v", i, n, err)
		}
		v := string(m.Value)
		if m.Topic != topic || m.Partition < 0 || m.Partition >= parts || !written[v] {
			t.Fatalf("kafka-go group Reader: %q at %s-%d offset %d was not written", v, m.Topic, m.Partition, m.Offset)
		}
		if _, dup := last[v]; dup {
			t.Fatalf("kafka-go group Reader: %q (%s-%d offset %d) read twice", v, topic, m.Partition, m.Offset)
		}
		if want := int64(len(byPart[m.Partition])); m.Offset != want {
			t.Fatalf("kafka-go group Reader: %s-%d offset %d, want %d (dense, in order)", topic, m.Partition, m.Offset, want)
		}
		seq, _ := strconv.Atoi(v[strings.LastIndexByte(v, '-')+1:])
		if prev := byPart[m.Partition]; len(prev) > 0 && last[prev[len(prev)-1]] >= seq {
			t.Fatalf("kafka-go group Reader: %s-%d: %q after %q: not in the written order", topic, m.Partition, v, prev[len(prev)-1])
		}
		last[v] = seq
		byPart[m.Partition] = append(byPart[m.Partition], v)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("close the kafka-go group Reader: %v", err)
	}
	checkCommittedAtEnd(t, c, groupID, topic, ends)
	// The Reader left: the group is empty and, as in Kafka, still of
	// protocol type consumer, described and listed.
	adm := c.admin(t)
	waitUntil(t, ctx, "group "+groupID+" empty after the Reader left", func() bool {
		dg, err := adm.DescribeGroups(ctx, groupID)
		return err == nil && dg[groupID].State == "Empty"
	})
	dg, err := adm.DescribeGroups(ctx, groupID)
	if err != nil || dg[groupID].ProtocolType != "consumer" || len(dg[groupID].Members) != 0 {
		t.Fatalf("kadm DescribeGroups %s after the Reader left: %v, %+v; want Empty, of protocol type consumer", groupID, err, dg[groupID])
	}
	lg, err := adm.ListGroups(ctx)
	if err != nil || lg[groupID].ProtocolType != "consumer" {
		t.Fatalf("kadm ListGroups after the Reader left: %v, %+v; want %s of protocol type consumer", err, lg[groupID], groupID)
	}

	// A partition Reader (no group) from the first offset of partition 0:
	// the same records at the same offsets, then no lag.
	pr := kafka.NewReader(kafka.ReaderConfig{Brokers: c.addrs(), Topic: topic, Partition: 0,
		MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 200 * time.Millisecond, ErrorLogger: errLog, Logger: debugLog})
	defer pr.Close()
	if err := pr.SetOffset(kafka.FirstOffset); err != nil {
		t.Fatal(err)
	}
	for o, want := range byPart[0] {
		m, err := pr.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go partition Reader: offset %d of %d: %v", o, len(byPart[0]), err)
		}
		if m.Partition != 0 || m.Offset != int64(o) || string(m.Value) != want {
			t.Fatalf("kafka-go partition Reader: %q at %s-%d offset %d, want %q at offset %d", m.Value, topic, m.Partition, m.Offset, want, o)
		}
	}
	lag, err := pr.ReadLag(ctx)
	if err != nil || lag != 0 {
		t.Fatalf("kafka-go partition Reader: lag %d after the last record (%v), want 0", lag, err)
	}
	if err := pr.Close(); err != nil {
		t.Fatalf("close the kafka-go partition Reader: %v", err)
	}
}

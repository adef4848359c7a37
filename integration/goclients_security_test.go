package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kafkascram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	franzscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"

	"github.com/kwal/kwal/internal/testpki"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/objstoretest"
)

// TestGoClientsSecure runs IBM/sarama and segmentio/kafka-go (as
// TestGoClients) against three `kwal broker` processes (1@az1, 2@az2,
// 3@az1, versitygw, an in-process kfake) whose only listener is SASL_SSL
// (TLS from a test CA, SCRAM-SHA-256 and SCRAM-SHA-512, users made with
// `kwal users add`, the brokers replicating over it as User:broker with
// SCRAM-SHA-512, as in TestSecureBrokerProcesses) with ACLs from
// kwal.acl.file (super.users User:broker and User:admin), on classic and on
// remote-WAL topics:
//
//   - sarama, SCRAM-SHA-512 as alice (Write/Read on topic:gcsec-alice-*,
//     Read on group:gcsec-alice-*): an idempotent SyncProducer (acks=all)
//     writes 600 records to three partitions at dense offsets over TLS
//     connections verified against the test CA and the broker's address;
//     a ConsumerGroup member reads every record back, densely and in
//     order; the committed offsets (sarama ClusterAdmin
//     ListConsumerGroupOffsets as admin) are the end offsets;
//
//   - refusals: a wrong password and an unknown user fail sarama's
//     NewClient with SASL_AUTHENTICATION_FAILED, kafka-go's Dialer with the
//     same; a TLS server name the broker's certificate does not hold fails
//     the handshake (x509.HostnameError);
//
//   - ACLs as bob (Read/Write on topic:gcsec-bob-*, Read on
//     group:gcsec-bob-*, Describe only on topic:gcsec-ro-* and on
//     group:gcsec-describe-only-*): produce and a group consume on a
//     granted topic work; produce to a topic no rule names for him and to
//     a topic he may only describe fail with TOPIC_AUTHORIZATION_FAILED;
//     a group no rule names fails with GROUP_AUTHORIZATION_FAILED (at
//     FindCoordinator, as in Kafka) and a group he may only describe fails
//     with GROUP_AUTHORIZATION_FAILED at JoinGroup;
//
//   - kafka-go, SCRAM-SHA-256 as alice: a Writer (RequireAll) through a
//     kafka.Transport with TLS and SASL writes 600 records; a group Reader
//     through a kafka.Dialer with TLS and SASL reads each once, densely and
//     in order per partition; its committed offsets are the end offsets.
//
//   - after each mode's clients, the remote WAL store holds objects after
//     the remotewal run and none after the classic one; at the end no
//     password, right or wrong, is in a broker's log.
//
// Not checked, because the broker lacks it: ACLs through the Kafka admin
// API (grant bob's rules with CreateAcls, list exactly them with
// DescribeAcls, revoke them with DeleteAcls and watch every broker refuse
// his produce). kwal's ACLs are the static kwal.acl.file, read at start,
// and the broker serves neither DescribeAcls (key 29), CreateAcls (30) nor
// DeleteAcls (31): its ApiVersions answer leaves them out
// (broker/api_api_versions.go), so sarama's ClusterAdmin CreateACL,
// ListAcls and DeleteACL fail at once with ErrUnsupportedVersion without
// sending anything. Bob's grants come from the file instead.
//
// It needs versitygw (KWAL_S3_ENDPOINT; scripts/test-env.sh provides it).
// KWAL_TEST_DEBUG=1 sends sarama's and kafka-go's logs to the test log.
func TestGoClientsSecure(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: the sarama and kafka-go tests against SASL_SSL brokers did not run")
	}
	env := objstoretest.S3Env(t)
	bin := buildKwal(t)
	ca := testpki.New(t, "kwal-goclients-secure-ca")
	emb, err := metadata.StartEmbedded(t.TempDir(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	pw := map[string]string{
		"broker": "broker-pw-5e1f0a",
		"admin":  "admin-pw-2b7c44",
		"alice":  "alice-pw-9d03e7",
		"bob":    "bob-pw-61a8f2",
	}
	users := kwalUsersAdd(t, bin, pw)
	t.Setenv("KWAL_INTER_BROKER_SASL_PASSWORD", pw["broker"]) // inherited by the brokers
	acls := filepath.Join(t.TempDir(), "acls")
	if err := os.WriteFile(acls, []byte(goClientsSecureACLs), 0o600); err != nil {
		t.Fatal(err)
	}
	store := s3StoreURL(env, "goclients-secure")
	// startCompatCluster names its one listener PLAINTEXT; the map makes
	// it SASL_SSL (a listener's name is only a name, as in Kafka), and it
	// is the inter-broker listener, being the only one.
	props := clusterProps(store, emb.Bootstrap(), map[string]string{
		"listener.security.protocol.map":   "PLAINTEXT:SASL_SSL",
		"ssl.truststore.location":          ca.File,
		"sasl.enabled.mechanisms":          "SCRAM-SHA-256,SCRAM-SHA-512",
		"kwal.sasl.users.file":             users,
		"kwal.inter.broker.sasl.username":  "broker",
		"kwal.acl.file":                    acls,
		"super.users":                      "User:broker;User:admin",
		"offsets.topic.num.partitions":     "10",
		"group.initial.rebalance.delay.ms": "0",
	})
	c := startCompatClusterWith(t, bin, []string{"az1", "az2", "az1"}, props, func(b *compatBroker) (map[int32]string, map[string]string) {
		return nil, map[string]string{"ssl.keystore.location": ca.Issue(t, fmt.Sprintf("broker-%d", b.id))}
	})
	stopped := false
	defer func() {
		if !stopped {
			c.stopAll(t)
		}
	}()
	sc := &secureCluster{compatCluster: c, ca: ca, pw: pw}

	for _, mode := range []string{"classic", "remotewal"} {
		configs := modeConfigs(mode)
		t.Run(mode, func(t *testing.T) {
			t.Run("sarama-scram-sha-512-idempotent-producer-consumer-group", func(t *testing.T) { testSaramaSecureProduceGroup(t, sc, mode, configs) })
			t.Run("sasl-and-tls-refusals", func(t *testing.T) { testSecureRefusals(t, sc) })
			t.Run("sarama-acls", func(t *testing.T) { testSaramaACLs(t, sc, mode, configs) })
			t.Run("kafka-go-scram-sha-256-writer-group-reader", func(t *testing.T) { testKafkaGoSecure(t, sc, mode, configs) })
			// classic runs first: only remote-WAL topics upload objects.
			t.Run("remote-wal-store", func(t *testing.T) {
				if n := countStoreObjects(t, store); (mode == "remotewal") != (n > 0) {
					t.Fatalf("%d objects in the remote WAL store after the %s run", n, mode)
				}
			})
		})
	}

	// No password, right or wrong ("not-" + alice's), reaches a broker log.
	stopped = true
	c.stopAll(t)
	for _, b := range c.brokers {
		log, err := os.ReadFile(b.proc.LogPath)
		if err != nil || len(log) == 0 {
			t.Fatalf("broker %d log: %v (%d bytes)", b.id, err, len(log))
		}
		for user, p := range pw {
			if bytes.Contains(log, []byte(p)) {
				t.Fatalf("broker %d log holds %s's password", b.id, user)
			}
		}
	}
}

// goClientsSecureACLs is the kwal.acl.file of TestGoClientsSecure
// (User:broker and User:admin are super users).
const goClientsSecureACLs = `# alice: the sarama and kafka-go producers and consumers
User:alice  Read,Write  topic:gcsec-alice-*
User:alice  Read        group:gcsec-alice-*
# bob: the ACL checks
User:bob    Read,Write,Describe  topic:gcsec-bob-*
User:bob    Read                 group:gcsec-bob-*
User:bob    Describe             topic:gcsec-ro-*
User:bob    Describe             group:gcsec-describe-only-*
`

// kwalUsersAdd writes a users file with `kwal users add` (the password on
// stdin, both SCRAM mechanisms by default), as TestSecureBrokerProcesses
// does, and returns its path.
func kwalUsersAdd(t *testing.T, bin string, passwords map[string]string) string {
	t.Helper()
	users := filepath.Join(t.TempDir(), "users")
	for user, pw := range passwords {
		cmd := exec.Command(bin, "users", "add", "--file", users, "--user", user)
		cmd.Stdin = strings.NewReader(pw + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kwal users add %s: %v\n%s", user, err, out)
		}
	}
	return users
}

// secureCluster is a compatCluster whose listener is SASL_SSL: the
// harness's plaintext helpers (admin, createTopic, brokerMetadata) cannot
// reach it, these can.
type secureCluster struct {
	*compatCluster
	ca *testpki.CA
	pw map[string]string // user → password
}

// tlsConfig trusts the test CA only; the clients verify the broker's
// certificate against the address they dial (127.0.0.1, an IP SAN).
func (sc *secureCluster) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: sc.ca.Pool, MinVersion: tls.VersionTLS12}
}

// authOpts are franz-go's options for user over SASL_SSL (SCRAM-SHA-512),
// the seeds left out.
func (sc *secureCluster) authOpts(user string) []kgo.Opt {
	return []kgo.Opt{kgo.DialTLSConfig(sc.tlsConfig()), kgo.SASL(franzscram.Auth{User: user, Pass: sc.pw[user]}.AsSha512Mechanism())}
}

// kgoOpts are franz-go options for user over SASL_SSL, seeded with seeds.
func (sc *secureCluster) kgoOpts(user string, seeds ...string) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, sc.authOpts(user)...)
}

// kadmAs is a kadm client for user, closed when t ends.
func (sc *secureCluster) kadmAs(t *testing.T, user string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(sc.kgoOpts(user, sc.addrs()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// createTopic is compatCluster.createTopic as admin: create through one
// broker, then wait until every broker's metadata shows a leader for each
// partition.
func (sc *secureCluster) createTopic(t *testing.T, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sc.kadmAs(t, "admin").CreateTopic(ctx, partitions, 3, configs, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	waitTopicEverywhere(t, ctx, sc.compatCluster, topic, int(partitions), sc.authOpts("admin")...)
}

// checkCommittedAtEnd checks with sarama's ClusterAdmin (as admin)
// ListConsumerGroupOffsets that group committed exactly ends[p] for every
// partition p of topic.
func (sc *secureCluster) checkCommittedAtEnd(t *testing.T, ctx context.Context, group, topic string, ends []int64) {
	t.Helper()
	adm, err := sarama.NewClusterAdmin(sc.addrs(), sc.sarama("kwal-test-secure-admin", "admin", sarama.SASLTypeSCRAMSHA512))
	if err != nil {
		t.Fatalf("sarama cluster admin: %v", err)
	}
	defer adm.Close()
	parts := make([]int32, len(ends))
	for p := range parts {
		parts[p] = int32(p)
	}
	var ofr *sarama.OffsetFetchResponse
	err = bounded(t, ctx, "ListConsumerGroupOffsets", func() (err error) {
		ofr, err = adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
		return err
	})
	if err != nil || !errors.Is(ofr.Err, sarama.ErrNoError) {
		t.Fatalf("sarama ListConsumerGroupOffsets %s: %v (%v)", group, err, ofr)
	}
	for p, end := range ends {
		b := ofr.GetBlock(topic, int32(p))
		if b == nil || !errors.Is(b.Err, sarama.ErrNoError) || b.Offset != end {
			t.Fatalf("sarama ListConsumerGroupOffsets %s: %s-%d: %+v, want offset %d", group, topic, p, b, end)
		}
	}
}

// sarama is saramaConfig over SASL_SSL as user with mechanism (its
// password from sc.pw).
func (sc *secureCluster) sarama(clientID, user string, mechanism sarama.SASLMechanism) *sarama.Config {
	return sc.saramaWith(clientID, user, sc.pw[user], mechanism)
}

func (sc *secureCluster) saramaWith(clientID, user, password string, mechanism sarama.SASLMechanism) *sarama.Config {
	cfg := saramaConfig(clientID)
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = sc.tlsConfig()
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Handshake = true
	cfg.Net.SASL.Version = sarama.SASLHandshakeV1 // SaslAuthenticate frames (KIP-152)
	cfg.Net.SASL.Mechanism = mechanism
	cfg.Net.SASL.User = user
	cfg.Net.SASL.Password = password
	hash := scram.SHA512
	if mechanism == sarama.SASLTypeSCRAMSHA256 {
		hash = scram.SHA256
	}
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAMClient{hash: hash} }
	// A refusal is final: do not spend the test's time retrying it.
	cfg.Metadata.Retry.Max = 2
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

// xdgSCRAMClient is a sarama.SCRAMClient over github.com/xdg-go/scram (as
// sarama's examples/sasl_scram_client).
type xdgSCRAMClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (x *xdgSCRAMClient) Begin(user, password, authzID string) error {
	cl, err := x.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	x.conv = cl.NewConversation()
	return nil
}

func (x *xdgSCRAMClient) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAMClient) Done() bool                            { return x.conv.Done() }

// saramaGroupRead runs one sarama ConsumerGroup member (cfg) of groupID on
// topic until it has read every record of produced (partition → offset →
// value) and its claims reached ends; it then stops (committing what it
// marked) and checks each record was read densely and in order with the
// value produced there.
func saramaGroupRead(t *testing.T, ctx context.Context, addrs []string, cfg *sarama.Config, groupID, topic string, produced [][]string, ends []int64) {
	t.Helper()
	n := 0
	for _, vals := range produced {
		n += len(vals)
	}
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	var g sarama.ConsumerGroup
	err := bounded(t, ctx, "sarama NewConsumerGroup", func() (err error) { g, err = sarama.NewConsumerGroup(addrs, groupID, cfg); return err })
	if err != nil {
		t.Fatalf("sarama consumer group %s: %v", groupID, err)
	}
	defer g.Close() // after a failure; Close is idempotent
	st := &saramaGroupState{produced: produced, seen: map[string]int{},
		active: map[int32]*saramaClaim{}, parts: map[int]map[int32]bool{}, sessions: map[int]int{}}
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	errLog := newClientLogger(t, "sarama consumer group: ")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for err := range g.Errors() {
			errLog.Printf("%v", err)
		}
	}()
	go func() {
		defer wg.Done()
		h := &saramaMember{id: 0, topic: topic, st: st}
		for consumeCtx.Err() == nil {
			err := g.Consume(consumeCtx, []string{topic}, h)
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
			if err != nil {
				errLog.Printf("Consume: %v", err)
			}
		}
	}()
	waitUntil(t, ctx, fmt.Sprintf("the member of %s to read %d records", groupID, n), func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.seen) < n || len(st.active) != len(ends) {
			return false
		}
		for p, end := range ends {
			if cl := st.active[int32(p)]; cl == nil || cl.next != end {
				return false
			}
		}
		return true
	})
	stopConsuming()
	if err := bounded(t, ctx, "sarama ConsumerGroup.Close", g.Close); err != nil {
		t.Fatalf("close the sarama consumer group: %v", err)
	}
	wg.Wait()
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.bad) > 0 {
		t.Fatalf("%d bad reads, first: %s", len(st.bad), st.bad[0])
	}
	for p, vals := range produced {
		for o, v := range vals {
			if st.seen[v] == 0 {
				t.Fatalf("%s (%s-%d offset %d) never read", v, topic, p, o)
			}
		}
	}
	if len(st.seen) != n {
		t.Fatalf("read %d distinct values, want %d", len(st.seen), n)
	}
	t.Logf("sarama group %s: %d records read (%d again), %d sessions", groupID, n, st.dups, st.sessions[0])
}

func testSaramaSecureProduceGroup(t *testing.T, sc *secureCluster, mode string, configs map[string]*string) {
	useSaramaLog(t)
	const parts, n = 3, 600
	topic := "gcsec-alice-" + mode + "-sarama"
	groupID := topic + "-group"
	sc.createTopic(t, topic, parts, configs)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cfg := sc.sarama("kwal-test-secure-sarama-producer", "alice", sarama.SASLTypeSCRAMSHA512)
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Max = 10
	var cl sarama.Client
	if err := bounded(t, ctx, "sarama NewClient", func() (err error) { cl, err = sarama.NewClient(sc.addrs(), cfg); return err }); err != nil {
		t.Fatalf("sarama client as alice (SCRAM-SHA-512): %v", err)
	}
	defer cl.Close()
	prod, err := sarama.NewSyncProducerFromClient(cl)
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
			Value: sarama.StringEncoder(fmt.Sprintf("gcsec-sarama-%s-%06d", mode, i))}
	}
	if err := bounded(t, ctx, "sarama SendMessages", func() error { return prod.SendMessages(msgs) }); err != nil {
		var pe sarama.ProducerErrors
		if errors.As(err, &pe) && len(pe) > 0 {
			t.Fatalf("sarama SendMessages: %d of %d records not acknowledged; first: %v", len(pe), n, pe[0].Err)
		}
		t.Fatalf("sarama SendMessages: %v", err)
	}
	// Each partition leader's connection is TLS, its certificate the
	// broker's own, verified against the test CA.
	for p := range int32(parts) {
		b, err := cl.Leader(topic, p)
		if err != nil {
			t.Fatalf("sarama leader of %s-%d: %v", topic, p, err)
		}
		cs, ok := b.TLSConnectionState()
		if !ok || !cs.HandshakeComplete || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 ||
			cs.PeerCertificates[0].Subject.CommonName != fmt.Sprintf("broker-%d", b.ID()) {
			t.Fatalf("sarama's connection to broker %d (leader of %s-%d): TLS %v, handshake %v, %d verified chains; want TLS verified with the test CA, certificate broker-%d",
				b.ID(), topic, p, ok, cs.HandshakeComplete, len(cs.VerifiedChains), b.ID())
		}
	}
	closed = true
	if err := prod.Close(); err != nil {
		t.Fatalf("close the sarama producer: %v", err)
	}
	produced := make([][]string, parts)
	for i, m := range msgs {
		if want := int64(i / parts); m.Partition != int32(i%parts) || m.Offset != want {
			t.Fatalf("record %d acknowledged at %s-%d offset %d, want partition %d offset %d", i, topic, m.Partition, m.Offset, i%parts, want)
		}
		produced[m.Partition] = append(produced[m.Partition], string(m.Value.(sarama.StringEncoder)))
	}
	ends := endOffsets(t, sc.kadmAs(t, "admin"), topic, parts)
	for p, end := range ends {
		if end != n/parts {
			t.Fatalf("%s-%d ends at %d, want %d", topic, p, end, n/parts)
		}
	}

	saramaGroupRead(t, ctx, sc.addrs(), sc.sarama("kwal-test-secure-sarama-member", "alice", sarama.SASLTypeSCRAMSHA512),
		groupID, topic, produced, ends)
	sc.checkCommittedAtEnd(t, ctx, groupID, topic, ends)
}

// testSecureRefusals: logins with a wrong password or an unknown user, and
// a TLS server name the broker's certificate does not hold.
func testSecureRefusals(t *testing.T, sc *secureCluster) {
	useSaramaLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, who := range []struct{ user, password, what string }{
		{"alice", "not-" + sc.pw["alice"], "a wrong password"},
		{"mallory", sc.pw["alice"], "no such user"},
	} {
		cfg := sc.saramaWith("kwal-test-secure-sarama-refused", who.user, who.password, sarama.SASLTypeSCRAMSHA512)
		err := bounded(t, ctx, "sarama NewClient", func() error {
			cl, err := sarama.NewClient(sc.addrs(), cfg)
			if err == nil {
				cl.Close()
			}
			return err
		})
		if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
			t.Fatalf("sarama NewClient as %s (%s): %v, want %v", who.user, who.what, err, sarama.ErrSASLAuthenticationFailed)
		}
		mech, err := kafkascram.Mechanism(kafkascram.SHA256, who.user, who.password)
		if err != nil {
			t.Fatal(err)
		}
		d := &kafka.Dialer{ClientID: "kwal-test-secure-kafka-go-refused", Timeout: 10 * time.Second, TLS: sc.tlsConfig(), SASLMechanism: mech}
		conn, err := d.DialContext(ctx, "tcp", sc.brokers[0].addr())
		if err == nil {
			conn.Close()
		}
		if !errors.Is(err, kafka.SASLAuthenticationFailed) {
			t.Fatalf("kafka-go Dialer as %s (%s): %v, want %v", who.user, who.what, err, kafka.SASLAuthenticationFailed)
		}
	}

	cfg := sc.sarama("kwal-test-secure-sarama-wrong-name", "alice", sarama.SASLTypeSCRAMSHA512)
	cfg.Net.TLS.Config.ServerName = "not-the-broker.invalid"
	err := bounded(t, ctx, "sarama NewClient", func() error {
		cl, err := sarama.NewClient(sc.addrs(), cfg)
		if err == nil {
			cl.Close()
		}
		return err
	})
	var he x509.HostnameError
	if !errors.As(err, &he) {
		t.Fatalf("sarama NewClient verifying the server name %s: %v, want an x509.HostnameError", cfg.Net.TLS.Config.ServerName, err)
	}
}

// testSaramaACLs runs as bob, whose rules are in goClientsSecureACLs.
// Left out (a broker gap, see TestGoClientsSecure): creating, describing
// and deleting these rules with sarama's ClusterAdmin CreateACL, ListAcls
// and DeleteACL, and polling every broker until a deleted grant refuses
// bob's produce.
func testSaramaACLs(t *testing.T, sc *secureCluster, mode string, configs map[string]*string) {
	useSaramaLog(t)
	granted := "gcsec-bob-" + mode
	other := "gcsec-other-" + mode // no rule names it
	readOnly := "gcsec-ro-" + mode // bob may describe it only
	for _, topic := range []string{granted, other, readOnly} {
		sc.createTopic(t, topic, 1, configs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Produce: allowed on the granted topic, refused on the two others.
	cfg := sc.sarama("kwal-test-secure-sarama-bob", "bob", sarama.SASLTypeSCRAMSHA512)
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Retry.Max = 2
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	var prod sarama.SyncProducer
	if err := bounded(t, ctx, "sarama NewSyncProducer", func() (err error) { prod, err = sarama.NewSyncProducer(sc.addrs(), cfg); return err }); err != nil {
		t.Fatalf("sarama producer as bob: %v", err)
	}
	defer prod.Close()
	const n = 20
	produced := [][]string{nil}
	for i := range n {
		v := fmt.Sprintf("gcsec-bob-%s-%03d", mode, i)
		var p int32
		var off int64
		err := bounded(t, ctx, "sarama SendMessage", func() (err error) {
			p, off, err = prod.SendMessage(&sarama.ProducerMessage{Topic: granted, Value: sarama.StringEncoder(v)})
			return err
		})
		if err != nil || p != 0 || off != int64(i) {
			t.Fatalf("bob produces record %d to %s (Write granted): partition %d offset %d, %v; want offset %d", i, granted, p, off, err, i)
		}
		produced[0] = append(produced[0], v)
	}
	for _, topic := range []string{other, readOnly} {
		err := bounded(t, ctx, "sarama SendMessage", func() error {
			_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("refused")})
			return err
		})
		if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
			t.Fatalf("bob produces to %s (no Write): %v, want %v", topic, err, sarama.ErrTopicAuthorizationFailed)
		}
	}
	if ends := endOffsets(t, sc.kadmAs(t, "admin"), other, 1); ends[0] != 0 {
		t.Fatalf("%s-0 ends at %d after refused produces, want 0", other, ends[0])
	}
	if ends := endOffsets(t, sc.kadmAs(t, "admin"), readOnly, 1); ends[0] != 0 {
		t.Fatalf("%s-0 ends at %d after refused produces, want 0", readOnly, ends[0])
	}

	// Consume in a granted group: every record back, offsets committed.
	group := "gcsec-bob-" + mode + "-group"
	ends := []int64{n}
	saramaGroupRead(t, ctx, sc.addrs(), sc.sarama("kwal-test-secure-sarama-bob-member", "bob", sarama.SASLTypeSCRAMSHA512), group, granted, produced, ends)
	sc.checkCommittedAtEnd(t, ctx, group, granted, ends)

	// Groups bob may not read: one no rule names (FindCoordinator needs
	// Describe on the group: refused there, as Kafka's KafkaApis does), one
	// he may only describe (JoinGroup needs Read: refused at the join).
	for _, g := range []struct{ id, at string }{
		{"gcsec-other-" + mode + "-group", "FindCoordinator"},
		{"gcsec-describe-only-" + mode, "JoinGroup"},
	} {
		gcfg := sc.sarama("kwal-test-secure-sarama-bob-refused", "bob", sarama.SASLTypeSCRAMSHA512)
		// A refusal is final: one attempt (sarama retries a failed session
		// start 4 times, 2 s apart, by default).
		gcfg.Consumer.Group.Rebalance.Retry.Max = 0
		var cg sarama.ConsumerGroup
		if err := bounded(t, ctx, "sarama NewConsumerGroup", func() (err error) { cg, err = sarama.NewConsumerGroup(sc.addrs(), g.id, gcfg); return err }); err != nil {
			t.Fatalf("sarama consumer group %s: %v", g.id, err)
		}
		// A join that is let in would consume until joinCtx ends, and
		// return nil.
		joinCtx, cancelJoin := context.WithTimeout(ctx, 15*time.Second)
		st := &saramaGroupState{produced: produced, seen: map[string]int{},
			active: map[int32]*saramaClaim{}, parts: map[int]map[int32]bool{}, sessions: map[int]int{}}
		err := bounded(t, ctx, "sarama ConsumerGroup.Consume", func() error {
			return cg.Consume(joinCtx, []string{granted}, &saramaMember{topic: granted, st: st})
		})
		cancelJoin()
		cg.Close()
		if !errors.Is(err, sarama.ErrGroupAuthorizationFailed) {
			t.Fatalf("bob joins group %s (refused at %s): %v, want %v", g.id, g.at, err, sarama.ErrGroupAuthorizationFailed)
		}
	}
}

func testKafkaGoSecure(t *testing.T, sc *secureCluster, mode string, configs map[string]*string) {
	const parts, n = 3, 600
	topic := "gcsec-alice-" + mode + "-kafka-go"
	groupID := topic + "-group"
	sc.createTopic(t, topic, parts, configs)
	errLog := newClientLogger(t, "kafka-go: ")
	var debugLog kafka.Logger
	if os.Getenv("KWAL_TEST_DEBUG") != "" {
		debugLog = newClientLogger(t, "kafka-go debug: ")
	}
	mech, err := kafkascram.Mechanism(kafkascram.SHA256, "alice", sc.pw["alice"])
	if err != nil {
		t.Fatal(err)
	}
	transport := &kafka.Transport{ClientID: "kwal-test-secure-kafka-go", TLS: sc.tlsConfig(), SASL: mech}
	defer transport.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	w := &kafka.Writer{Addr: kafka.TCP(sc.addrs()...), Topic: topic, Balancer: &kafka.RoundRobin{},
		RequiredAcks: kafka.RequireAll, BatchSize: 100, BatchTimeout: 20 * time.Millisecond,
		Transport: transport, ErrorLogger: errLog, Logger: debugLog}
	msgs := make([]kafka.Message, n)
	written := map[string]int{} // value → its sequence number
	for i := range msgs {
		v := fmt.Sprintf("gcsec-kafka-go-%s-%06d", mode, i)
		msgs[i] = kafka.Message{Value: []byte(v)}
		written[v] = i
	}
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
	if ws := w.Stats(); ws.Messages != n || ws.Errors != 0 {
		t.Fatalf("kafka-go Writer stats: %d messages, %d errors, want %d and 0", ws.Messages, ws.Errors, n)
	}
	ends := endOffsets(t, sc.kadmAs(t, "admin"), topic, parts)
	for p, end := range ends {
		if end != n/parts {
			t.Fatalf("%s-%d ends at %d, want %d (round robin)", topic, p, end, n/parts)
		}
	}

	// The group Reader dials (and its group coordinator connections) with
	// a kafka.Dialer; ReadMessage commits each message before returning.
	dialer := &kafka.Dialer{ClientID: "kwal-test-secure-kafka-go-reader", Timeout: 10 * time.Second, DualStack: true,
		TLS: sc.tlsConfig(), SASLMechanism: mech}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: sc.addrs(), GroupID: groupID, Topic: topic, Dialer: dialer,
		StartOffset: kafka.FirstOffset, MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 200 * time.Millisecond,
		ErrorLogger: errLog, Logger: debugLog})
	defer r.Close()
	byPart := make([][]string, parts) // partition → offset → value
	read := map[string]bool{}
	for i := range n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go group Reader: message %d of %d: %v", i, n, err)
		}
		v := string(m.Value)
		seq, ok := written[v]
		if m.Topic != topic || m.Partition < 0 || m.Partition >= parts || !ok {
			t.Fatalf("kafka-go group Reader: %q at %s-%d offset %d was not written", v, m.Topic, m.Partition, m.Offset)
		}
		if read[v] {
			t.Fatalf("kafka-go group Reader: %q (%s-%d offset %d) read twice", v, topic, m.Partition, m.Offset)
		}
		if want := int64(len(byPart[m.Partition])); m.Offset != want {
			t.Fatalf("kafka-go group Reader: %s-%d offset %d, want %d (dense, in order)", topic, m.Partition, m.Offset, want)
		}
		if prev := byPart[m.Partition]; len(prev) > 0 && written[prev[len(prev)-1]] >= seq {
			t.Fatalf("kafka-go group Reader: %s-%d: %q after %q: not in the written order", topic, m.Partition, v, prev[len(prev)-1])
		}
		read[v] = true
		byPart[m.Partition] = append(byPart[m.Partition], v)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("close the kafka-go group Reader: %v", err)
	}
	sc.checkCommittedAtEnd(t, ctx, groupID, topic, ends)
}

package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/logbuf"
	"github.com/kwal/kwal/internal/testpki"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// testPKI is a CA made for one test (internal/testpki).
type testPKI struct {
	*testpki.CA
	caFile string
	pool   *x509.CertPool
}

func newTestPKI(t testing.TB, name string) *testPKI {
	ca := testpki.New(t, name)
	return &testPKI{CA: ca, caFile: ca.File, pool: ca.Pool}
}

func (p *testPKI) issue(t testing.TB, cn string) string { return p.Issue(t, cn) }

func (p *testPKI) clientTLS(t testing.TB, certFile string) *tls.Config {
	t.Helper()
	cfg, err := TLSSettings{TruststoreLocation: p.caFile, KeystoreLocation: certFile}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// produceConsume writes n records acks=all to a new topic (RF 2, so the
// follower replicates over the inter-broker listener) and reads them back.
func produceConsume(t *testing.T, seeds []string, topic string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	createTopic(t, cl, topic, 1, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 20
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value(i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cons, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if !bytes.Equal(r.Value, value(got)) {
				t.Fatalf("record %d: %q", got, r.Value)
			}
			got++
		})
	}
}

// listenerSeeds are the bound addresses of a listener on every broker.
func listenerSeeds(t testing.TB, c *testCluster, name string) []string {
	t.Helper()
	var out []string
	for _, b := range c.brokers {
		a, ok := b.ListenerAddr(name)
		if !ok {
			t.Fatalf("broker %d has no listener %s", b.cfg.BrokerID, name)
		}
		out = append(out, a)
	}
	return out
}

// Metadata answers with the addresses of the listener the request came
// in on, for every broker; replication runs on the inter-broker listener.
func TestListenersMetadataPerListener(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2"}, func(cfg *Config) {
		cfg.Listeners = []ListenerConfig{
			{Name: "INTERNAL", Addr: "127.0.0.1:0", Protocol: ProtocolPlaintext},
			{Name: "EXTERNAL", Addr: "127.0.0.1:0", Advertised: "localhost:0", Protocol: ProtocolPlaintext},
		}
		cfg.InterBrokerListenerName = "INTERNAL"
	})
	ext := listenerSeeds(t, c, "EXTERNAL")
	in := listenerSeeds(t, c, "INTERNAL")
	for _, tc := range []struct {
		listener string
		seed     string
		want     []string
	}{
		{"INTERNAL", in[0], in},
		{"EXTERNAL", ext[1], []string{"localhost:" + port(ext[0]), "localhost:" + port(ext[1])}},
	} {
		resp := rawMetadata(t, tc.seed)
		var got []string
		for _, b := range resp.Brokers {
			got = append(got, net.JoinHostPort(b.Host, fmt.Sprint(b.Port)))
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: metadata brokers %v, want %v", tc.listener, got, tc.want)
		}
	}
	if b := c.brokers[0].Info(); b.Addr() != in[0] || len(b.Endpoints) != 2 {
		t.Fatalf("registered %+v", b)
	}
	// A client on the external listener produces acks=all (follower on
	// INTERNAL) and consumes; it is given 127.0.0.1 seeds but learns
	// localhost addresses, which resolve to the same listeners.
	produceConsume(t, ext, "listeners")
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// rawMetadata sends one Metadata v9 on a plain connection to addr.
func rawMetadata(t testing.TB, addr string) *kmsg.MetadataResponse {
	t.Helper()
	wc, err := dialWire(net.DialTimeout, addr, "test", 5*time.Second, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.close()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	resp, err := wc.roundTrip(req, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.MetadataResponse)
}

// startTLSCluster: INTERNAL is SSL with ssl.client.auth=required (brokers
// present their certificates to each other), EXTERNAL is SSL without
// client certificates, both from one test CA.
func startTLSCluster(t *testing.T, pki *testPKI) *testCluster {
	return startCluster(t, []string{"az1", "az2"}, func(cfg *Config) {
		pemFile := pki.issue(t, fmt.Sprintf("broker-%d", cfg.BrokerID))
		required, err := TLSSettings{KeystoreLocation: pemFile, TruststoreLocation: pki.caFile, ClientAuth: "required"}.ServerConfig()
		if err != nil {
			t.Fatal(err)
		}
		none, err := TLSSettings{KeystoreType: "PEM", KeystoreLocation: pemFile}.ServerConfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listeners = []ListenerConfig{
			{Name: "INTERNAL", Addr: "127.0.0.1:0", Protocol: ProtocolSSL, TLS: required},
			{Name: "EXTERNAL", Addr: "127.0.0.1:0", Protocol: ProtocolSSL, TLS: none},
		}
		cfg.InterBrokerListenerName = "INTERNAL"
		cfg.InterBrokerTLS = pki.clientTLS(t, pemFile)
	})
}

func TestTLSListeners(t *testing.T) {
	pki := newTestPKI(t, "kwal-test-ca")
	c := startTLSCluster(t, pki)
	ext := listenerSeeds(t, c, "EXTERNAL")
	in := listenerSeeds(t, c, "INTERNAL")
	produceConsume(t, ext, "tls", kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool}))
	// A client certificate from the CA gets in on INTERNAL too.
	produceConsume(t, in, "tls-mtls", kgo.DialTLSConfig(pki.clientTLS(t, pki.issue(t, "client"))))

	t.Run("wrong CA refused", func(t *testing.T) {
		other := newTestPKI(t, "other-ca")
		_, err := tls.Dial("tcp", ext[0], &tls.Config{RootCAs: other.pool, ServerName: "127.0.0.1"})
		var uerr x509.UnknownAuthorityError
		if !errors.As(err, &uerr) {
			t.Fatalf("dial with another CA: %v, want an unknown authority error", err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(ext...), kgo.DialTLSConfig(&tls.Config{RootCAs: other.pool}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err == nil {
			t.Fatal("franz-go with another CA reached the broker")
		}
	})
	t.Run("no client certificate refused on required", func(t *testing.T) {
		if err := tlsApiVersions(in[0], &tls.Config{RootCAs: pki.pool, ServerName: "127.0.0.1"}); err == nil {
			t.Fatal("a client without a certificate was served on a ssl.client.auth=required listener")
		}
		if err := tlsApiVersions(ext[0], &tls.Config{RootCAs: pki.pool, ServerName: "127.0.0.1"}); err != nil {
			t.Fatalf("no-client-auth listener: %v", err)
		}
	})
	t.Run("certificate of another CA refused on required", func(t *testing.T) {
		other := newTestPKI(t, "other-ca")
		cfg := other.clientTLS(t, other.issue(t, "intruder"))
		cfg.RootCAs = pki.pool
		if err := tlsApiVersions(in[0], cfg); err == nil {
			t.Fatal("a certificate from another CA was accepted")
		}
	})
	t.Run("endpoint identification", func(t *testing.T) {
		chainOnly, err := TLSSettings{TruststoreLocation: pki.caFile, NoEndpointIdentification: true}.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		chainOnly.ServerName = "not-the-broker.example"
		if err := tlsApiVersions(ext[0], chainOnly); err != nil {
			t.Fatalf("chain-only check with another name: %v", err)
		}
		if err := tlsApiVersions(ext[0], &tls.Config{RootCAs: pki.pool, ServerName: "not-the-broker.example"}); err == nil {
			t.Fatal("host name not checked by default")
		}
		other := newTestPKI(t, "other-ca")
		wrong, _ := TLSSettings{TruststoreLocation: other.caFile, NoEndpointIdentification: true}.ClientConfig()
		if err := tlsApiVersions(ext[0], wrong); err == nil {
			t.Fatal("chain-only check accepted another CA")
		}
	})
	t.Run("plaintext client refused", func(t *testing.T) {
		wc, err := dialWire(net.DialTimeout, ext[0], "plain", 5*time.Second, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer wc.close()
		req := kmsg.NewPtrApiVersionsRequest()
		if _, err := wc.roundTrip(req, time.Now().Add(10*time.Second)); err == nil {
			t.Fatal("plaintext ApiVersions answered on an SSL listener")
		}
	})
}

// tlsApiVersions dials addr with cfg and does one ApiVersions.
func tlsApiVersions(addr string, cfg *tls.Config) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	wc := &wireClient{conn: conn, clientID: "t", maxResp: 1 << 20}
	defer wc.close()
	_, err = wc.roundTrip(kmsg.NewPtrApiVersionsRequest(), time.Now().Add(10*time.Second))
	return err
}

const (
	testUser       = "alice"
	testPassword   = "alice-secret-pw"
	brokerUser     = "broker"
	brokerPassword = "broker-secret-pw"
)

func testUsers(t testing.TB) (path string, store *UserFile) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "users")
	all := []string{mechScramSHA256, mechScramSHA512}
	if err := AddUser(path, testUser, testPassword, all, 4096); err != nil {
		t.Fatal(err)
	}
	if err := AddUser(path, brokerUser, brokerPassword, all, 4096); err != nil {
		t.Fatal(err)
	}
	f, err := LoadUserFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, f
}

func clientSASL(mech, user, pass string) sasl.Mechanism {
	m, err := (&SASLClientConfig{Mechanism: mech, Username: user, Password: pass}).SASL()
	if err != nil {
		panic(err)
	}
	return m
}

// SASL/PLAIN and SCRAM-SHA-256/512 over SASL_PLAINTEXT and SASL_SSL, with
// brokers authenticating to each other on the same listener: produce and
// consume work, a wrong password and an unknown user are refused with
// SASL_AUTHENTICATION_FAILED and a log line without the password, an
// unauthenticated produce is refused and appends nothing.
func TestSASLListeners(t *testing.T) {
	pki := newTestPKI(t, "kwal-sasl-ca")
	_, users := testUsers(t)
	for _, proto := range []SecurityProtocol{ProtocolSASLPlaintext, ProtocolSASLSSL} {
		t.Run(string(proto), func(t *testing.T) {
			logs := &logbuf.Buffer{}
			c := startCluster(t, []string{"az1", "az2"}, func(cfg *Config) {
				cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, &testLogWriter{t: t}), &slog.HandlerOptions{Level: slog.LevelWarn}))
				l := ListenerConfig{Name: "SECURE", Addr: "127.0.0.1:0", Protocol: proto, SASLMechanisms: supportedSASLMechanisms}
				if proto.UsesTLS() {
					pemFile := pki.issue(t, fmt.Sprintf("sasl-broker-%d", cfg.BrokerID))
					l.TLS, _ = TLSSettings{KeystoreLocation: pemFile}.ServerConfig()
					cfg.InterBrokerTLS = &tls.Config{RootCAs: pki.pool}
				}
				cfg.Listeners = []ListenerConfig{l}
				cfg.SASLCredentials = users
				cfg.InterBrokerSASL = &SASLClientConfig{Mechanism: mechScramSHA512, Username: brokerUser, Password: brokerPassword}
			})
			seeds := c.seeds()
			var tlsOpt []kgo.Opt
			if proto.UsesTLS() {
				tlsOpt = append(tlsOpt, kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool}))
			}
			for _, mech := range supportedSASLMechanisms {
				t.Run(mech, func(t *testing.T) {
					opts := append([]kgo.Opt{kgo.SASL(clientSASL(mech, testUser, testPassword))}, tlsOpt...)
					produceConsume(t, seeds, strings.ToLower("sasl-"+string(proto)+"-"+mech), opts...)
					for _, bad := range []struct{ user, pass string }{{testUser, "wrong-password-42"}, {"mallory", "wrong-password-42"}} {
						cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.SASL(clientSASL(mech, bad.user, bad.pass))}, tlsOpt...)...)
						if err != nil {
							t.Fatal(err)
						}
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						err = cl.Ping(ctx)
						cancel()
						cl.Close()
						if !errors.Is(err, kerr.SaslAuthenticationFailed) {
							t.Fatalf("%s/%s: %v, want SASL_AUTHENTICATION_FAILED", bad.user, mech, err)
						}
					}
				})
			}
			l := logs.String()
			if !strings.Contains(l, "SASL authentication failed") {
				t.Fatalf("no log line for the refusals:\n%s", l)
			}
			for _, secret := range []string{"wrong-password-42", testPassword, brokerPassword} {
				if strings.Contains(l, secret) {
					t.Fatalf("a password is in the log:\n%s", l)
				}
			}
			t.Run("unauthenticated produce", func(t *testing.T) {
				var dial func() (net.Conn, error)
				dial = func() (net.Conn, error) { return net.DialTimeout("tcp", seeds[0], 5*time.Second) }
				if proto.UsesTLS() {
					dial = func() (net.Conn, error) {
						return tls.Dial("tcp", seeds[0], &tls.Config{RootCAs: pki.pool, ServerName: "127.0.0.1"})
					}
				}
				tp := TopicPartition{Topic: strings.ToLower("sasl-" + string(proto) + "-" + mechPlain), Partition: 0}
				lg, ok := c.broker(1).PartitionLog(tp)
				if !ok {
					lg, _ = c.broker(2).PartitionLog(tp)
				}
				before := lg.LogEndOffset()
				for _, b := range c.brokers {
					conn, err := dial()
					if err != nil {
						t.Fatal(err)
					}
					if err := unauthProduce(conn, tp.Topic); err == nil {
						t.Fatalf("broker %d answered a produce before authentication", b.cfg.BrokerID)
					}
					conn.Close()
				}
				if after := lg.LogEndOffset(); after != before {
					t.Fatalf("log end moved %d -> %d", before, after)
				}
				if !strings.Contains(logs.String(), "request before SASL authentication") {
					t.Fatal("no log line for the unauthenticated request")
				}
			})
		})
	}
}

// unauthProduce sends an acks=1 Produce without authenticating; it
// returns nil only if a response came back.
func unauthProduce(conn net.Conn, topic string) error {
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = 1, 1000
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic = topic
	prp := kmsg.NewProduceRequestTopicPartition()
	prp.Records = kafkalogtest.MakeBatch(0, 0, [][]byte{[]byte("unauthenticated")}, 1)
	prt.Partitions = append(prt.Partitions, prp)
	pr.Topics = append(pr.Topics, prt)
	body := frameOf(pr, 9, 1)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(append(frame, body...)); err != nil {
		return err
	}
	var size [4]byte
	_, err := io.ReadFull(conn, size[:])
	return err
}

// The security keys of server.properties, end to end: INTERNAL is
// SASL_SSL with client certificates required (brokers replicate over it
// with SCRAM-SHA-512 and their certificates, the password from the
// environment), EXTERNAL is SSL; listener.name.internal.* overrides the
// broker-wide ssl.* and sasl.* keys.
func TestSecurityFromProperties(t *testing.T) {
	pki := newTestPKI(t, "kwal-props-ca")
	usersFile, _ := testUsers(t)
	env := func(k string) string {
		if k == EnvInterBrokerSASLPassword {
			return brokerPassword
		}
		return ""
	}
	c := startCluster(t, []string{"az1", "az2"}, func(cfg *Config) {
		props := strings.Join([]string{
			"listeners=INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
			"listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:SSL",
			"inter.broker.listener.name=INTERNAL",
			"ssl.keystore.type=PEM",
			"ssl.keystore.location=" + pki.issue(t, fmt.Sprintf("props-broker-%d", cfg.BrokerID)),
			"ssl.truststore.type=PEM",
			"ssl.truststore.location=" + pki.caFile,
			"ssl.client.auth=none",
			"listener.name.internal.ssl.client.auth=required",
			"sasl.enabled.mechanisms=PLAIN",
			"listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
			"kwal.sasl.users.file=" + usersFile,
			"kwal.inter.broker.sasl.username=" + brokerUser,
			"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
		}, "\n")
		p, err := ParseProperties(strings.NewReader(props))
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ServerConfigFromPropertiesEnv(p, env)
		if err != nil {
			t.Fatal(err)
		}
		b := sc.Broker
		cfg.Listeners, cfg.InterBrokerListenerName = b.Listeners, b.InterBrokerListenerName
		cfg.InterBrokerTLS, cfg.InterBrokerSASL, cfg.SASLCredentials = b.InterBrokerTLS, b.InterBrokerSASL, b.SASLCredentials
	})
	in, ext := listenerSeeds(t, c, "INTERNAL"), listenerSeeds(t, c, "EXTERNAL")
	produceConsume(t, ext, "props-external", kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool}))
	clientCert := pki.clientTLS(t, pki.issue(t, "props-client"))
	produceConsume(t, in, "props-internal", kgo.DialTLSConfig(clientCert), kgo.SASL(clientSASL(mechScramSHA512, testUser, testPassword)))
	ping := func(seeds []string, opts ...kgo.Opt) error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := ping(in, kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool}), kgo.SASL(clientSASL(mechScramSHA512, testUser, testPassword))); err == nil {
		t.Fatal("INTERNAL served a client without a certificate")
	}
	// The override leaves INTERNAL with SCRAM-SHA-512 only.
	if err := ping(in, kgo.DialTLSConfig(clientCert), kgo.SASL(clientSASL(mechPlain, testUser, testPassword))); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Fatalf("PLAIN on INTERNAL: %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}
}

// After SaslHandshake v0 the tokens travel bare (KIP-43): a PLAIN token,
// an empty answer, then the connection is authenticated; a bad token
// closes it.
func TestSASLHandshakeV0(t *testing.T) {
	_, users := testUsers(t)
	c := startCluster(t, []string{"az1"}, func(cfg *Config) {
		cfg.Listeners = []ListenerConfig{{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Protocol: ProtocolSASLPlaintext, SASLMechanisms: []string{mechPlain}}}
		cfg.SASLCredentials = users
		cfg.InterBrokerSASL = &SASLClientConfig{Mechanism: mechPlain, Username: brokerUser, Password: brokerPassword}
	})
	for _, tc := range []struct {
		password string
		ok       bool
	}{{testPassword, true}, {"nope", false}} {
		wc, err := dialWire(net.DialTimeout, c.seeds()[0], "v0", 5*time.Second, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 0, mechPlain
		resp, err := wc.roundTrip(hs, time.Now().Add(10*time.Second))
		if err != nil || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
			t.Fatalf("handshake v0: %v %+v", err, resp)
		}
		token := []byte("\x00" + testUser + "\x00" + tc.password)
		wc.conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := wc.conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...)); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		_, err = io.ReadFull(wc.conn, size[:])
		if !tc.ok {
			if err == nil {
				t.Fatal("a wrong v0 token was answered")
			}
			wc.close()
			continue
		}
		if err != nil || binary.BigEndian.Uint32(size[:]) != 0 {
			t.Fatalf("v0 PLAIN answer: %v %v", err, size)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 9
		if _, err := wc.roundTrip(md, time.Now().Add(10*time.Second)); err != nil {
			t.Fatalf("Metadata after v0 authentication: %v", err)
		}
		wc.close()
	}
}

// The FollowerReplica handle a Replicator gets (remote-WAL leader
// requests) names the leader's inter-broker address and dials it with
// the broker's TLS and SASL: a request on it is served, and a broker with
// a wrong inter-broker password is refused.
func TestReplicaHandleDialsSecurely(t *testing.T) {
	pki := newTestPKI(t, "kwal-handle-ca")
	_, users := testUsers(t)
	c := startCluster(t, []string{"az1", "az2"}, func(cfg *Config) {
		pemFile := pki.issue(t, fmt.Sprintf("handle-broker-%d", cfg.BrokerID))
		srv, _ := TLSSettings{KeystoreLocation: pemFile}.ServerConfig()
		cfg.Listeners = []ListenerConfig{
			{Name: "PLAIN", Addr: "127.0.0.1:0", Protocol: ProtocolPlaintext},
			{Name: "INTERNAL", Addr: "127.0.0.1:0", Protocol: ProtocolSASLSSL, TLS: srv},
		}
		cfg.InterBrokerListenerName = "INTERNAL"
		cfg.InterBrokerTLS = &tls.Config{RootCAs: pki.pool}
		cfg.SASLCredentials = users
		cfg.InterBrokerSASL = &SASLClientConfig{Mechanism: mechScramSHA512, Username: brokerUser, Password: brokerPassword}
	})
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "h", Partitions: 1, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	ts, _ := c.ctrl.Topic("h")
	leader := ts.Partitions[0].Leader
	var follower *Broker
	for _, b := range c.brokers {
		if b.cfg.BrokerID != leader {
			follower = b
		}
	}
	p := follower.partition(TopicPartition{Topic: "h"})
	if p == nil {
		t.Fatal("follower has no replica")
	}
	h := newReplicaHandle(follower, p, leader, ts.Partitions[0].LeaderEpoch, func() {})
	want, _ := c.broker(leader).ListenerAddr("INTERNAL")
	if got := h.Leader().Addr; got != want {
		t.Fatalf("handle names %s, want the leader's INTERNAL listener %s", got, want)
	}
	wc, err := h.Dial(want, "handle-test", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	if _, err := wc.RoundTrip(md, time.Now().Add(10*time.Second)); err != nil {
		t.Fatalf("request on the handle's connection: %v", err)
	}
	wc.Close()
	// A broker whose inter-broker password is wrong (a copy of the
	// follower's settings; the running follower is left alone).
	bad := &Broker{cfg: follower.cfg, ctrl: follower.ctrl}
	bad.cfg.InterBrokerSASL = &SASLClientConfig{Mechanism: mechScramSHA512, Username: brokerUser, Password: "wrong"}
	badHandle := newReplicaHandle(bad, p, leader, ts.Partitions[0].LeaderEpoch, func() {})
	if _, err := badHandle.Dial(want, "handle-test", 10*time.Second); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong inter-broker password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// A broker known only from a static cluster list (not registered yet, or
// registered with another process's controller) is listed on the
// inter-broker listener at its listed address and left out on others.
func TestMetadataStaticBrokerOnlyOnInterBrokerListener(t *testing.T) {
	static := []BrokerInfo{{ID: 1, Host: "127.0.0.1", Port: 1, Rack: "az1"}, {ID: 2, Host: "10.9.9.9", Port: 9092, Rack: "az2"}}
	ctrl := NewMemController(static, 0)
	b, err := New(Config{BrokerID: 1, Rack: "az1", LogDir: t.TempDir(), Controller: ctrl, Logger: quietLogger(), Clock: clock.NewManual(time.Now()),
		Listeners: []ListenerConfig{
			{Name: "INTERNAL", Addr: "127.0.0.1:0", Advertised: "127.0.0.1:1"},
			{Name: "EXTERNAL", Addr: "127.0.0.1:0", Advertised: "localhost:0"},
		}, InterBrokerListenerName: "INTERNAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	in, _ := b.ListenerAddr("INTERNAL")
	ext, _ := b.ListenerAddr("EXTERNAL")
	ids := func(addr string) (out []string) {
		for _, br := range rawMetadata(t, addr).Brokers {
			out = append(out, fmt.Sprintf("%d@%s:%d", br.NodeID, br.Host, br.Port))
		}
		return out
	}
	if got := strings.Join(ids(in), ","); got != "1@127.0.0.1:1,2@10.9.9.9:9092" {
		t.Fatalf("INTERNAL: %s", got)
	}
	if got := strings.Join(ids(ext), ","); got != "1@localhost:"+port(ext) {
		t.Fatalf("EXTERNAL: %s", got)
	}
}

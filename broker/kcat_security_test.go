package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func kcatPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KWAL_KCAT"); p != "" {
		return p
	}
	p, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("SKIPPED: kcat is not installed (scripts/test-env.sh installs it); the librdkafka TLS/SASL test did not run")
	}
	return p
}

// kcatRun produces n records to topic with kcat (librdkafka) using the
// -X settings given, then consumes them back; it returns the error of
// the first step that failed, with kcat's output.
func kcatRun(kcat, bootstrap, topic string, n int, x ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var xs []string
	for _, s := range x {
		xs = append(xs, "-X", s)
	}
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, "%s\n", value(i))
	}
	prod := exec.CommandContext(ctx, kcat, append([]string{"-P", "-b", bootstrap, "-t", topic, "-p", "0", "-X", "acks=all", "-X", "message.timeout.ms=10000"}, xs...)...)
	prod.Stdin = &in
	if out, err := prod.CombinedOutput(); err != nil {
		return fmt.Errorf("kcat produce: %v\n%s", err, out)
	}
	cons := exec.CommandContext(ctx, kcat, append([]string{"-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"}, xs...)...)
	var stderr bytes.Buffer
	cons.Stderr = &stderr
	out, err := cons.Output()
	if err != nil {
		return fmt.Errorf("kcat consume: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		return fmt.Errorf("kcat consumed %d records, want %d: %q", len(lines), n, out)
	}
	for i, l := range lines {
		if l != string(value(i)) {
			return fmt.Errorf("record %d: %q", i, l)
		}
	}
	return nil
}

// kcat over SSL (the test CA as ssl.ca.location), and over SASL_SSL and
// SASL_PLAINTEXT with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; another CA
// and a wrong password are refused.
func TestKcatTLSAndSASL(t *testing.T) {
	kcat := kcatPath(t)
	pki := newTestPKI(t, "kwal-kcat-ca")
	_, users := testUsers(t)
	c := startCluster(t, []string{"az1", "az2"}, func(cfg *Config) {
		onRealClock(cfg) // kcat's long polls: see TestKcatProduceConsume
		cfg.Logger = testLogger(t, slog.LevelError)
		pemFile := pki.issue(t, fmt.Sprintf("kcat-broker-%d", cfg.BrokerID))
		srv, err := TLSSettings{KeystoreLocation: pemFile}.ServerConfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listeners = []ListenerConfig{
			{Name: "SSL", Addr: "127.0.0.1:0", Protocol: ProtocolSSL, TLS: srv},
			{Name: "SASL_SSL", Addr: "127.0.0.1:0", Protocol: ProtocolSASLSSL, TLS: srv, SASLMechanisms: supportedSASLMechanisms},
			{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Protocol: ProtocolSASLPlaintext, SASLMechanisms: supportedSASLMechanisms},
		}
		cfg.InterBrokerListenerName = "SASL_SSL"
		cfg.InterBrokerTLS = &tls.Config{RootCAs: pki.pool}
		cfg.SASLCredentials = users
		cfg.InterBrokerSASL = &SASLClientConfig{Mechanism: mechScramSHA256, Username: brokerUser, Password: brokerPassword}
	})
	admin := func(name string) {
		if _, err := c.ctrl.CreateTopic(TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 2}); err != nil {
			t.Fatal(err)
		}
	}
	seeds := func(listener string) string { return strings.Join(listenerSeeds(t, c, listener), ",") }
	ca := "ssl.ca.location=" + pki.caFile
	scram := func(proto, mech, pass string) []string {
		return []string{"security.protocol=" + proto, "sasl.mechanisms=" + mech, "sasl.username=" + testUser, "sasl.password=" + pass}
	}
	ok := []struct {
		name, listener string
		x              []string
	}{
		{"ssl", "SSL", []string{"security.protocol=ssl", ca}},
		{"sasl-ssl-scram-256", "SASL_SSL", append(scram("sasl_ssl", mechScramSHA256, testPassword), ca)},
		{"sasl-ssl-scram-512", "SASL_SSL", append(scram("sasl_ssl", mechScramSHA512, testPassword), ca)},
		{"sasl-ssl-plain", "SASL_SSL", append(scram("sasl_ssl", mechPlain, testPassword), ca)},
		{"sasl-plaintext-scram-256", "SASL_PLAINTEXT", scram("sasl_plaintext", mechScramSHA256, testPassword)},
		{"sasl-plaintext-scram-512", "SASL_PLAINTEXT", scram("sasl_plaintext", mechScramSHA512, testPassword)},
		{"sasl-plaintext-plain", "SASL_PLAINTEXT", scram("sasl_plaintext", mechPlain, testPassword)},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			admin(tc.name)
			if err := kcatRun(kcat, seeds(tc.listener), tc.name, 20, tc.x...); err != nil {
				t.Fatal(err)
			}
		})
	}
	other := newTestPKI(t, "other-ca")
	bad := []struct {
		name, listener string
		x              []string
	}{
		{"ssl-other-ca", "SSL", []string{"security.protocol=ssl", "ssl.ca.location=" + other.caFile}},
		{"sasl-ssl-wrong-password", "SASL_SSL", append(scram("sasl_ssl", mechScramSHA256, "not-the-password"), ca)},
		{"sasl-plaintext-wrong-password", "SASL_PLAINTEXT", scram("sasl_plaintext", mechPlain, "not-the-password")},
		{"sasl-listener-without-sasl", "SASL_PLAINTEXT", nil},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			admin(tc.name)
			err := kcatRun(kcat, seeds(tc.listener), tc.name, 1, append(tc.x, "socket.timeout.ms=3000")...)
			if err == nil {
				t.Fatal("kcat got through")
			}
			t.Logf("refused as expected: %v", strings.SplitN(err.Error(), "\n", 3)[0])
			for _, b := range c.brokers {
				if lg, ok := b.PartitionLog(TopicPartition{Topic: tc.name}); ok && lg.LogEndOffset() != 0 {
					t.Fatalf("broker %d appended %d records", b.cfg.BrokerID, lg.LogEndOffset())
				}
			}
		})
	}
}

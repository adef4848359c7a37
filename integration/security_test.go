package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kwal/kwal/internal/procs"
	"github.com/kwal/kwal/internal/testpki"
	"github.com/kwal/kwal/metadata"
)

// Two `kwal broker` processes configured the way an operator would:
// users made with `kwal users add` (password on stdin), listeners
// INTERNAL (SASL_SSL, brokers replicate over it with SCRAM-SHA-512, the
// password from KWAL_INTER_BROKER_SASL_PASSWORD) and EXTERNAL (SSL), the
// controller state in a shared metadata Kafka so each broker learns the
// other's EXTERNAL address. franz-go produces acks=all over EXTERNAL and
// reads back; Metadata on EXTERNAL names only EXTERNAL addresses; SCRAM
// works on INTERNAL and a wrong password does not; kcat reads over SSL
// with the test CA; no password reaches a broker log.
func TestSecureBrokerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short: the secure multi-process test did not run")
	}
	bin := buildKwal(t)
	ca := testpki.New(t, "kwal-integration-ca")
	emb, err := metadata.StartEmbedded(t.TempDir(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	const (
		alicePW  = "alice-pw-7f3a91"
		brokerPW = "broker-pw-c0ffee"
	)
	users := filepath.Join(t.TempDir(), "users")
	for user, pw := range map[string]string{"alice": alicePW, "broker": brokerPW} {
		cmd := exec.Command(bin, "users", "add", "--file", users, "--user", user)
		cmd.Stdin = strings.NewReader(pw + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kwal users add %s: %v\n%s", user, err, out)
		}
	}
	t.Setenv("KWAL_INTER_BROKER_SASL_PASSWORD", brokerPW) // inherited by the brokers

	c := &compatCluster{bin: bin}
	external := map[int32]int{}
	var list []string
	for i, rack := range []string{"az1", "az2"} {
		b := &compatBroker{id: int32(i + 1), rack: rack, port: freePort(t), dir: t.TempDir()}
		external[b.id] = freePort(t)
		c.brokers = append(c.brokers, b)
		list = append(list, fmt.Sprintf("%d@%s#%s", b.id, b.addr(), rack))
	}
	for _, b := range c.brokers {
		props := strings.Join([]string{
			"broker.id=" + strconv.Itoa(int(b.id)),
			fmt.Sprintf("listeners=INTERNAL://%s,EXTERNAL://127.0.0.1:%d", b.addr(), external[b.id]),
			"listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:SSL",
			"inter.broker.listener.name=INTERNAL",
			"ssl.keystore.location=" + ca.Issue(t, fmt.Sprintf("broker-%d", b.id)),
			"ssl.truststore.location=" + ca.File,
			"sasl.enabled.mechanisms=SCRAM-SHA-512",
			"kwal.sasl.users.file=" + users,
			"kwal.inter.broker.sasl.username=broker",
			"log.dirs=" + filepath.Join(b.dir, "logs"),
			"cluster.brokers=" + strings.Join(list, ","),
			"default.replication.factor=2",
			"remote.wal.metadata.bootstrap.servers=" + strings.Join(emb.Bootstrap(), ","),
		}, "\n") + "\n"
		b.props = filepath.Join(b.dir, "server.properties")
		if err := os.WriteFile(b.props, []byte(props), 0o600); err != nil {
			t.Fatal(err)
		}
		b.proc = procs.Broker(fmt.Sprintf("broker %d", b.id), bin, b.props, b.addr())
	}
	for i := range c.brokers {
		c.start(t, i)
	}
	defer c.stopAll(t)

	var extSeeds []string
	for _, b := range c.brokers {
		extSeeds = append(extSeeds, fmt.Sprintf("127.0.0.1:%d", external[b.id]))
	}
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	waitUntil(t, ctx, "both brokers on EXTERNAL in Metadata", func() bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(extSeeds[0]), tlsOpt)
		if err != nil {
			return false
		}
		defer cl.Close()
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			return false
		}
		var got []string
		for _, b := range md.Brokers {
			got = append(got, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		}
		return strings.Join(got, ",") == strings.Join(extSeeds, ",")
	})

	const topic, n = "secure", 100
	prod, err := kgo.NewClient(kgo.SeedBrokers(extSeeds...), tlsOpt, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var want [][]byte
	for i := range n {
		v := fmt.Appendf(nil, "secure-%04d", i)
		want = append(want, v)
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce %d over EXTERNAL (SSL), replicated over INTERNAL (SASL_SSL): %v", i, err)
		}
	}

	scramAs := func(pw string) kgo.Opt { return kgo.SASL(scram.Auth{User: "alice", Pass: pw}.AsSha512Mechanism()) }
	intSeeds := c.addrs()
	cons, err := kgo.NewClient(kgo.SeedBrokers(intSeeds...), tlsOpt, scramAs(alicePW), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got [][]byte
	for len(got) < n && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
	}
	checkValues(t, got, want)

	bad, err := kgo.NewClient(kgo.SeedBrokers(intSeeds...), tlsOpt, scramAs("not-"+alicePW))
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Ping(ctx)
	bad.Close()
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password on INTERNAL: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	t.Run("kcat over SSL", func(t *testing.T) {
		kcat := kcatPath(t)
		cmd := exec.CommandContext(ctx, kcat, "-C", "-b", strings.Join(extSeeds, ","), "-t", topic, "-o", "beginning", "-e", "-q",
			"-X", "security.protocol=ssl", "-X", "ssl.ca.location="+ca.File)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat: %v\n%s", err, stderr.String())
		}
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != n {
			t.Fatalf("kcat read %d records, want %d", len(lines), n)
		}
	})

	c.stopAll(t)
	for _, b := range c.brokers {
		log, _ := os.ReadFile(b.proc.LogPath)
		for _, pw := range []string{alicePW, brokerPW} {
			if bytes.Contains(log, []byte(pw)) {
				t.Fatalf("broker %d log holds a password", b.id)
			}
		}
		if b.id == 1 && !bytes.Contains(log, []byte("listener EXTERNAL")) {
			t.Errorf("broker %d did not report its listeners:\n%s", b.id, procs.Tail(b.proc.LogPath, 40))
		}
	}
}

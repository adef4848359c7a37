package broker

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The metadata Kafka client (KafkaController here; the remote-WAL
// publisher and consumer take the same metadata.ClientSecurity) reaches a
// Kafka that wants TLS and SASL/SCRAM, configured through the
// remote.wal.metadata.* keys with the password from the environment; a
// wrong password or no TLS does not get in. Broker endpoints survive the
// trip through the state topic, and a static list keeps its address.
func TestMetadataClientTLSAndSASL(t *testing.T) {
	pki := newTestPKI(t, "kwal-metadata-ca")
	srv, err := TLSSettings{KeystoreLocation: pki.issue(t, "kfake")}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(srv), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "kwal", "metadata-secret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	props := "remote.wal.metadata.bootstrap.servers=" + strings.Join(kf.ListenAddrs(), ",") + "\n" +
		"remote.wal.metadata.security.protocol=SASL_SSL\n" +
		"remote.wal.metadata.ssl.truststore.type=PEM\n" +
		"remote.wal.metadata.ssl.truststore.location=" + pki.caFile + "\n" +
		"remote.wal.metadata.sasl.mechanism=SCRAM-SHA-512\n" +
		"remote.wal.metadata.sasl.username=kwal\n"
	open := func(password string, static []BrokerInfo, timeout time.Duration) (*KafkaController, error) {
		p, err := ParseProperties(strings.NewReader(props))
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ServerConfigFromPropertiesEnv(p, func(k string) string {
			if k == EnvMetadataSASLPassword {
				return password
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		sec, err := sc.Broker.RemoteWAL.MetadataClient()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return NewKafkaController(ctx, KafkaControllerConfig{
			Bootstrap: kf.ListenAddrs(), Brokers: static, Security: sec, Logger: quietLogger(), RequestTimeout: 20 * time.Second,
		})
	}
	static := []BrokerInfo{{ID: 1, Host: "kwal-1", Port: 9092, Rack: "az1"}}
	c, err := open("metadata-secret", static, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eps := []Endpoint{{Listener: "INTERNAL", Host: "kwal-1", Port: 9092}, {Listener: "EXTERNAL", Host: "localhost", Port: 19092}}
	if _, err := c.RegisterBroker(BrokerInfo{ID: 1, Host: "elsewhere", Port: 1, Rack: "az1", Endpoints: eps}); err != nil {
		t.Fatal(err)
	}
	// A second controller replays the state topic and learns the endpoints.
	c2, err := open("metadata-secret", static, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	want := BrokerInfo{ID: 1, Host: "kwal-1", Port: 9092, Rack: "az1", Endpoints: eps}
	for _, ctl := range []*KafkaController{c, c2} {
		if got := ctl.Brokers(); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Fatalf("brokers %+v, want %+v", got, want)
		}
	}
	if ep, ok := want.Endpoint("EXTERNAL"); !ok || ep.Addr() != "localhost:19092" {
		t.Fatalf("EXTERNAL endpoint %v %v", ep, ok)
	}
	if _, ok := want.Endpoint("OTHER"); ok {
		t.Fatal("endpoint for a listener the broker does not have")
	}

	if _, err := open("wrong-password", nil, 5*time.Second); err == nil {
		t.Fatal("a wrong metadata password got in")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := NewKafkaController(ctx, KafkaControllerConfig{Bootstrap: kf.ListenAddrs(), Logger: quietLogger()}); err == nil {
		t.Fatal("a plaintext client got in")
	}
}

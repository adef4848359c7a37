package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseProperties(t *testing.T) {
	cases := []struct {
		name, in string
		want     []Property
		wantErr  string
	}{
		{name: "forms and comments", in: "# c\n! c\n  a=1\nb: 2\nc 3\nd = 4 \n\n", want: []Property{
			{"a", "1", 3}, {"b", "2", 4}, {"c", "3", 5}, {"d", "4", 6}}},
		{name: "continuation", in: "list=a,\\\n    b\n", want: []Property{{"list", "a,b", 1}}},
		{name: "escapes", in: `k\=x=v\tw\u0041`, want: []Property{{"k=x", "v\twA", 1}}},
		{name: "empty value", in: "k=\n", want: []Property{{"k", "", 1}}},
		{name: "value keeps separators", in: "url=s3://b/p?endpoint=http://h:9000\n", want: []Property{{"url", "s3://b/p?endpoint=http://h:9000", 1}}},
		{name: "duplicate", in: "a=1\na=2\n", wantErr: "already set on line 1"},
		{name: "bad unicode", in: `a=\u12`, wantErr: "escape"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProperties(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("property %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestLoadServerProperties(t *testing.T) {
	full := `broker.id=2
broker.rack=az2
listeners=PLAINTEXT://127.0.0.1:9093
log.dirs=/var/kwal/2
log.segment.bytes=1048576
flush.messages=10
num.partitions=3
default.replication.factor=3
min.insync.replicas=2
replica.lag.time.max.ms=10000
remote.log.wal.storage.system.enable=true
remote.wal.log.manager.thread.pool.size=8
remote.wal.log.manager.combiner.thread.pool.size=3
remote.wal.log.manager.combiner.queue.size=64
remote.wal.log.manager.combiner.task.interval.ms=25
remote.wal.log.manager.combiner.task.upload.bytes=2097152
remote.wal.storage.url=file:///tmp/wal
remote.wal.metadata.bootstrap.servers=127.0.0.1:9999
cluster.brokers=1@127.0.0.1:9092#az1, 2@127.0.0.1:9093#az2, 3@127.0.0.1:9094#az3
`
	cases := []struct {
		name, in string
		check    func(t *testing.T, sc ServerConfig)
		wantErr  string
	}{
		{name: "every key", in: full, check: func(t *testing.T, sc ServerConfig) {
			c := sc.Broker
			if c.BrokerID != 2 || c.Rack != "az2" || len(c.Listeners) != 1 || c.Listeners[0].Addr != "127.0.0.1:9093" || c.LogDir != "/var/kwal/2" ||
				c.SegmentBytes != 1<<20 || c.FlushMessages != 10 || c.NumPartitions != 3 || c.DefaultReplicationFactor != 3 ||
				c.MinInsyncReplicas != 2 || c.ReplicaLagTimeMax != 10*time.Second {
				t.Errorf("broker settings: %+v", c)
			}
			r := c.RemoteWAL
			if !r.SystemEnable || r.ThreadPoolSize != 8 || r.CombinerThreadPoolSize != 3 || r.CombinerQueueSize != 64 ||
				r.CombinerTaskInterval != 25*time.Millisecond || r.CombinerTaskUploadBytes != 2<<20 ||
				r.StorageURL != "file:///tmp/wal" || r.MetadataBootstrapServers != "127.0.0.1:9999" {
				t.Errorf("remote WAL settings: %+v", r)
			}
			if len(sc.Cluster) != 3 || !reflect.DeepEqual(sc.Cluster[1], BrokerInfo{ID: 2, Host: "127.0.0.1", Port: 9093, Rack: "az2"}) {
				t.Errorf("cluster: %+v", sc.Cluster)
			}
		}},
		{name: "defaults", in: "", check: func(t *testing.T, sc ServerConfig) {
			c := sc.Broker
			c.Controller = NewMemController(nil, 0)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			if c.Listener != DefaultListener || c.NumPartitions != 1 || c.MinInsyncReplicas != 1 ||
				c.ReplicaLagTimeMax != 30*time.Second || c.SocketRequestMaxBytes != 100<<20 || c.LogDir == "" ||
				c.RemoteWAL.StorageURL != "" {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{name: "group coordinator keys", in: "offsets.topic.num.partitions=7\noffsets.topic.replication.factor=2\noffsets.commit.timeout.ms=900\n" +
			"group.min.session.timeout.ms=1000\ngroup.max.session.timeout.ms=60000\ngroup.initial.rebalance.delay.ms=0\ngroup.max.size=4\n" +
			"offsets.retention.minutes=60\noffsets.retention.check.interval.ms=1000\n",
			check: func(t *testing.T, sc ServerConfig) {
				c := sc.Broker
				c.Controller = NewMemController(nil, 0)
				if err := c.Validate(); err != nil {
					t.Fatal(err)
				}
				want := GroupConfig{OffsetsTopicPartitions: 7, OffsetsTopicReplicationFactor: 2, OffsetCommitTimeout: 900 * time.Millisecond,
					MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute, InitialRebalanceDelay: -1, MaxSize: 4,
					OffsetsRetention: time.Hour, OffsetsRetentionCheckInterval: time.Second}
				if c.Groups != want {
					t.Errorf("group settings %+v, want %+v", c.Groups, want)
				}
			}},
		{name: "group defaults", in: "", check: func(t *testing.T, sc ServerConfig) {
			c := sc.Broker
			c.Controller = NewMemController(nil, 0)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			g := c.Groups
			if g.OffsetsTopicPartitions != 50 || g.OffsetsTopicReplicationFactor != 3 || g.InitialRebalanceDelay != 3*time.Second ||
				g.MinSessionTimeout != 6*time.Second || g.MaxSessionTimeout != 30*time.Minute || g.OffsetCommitTimeout != 5*time.Second ||
				g.OffsetsRetention != 7*24*time.Hour || g.OffsetsRetentionCheckInterval != 10*time.Minute {
				t.Errorf("group defaults: %+v", g)
			}
		}},
		{name: "offsets replication factor 0", in: "offsets.topic.replication.factor=0\n", wantErr: "offsets.topic.replication.factor"},
		{name: "rack stores", in: "remote.wal.storage.url=mem://\nremote.wal.storage.url.az1=file:///a\nremote.wal.storage.url.az-2=mem://\n", check: func(t *testing.T, sc ServerConfig) {
			got := sc.Broker.RemoteWAL.RackStorageURLs
			if len(got) != 2 || got["az1"] != "file:///a" || got["az-2"] != "mem://" || sc.Broker.RemoteWAL.StorageURL != "mem://" {
				t.Errorf("rack stores %v", got)
			}
		}},
		{name: "rack store without rack", in: "remote.wal.storage.url.=mem://\n", wantErr: "bad rack name"},
		{name: "rack store empty url", in: "remote.wal.storage.url.az1=\n", wantErr: "empty store URL"},
		{name: "unknown key", in: "broker.id=1\nlog.retention.hourz=3\n", wantErr: `line 2: unknown key "log.retention.hourz"`},
		{name: "bad number", in: "num.partitions=many\n", wantErr: "num.partitions"},
		{name: "ssl listener without keystore", in: "listeners=SSL://:9093\n", wantErr: "no keystore"},
		{name: "jks refused", in: "listeners=SSL://:9093\nssl.keystore.type=JKS\nssl.keystore.location=/x\n", wantErr: "only PEM"},
		{name: "encrypted key refused", in: "listeners=SSL://:9093\nssl.keystore.location=/x\nssl.key.password=p\n", wantErr: "ssl.key.password"},
		{name: "listener name not a protocol", in: "listeners=INTERNAL://:9092\n", wantErr: "not a protocol name"},
		{name: "listener not mapped", in: "listeners=A://:9092,B://:9093\nlistener.security.protocol.map=A:PLAINTEXT\n", wantErr: "listener B is not mapped"},
		{name: "bad protocol", in: "listeners=A://:9092\nlistener.security.protocol.map=A:TLS\n", wantErr: "unknown security protocol"},
		{name: "advertised unknown listener", in: "listeners=PLAINTEXT://:9092\nadvertised.listeners=EXTERNAL://h:1\n", wantErr: "not in listeners"},
		{name: "duplicate listener", in: "listeners=PLAINTEXT://:9092,PLAINTEXT://:9093\n", wantErr: "appears twice"},
		{name: "unsupported mechanism", in: "listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=GSSAPI\n", wantErr: "GSSAPI is not supported"},
		{name: "missing users file", in: "listeners=SASL_PLAINTEXT://:9092\nkwal.sasl.users.file=/nonexistent/users\n", wantErr: "kwal.sasl.users.file"},
		{name: "metadata sasl without password", in: "remote.wal.metadata.security.protocol=SASL_PLAINTEXT\nremote.wal.metadata.sasl.username=u\n", wantErr: EnvMetadataSASLPassword},
		{name: "super users without acls", in: "super.users=User:a\n", wantErr: "without kwal.acl.file"},
		{name: "missing acl file", in: "kwal.acl.file=/nonexistent/acls\n", wantErr: "kwal.acl.file"},
		{name: "metadata ssl keys on plaintext", in: "remote.wal.metadata.ssl.truststore.location=/x\n", wantErr: "remote.wal.metadata.security.protocol"},
		{name: "two log dirs", in: "log.dirs=/a,/b\n", wantErr: "exactly one directory"},
		{name: "self not in cluster", in: "broker.id=5\ncluster.brokers=1@h:1#a\n", wantErr: "does not list broker.id=5"},
		{name: "rack disagrees", in: "broker.id=1\nbroker.rack=b\ncluster.brokers=1@h:1#a\n", wantErr: "cluster.brokers says"},
		{name: "duplicate broker", in: "cluster.brokers=1@h:1#a,1@h:2#b\n", wantErr: "listed twice"},
		{name: "bad broker entry", in: "cluster.brokers=h:1\n", wantErr: "id@host:port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := LoadServerProperties(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrConfig) {
					t.Fatalf("err %v, want ErrConfig with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, sc)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ok := func() Config { return Config{LogDir: "/tmp/x", Controller: NewMemController(nil, 0)} }
	cases := []struct {
		name    string
		mod     func(c *Config)
		wantErr string
	}{
		{name: "defaults", mod: func(c *Config) {}},
		{name: "negative id", mod: func(c *Config) { c.BrokerID = -1 }, wantErr: "broker.id"},
		{name: "no log dir", mod: func(c *Config) { c.LogDir = "" }, wantErr: "log.dirs"},
		{name: "no controller", mod: func(c *Config) { c.Controller = nil }, wantErr: "Controller"},
		{name: "bad listener", mod: func(c *Config) { c.Listener = "nope" }, wantErr: "listeners"},
		{name: "zero-ish min isr", mod: func(c *Config) { c.MinInsyncReplicas = -2 }, wantErr: "min.insync.replicas"},
		{name: "tiny socket max", mod: func(c *Config) { c.SocketRequestMaxBytes = 10 }, wantErr: "socket.request.max.bytes"},
		{name: "negative lag", mod: func(c *Config) { c.ReplicaLagTimeMax = -time.Second }, wantErr: "replica.lag.time.max.ms"},
		{name: "negative queue", mod: func(c *Config) { c.RemoteWAL.CombinerQueueSize = -1 }, wantErr: "combiner.queue.size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.mod(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want ErrConfig naming %q", err, tc.wantErr)
			}
		})
	}
}

func TestAssignReplicasRackAware(t *testing.T) {
	brokers := []BrokerInfo{{ID: 3, Rack: "az1"}, {ID: 1, Rack: "az1"}, {ID: 2, Rack: "az2"}, {ID: 4, Rack: "az2"}}
	a, err := AssignReplicas("topic", 8, 2, brokers)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := AssignReplicas("topic", 8, 2, []BrokerInfo{brokers[2], brokers[0], brokers[3], brokers[1]})
	rack := map[int32]string{1: "az1", 2: "az2", 3: "az1", 4: "az2"}
	leaders := map[int32]int{}
	for i, ps := range a {
		if rack[ps.Replicas[0]] == rack[ps.Replicas[1]] {
			t.Errorf("partition %d: both replicas in %s", i, rack[ps.Replicas[0]])
		}
		if ps.Leader != ps.Replicas[0] || len(ps.ISR) != 2 {
			t.Errorf("partition %d: %+v", i, ps)
		}
		if ps.Leader != b[i].Leader || ps.Replicas[1] != b[i].Replicas[1] {
			t.Errorf("partition %d: assignment depends on broker order", i)
		}
		leaders[ps.Leader]++
	}
	for id, n := range leaders {
		if n != 2 {
			t.Errorf("broker %d leads %d partitions, want 2", id, n)
		}
	}
	if _, err := AssignReplicas("t", 1, 5, brokers); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Errorf("rf 5 of 4 brokers: %v", err)
	}
}

// The broker configs docker-compose.yml mounts load cleanly.
func TestDeployPropertiesLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "deploy", "broker-*.properties"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no deploy/broker-*.properties: %v", err)
	}
	compose, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := LoadServerProperties(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !sc.Broker.RemoteWAL.SystemEnable || sc.Broker.RemoteWAL.MetadataBootstrapServers == "" || len(sc.Cluster) != 3 {
			t.Fatalf("%s: remote WAL not wired to shared parts: %+v", f, sc.Broker.RemoteWAL)
		}
		if strings.Contains(sc.Broker.RemoteWAL.StorageURL, "key=") {
			t.Fatalf("%s: credentials in remote.wal.storage.url", f)
		}
		// The EXTERNAL listener is advertised as localhost on a port the
		// compose file publishes to the same container port, and the
		// INTERNAL one as the address cluster.brokers lists.
		cfg := sc.Broker
		cfg.Controller = NewMemController(sc.Cluster, 0)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ext, ok := cfg.listenerConfig("EXTERNAL")
		host, port, _ := net.SplitHostPort(ext.Advertised)
		_, bindPort, _ := net.SplitHostPort(ext.Addr)
		if !ok || host != "localhost" || port != bindPort || !strings.Contains(string(compose), fmt.Sprintf(`ports: ["%s:%s"]`, port, port)) {
			t.Fatalf("%s: EXTERNAL listener %+v not advertised as a published localhost port", f, ext)
		}
		in, _ := cfg.listenerConfig(cfg.InterBrokerListenerName)
		for _, b := range sc.Cluster {
			if b.ID == cfg.BrokerID && b.Addr() != in.Advertised {
				t.Fatalf("%s: inter-broker listener advertised %s, cluster.brokers says %s", f, in.Advertised, b.Addr())
			}
		}
	}
}

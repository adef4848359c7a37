package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Each bad server.properties is refused before anything starts, with an
// error that names the key, the value and (for ranges) the allowed range.
// The first 11 are the accepted-but-bad configs of issue 15 that need no
// network; log dirs and stores follow in their own tests.
func TestBadServerConfigsRefused(t *testing.T) {
	cases := []struct {
		name, props string
		want        []string // substrings of the error
	}{
		{"segment bytes 0", "log.segment.bytes=0", []string{"log.segment.bytes=0", "[14, 2147483647]"}},
		{"segment bytes 1", "log.segment.bytes=1", []string{"log.segment.bytes=1", "[14,"}},
		{"min isr 0", "min.insync.replicas=0", []string{"min.insync.replicas=0", "[1,"}},
		{"min isr above rf", "min.insync.replicas=2", []string{"min.insync.replicas=2", "default.replication.factor=1"}},
		{"min isr above rf of a cluster", "broker.id=1\ncluster.brokers=1@h:1,2@h:2,3@h:3\ndefault.replication.factor=2\nmin.insync.replicas=3", []string{"min.insync.replicas=3", "default.replication.factor=2"}},
		{"rf 0", "default.replication.factor=0", []string{"default.replication.factor=0", "[1, 32767]"}},
		{"rf above the cluster", "default.replication.factor=3", []string{"default.replication.factor=3", "1 broker"}},
		{"thread pool 10^7", "remote.wal.log.manager.thread.pool.size=10000000", []string{"remote.wal.log.manager.thread.pool.size=10000000", "[1, 1024]"}},
		{"combiner interval 10^12 ms", "remote.wal.log.manager.combiner.task.interval.ms=1000000000000", []string{"combiner.task.interval.ms=1000000000000", "[1, 60000]"}},
		{"combiner threads 0", "remote.wal.log.manager.combiner.thread.pool.size=0", []string{"combiner.thread.pool.size=0", "[1, 1024]"}},
		{"combiner queue huge", "remote.wal.log.manager.combiner.queue.size=100000000", []string{"combiner.queue.size=100000000"}},
		{"upload bytes above one PUT", "remote.wal.log.manager.combiner.task.upload.bytes=6000000000", []string{"upload.bytes=6000000000", "5 GiB"}},
		{"partitions 0", "num.partitions=0", []string{"num.partitions=0"}},
		{"partitions above the cap", "num.partitions=100000", []string{"num.partitions=100000", "[1, 4096]"}},
		{"negative broker id", "broker.id=-3", []string{"broker.id=-3"}},
		{"flush 0", "flush.messages=0", []string{"flush.messages=0"}},
		{"lag 0", "replica.lag.time.max.ms=0", []string{"replica.lag.time.max.ms=0"}},
		{"fetch wait above lag", "replica.lag.time.max.ms=1000\nreplica.fetch.wait.max.ms=5000", []string{"replica.fetch.wait.max.ms=5000", "replica.lag.time.max.ms=1000"}},
		{"fetch wait 0 is not silently 500", "replica.fetch.wait.max.ms=0", []string{"replica.fetch.wait.max.ms=0"}},
		{"socket max tiny", "socket.request.max.bytes=10", []string{"socket.request.max.bytes=10"}},
		{"max connections 0", "max.connections=0", []string{"max.connections=0"}},
		{"per ip 0", "max.connections.per.ip=0", []string{"max.connections.per.ip=0"}},
		{"override host name", "max.connections.per.ip.overrides=localhost:5", []string{"max.connections.per.ip.overrides", "not an IP address"}},
		{"override negative", "max.connections.per.ip.overrides=127.0.0.1:-1", []string{"max.connections.per.ip.overrides", ">= 0"}},
		{"idle 0", "connections.max.idle.ms=0", []string{"connections.max.idle.ms=0"}},
		{"read timeout a year", "kwal.socket.request.read.timeout.ms=31536000000", []string{"kwal.socket.request.read.timeout.ms=31536000000", "[1, 3600000]"}},
		{"buffered tiny", "kwal.connection.max.buffered.bytes=100", []string{"kwal.connection.max.buffered.bytes=100"}},
		{"uncompressed bound tiny", "kwal.batch.max.uncompressed.bytes=10", []string{"kwal.batch.max.uncompressed.bytes=10"}},
		{"store check 0", "remote.wal.storage.check.timeout.ms=0", []string{"remote.wal.storage.check.timeout.ms=0"}},
		{"bootstrap timeout an hour", "remote.wal.metadata.bootstrap.timeout.ms=3600000", []string{"remote.wal.metadata.bootstrap.timeout.ms=3600000", "[1, 600000]"}},
		{"retention 0", "remote.wal.retention.ms=0", []string{"remote.wal.retention.ms=0"}},
		{"not a number", "remote.wal.log.manager.thread.pool.size=four", []string{"remote.wal.log.manager.thread.pool.size=\"four\"", "not an integer", "[1, 1024]"}},
		{"unknown key", "log.retention.hourz=3", []string{"log.retention.hourz", "--keys"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := LoadServerProperties(strings.NewReader(tc.props + "\n"))
			if err == nil {
				c := sc.Broker
				err = c.CheckSettings()
			}
			if err == nil {
				t.Fatalf("accepted")
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("%v does not wrap ErrConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// The good edges pass.
	for _, props := range []string{
		"log.segment.bytes=14", "min.insync.replicas=1", "remote.wal.log.manager.thread.pool.size=1024",
		"remote.wal.log.manager.combiner.task.interval.ms=60000", "broker.id=1\ncluster.brokers=1@h:1,2@h:2\ndefault.replication.factor=2\nmin.insync.replicas=2",
		"max.connections.per.ip.overrides=127.0.0.1:0,[::1]:7",
	} {
		sc, err := LoadServerProperties(strings.NewReader(props + "\n"))
		if err == nil {
			err = sc.Broker.CheckSettings()
		}
		if err != nil {
			t.Errorf("%q refused: %v", props, err)
		}
	}
}

// Every key `kwal broker --keys` lists has a default and a range or a note.
func TestEveryServerKeyDocumented(t *testing.T) {
	for _, d := range ServerKeyDocs() {
		if d.Default == "" || d.Hint == "" {
			t.Errorf("%s: default %q, note %q", d.Key, d.Default, d.Hint)
		}
	}
	for k := range serverKeyRanges {
		if _, ok := serverKeys[k]; !ok {
			t.Errorf("range for unknown key %s", k)
		}
	}
}

// log.dirs naming a file or a place that cannot be written is refused at
// start, by writing a file there.
func TestLogDirChecked(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "below"), "/proc/kwal-cannot-be-here"} {
		err := CheckLogDir(dir)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "log.dirs=\""+dir+"\"") {
			t.Errorf("CheckLogDir(%s) = %v", dir, err)
		}
		_, err = New(Config{LogDir: dir, Listener: "127.0.0.1:0", Controller: NewMemController(nil, 1), Logger: quietLogger()})
		if err == nil || !strings.Contains(err.Error(), "log.dirs") {
			t.Errorf("New with log.dirs=%s: %v", dir, err)
		}
	}
	fresh := filepath.Join(t.TempDir(), "new", "dir")
	if err := CheckLogDir(fresh); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(fresh); len(ents) != 0 {
		t.Fatalf("probe left behind: %v", ents)
	}
}

// Topic configs at CreateTopics: out of range, contradicting the
// replication factor, or unknown is INVALID_CONFIG with a message naming
// the key; nothing is created.
func TestCreateTopicsBadConfigs(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cases := []struct{ key, value string }{
		{"segment.bytes", "1"},
		{"segment.bytes", "99999999999"},
		{"min.insync.replicas", "0"},
		{"min.insync.replicas", "2"}, // replication factor 1
		{"retention.ms", "-2"},
		{"remote.wal.storage.enable", "maybe"},
		{"cleanup.policy", "shred"},
		{"no.such.config", "1"},
	}
	for i, tc := range cases {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = "bad-" + strings.ReplaceAll(tc.key, ".", "-") + "-" + string(rune('a'+i))
		rt.NumPartitions, rt.ReplicationFactor = 1, 1
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = tc.key, &tc.value
		rt.Configs = append(rt.Configs, cfg)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		st := resp.Topics[0]
		if st.ErrorCode != kerr.InvalidConfig.Code || st.ErrorMessage == nil || !strings.Contains(*st.ErrorMessage, tc.key) {
			t.Errorf("%s=%s: error %v message %v", tc.key, tc.value, kerr.ErrorForCode(st.ErrorCode), st.ErrorMessage)
		}
		if _, ok := c.ctrl.Topic(rt.Topic); ok {
			t.Errorf("%s=%s: topic created", tc.key, tc.value)
		}
	}
}

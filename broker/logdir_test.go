package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/faultfs"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/objstore/ledger"
)

// lineCount counts log records by level and message.
type lineCount struct {
	mu    sync.Mutex
	lines map[string]int
	next  slog.Handler
}

func (c *lineCount) Enabled(context.Context, slog.Level) bool { return true }
func (c *lineCount) Handle(ctx context.Context, r slog.Record) error {
	c.mu.Lock()
	if c.lines == nil {
		c.lines = map[string]int{}
	}
	c.lines[r.Level.String()+" "+r.Message]++
	c.mu.Unlock()
	if c.next != nil && c.next.Enabled(ctx, r.Level) {
		return c.next.Handle(ctx, r)
	}
	return nil
}
func (c *lineCount) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *lineCount) WithGroup(string) slog.Handler      { return c }

func (c *lineCount) withPrefix(p string) (n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.lines {
		if strings.HasPrefix(k, p) {
			n += v
		}
	}
	return n
}

// TestUnusableLogDirRefusesStart: restarted onto a log dir whose
// partition directories cannot be written (a read-only mount), the broker
// does not start: the error names the directory and what to do, and it
// never listens.
func TestUnusableLogDirRefusesStart(t *testing.T) {
	dir := t.TempDir()
	part := filepath.Join(dir, "orders-0")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	rofs := faultfs.NewReadOnlyFS(part)
	rofs.SetBroken(true)
	_, err := New(Config{
		BrokerID: 1, Listener: "127.0.0.1:0", LogDir: dir, LogFS: rofs,
		Controller: NewMemController(nil, 1000), Ledger: ledger.New(), Logger: quietLogger(),
	})
	if err == nil {
		t.Fatal("started on a log dir whose partition directory is read-only")
	}
	for _, want := range []string{dir, part, "read-only file system", "does not start", "remount"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if !errors.Is(err, ErrConfig) {
		t.Errorf("error is not ErrConfig: %v", err)
	}
	// The same directory, writable, starts.
	rofs.SetBroken(false)
	b, err := New(Config{
		BrokerID: 1, Listener: "127.0.0.1:0", LogDir: dir, LogFS: rofs,
		Controller: NewMemController(nil, 1000), Ledger: ledger.New(), Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// TestLogDirFailsAtRunTime: the log dir turns read-only under a running
// broker. The append that meets it and every later one answer
// KAFKA_STORAGE_ERROR, so do fetches; Metadata lists the broker as an
// offline replica; /metrics says kwal_log_dir_offline 1; and one ERROR
// line says so, however many requests follow.
func TestLogDirFailsAtRunTime(t *testing.T) {
	lines := &lineCount{}
	var rofs *faultfs.ReadOnlyFS
	c := startCluster(t, []string{"az1"}, func(cfg *Config) {
		rofs = faultfs.NewReadOnlyFS(cfg.LogDir)
		cfg.LogFS = rofs
		cfg.Logger = slog.New(lines)
	})
	b := c.brokers[0]
	maddr, err := b.ServeMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const topic = "disk"
	createTopic(t, cl, topic, 2, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce := func(p int32) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr()
	}
	for p := range int32(2) {
		if err := produce(p); err != nil {
			t.Fatal(err)
		}
	}
	if b.dir.offline() {
		t.Fatal("offline before any fault")
	}
	rofs.SetBroken(true)
	for i := range 20 {
		if err := produce(int32(i % 2)); !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("produce %d with the log dir read-only: %v, want KAFKA_STORAGE_ERROR", i, err)
		}
	}
	// Even once the disk answers again, the dir stays offline until a
	// restart (as in Kafka): a log that failed mid-write is not trusted.
	rofs.SetBroken(false)
	if err := produce(0); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce after the fault cleared: %v, want KAFKA_STORAGE_ERROR", err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = 11, -1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	ts, _ := b.ctrl.Topic(topic)
	rt.Topic, rt.TopicID = topic, ts.ID // kgo sends v13+: by id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = 0, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	fresp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if code := fresp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	md, err := brokerMetadataReq(ctx, cl, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, pd := range md.Topics[0].Partitions {
		if len(pd.OfflineReplicas) != 1 || pd.OfflineReplicas[0] != 1 {
			t.Fatalf("partition %d: offline replicas %v, want [1]", pd.Partition, pd.OfflineReplicas)
		}
	}
	resp, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `kwal_log_dir_offline{log_dir="`+b.LogDir()+`"} 1`) {
		t.Fatalf("/metrics does not show the log dir offline:\n%s", grepLines(string(body), "log_dir"))
	}
	if n := lines.withPrefix("ERROR log dir offline"); n != 1 {
		t.Fatalf("%d 'log dir offline' ERROR lines, want 1", n)
	}
	// Besides it, at most kafkalog's own line for each of the two logs
	// whose write failed; nothing per request.
	if n := lines.withPrefix("ERROR"); n > 3 {
		t.Fatalf("%d ERROR lines in all after 21 refused produces: %v", n, lines.lines)
	}
}

func brokerMetadataReq(ctx context.Context, cl *kgo.Client, topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	return req.RequestWith(ctx, cl.Broker(1))
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestHighWatermarkOnAFailedDisk: a disk that refuses writes fails the
// high-watermark checkpoint at every advance after it (chaos seed 538: a
// disk-full follower logged one ERROR per fetch, a log flood). The first
// failure takes the log dir offline through the log-dir health, which
// logs it once; no advance returns an error to log again, and the high
// watermark still moves in memory.
func TestHighWatermarkOnAFailedDisk(t *testing.T) {
	dir := t.TempDir()
	rofs := faultfs.NewReadOnlyFS(dir)
	l, err := kafkalog.Open(filepath.Join(dir, "t-0"), kafkalog.Config{FS: rofs, HighWatermarkCheckpointMs: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := range 10 {
		if _, err := l.AppendAsFollower(kafkalogtest.MakeBatchN(int64(i), 0, 1, 8, 1)); err != nil {
			t.Fatal(err)
		}
	}
	var offline bool
	var calls int
	p := &partition{tp: TopicPartition{Topic: "t", Partition: 0}, log: l, logger: slog.New(slog.DiscardHandler),
		storage: func(what string, err error) bool {
			if err != nil {
				calls++
				offline = offline || isStorageError(err)
			}
			return offline
		}}
	if moved, err := p.setFollowerHW(2); !moved || err != nil {
		t.Fatalf("healthy disk: moved %v, err %v", moved, err)
	}
	rofs.SetBroken(true)
	// The checkpoint fails; the log itself is still writable in memory.
	for hw := int64(3); hw <= 5; hw++ {
		moved, err := p.setFollowerHW(hw)
		if err != nil {
			t.Fatalf("hw %d on the failed disk: %v returned, want it handed to the log-dir health only", hw, err)
		}
		if !moved || l.HighWatermark() != hw {
			t.Fatalf("hw %d: moved %v, high watermark %d", hw, moved, l.HighWatermark())
		}
	}
	if !offline || calls == 0 {
		t.Fatalf("log-dir health offline %v after %d errors, want offline", offline, calls)
	}
	if moved, err := p.setFollowerHW(5); moved || err != nil {
		t.Fatalf("same hw again: moved %v, err %v", moved, err)
	}
	// An append fails: the log refuses every write from then on, and
	// each advance the leader sends fails again (the flood).
	if _, err := l.AppendAsFollower(kafkalogtest.MakeBatchN(10, 0, 1, 8, 1)); err == nil {
		t.Fatal("append on the failed disk succeeded")
	}
	for hw := int64(6); hw <= 10; hw++ {
		if moved, err := p.setFollowerHW(hw); moved || err != nil {
			t.Fatalf("hw %d on the failed log: moved %v, err %v; want neither", hw, moved, err)
		}
	}
}

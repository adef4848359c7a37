package broker

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeUploader is a Replicator for remotewal topics whose leader has
// uploaded up to a set offset and does nothing else.
type fakeUploader struct {
	uploaded int64
	known    bool
}

func (*fakeUploader) StartLeader(TopicPartition, *kafkalog.Log, int32, int64) error { return nil }
func (*fakeUploader) StopLeader(TopicPartition)                                     {}
func (*fakeUploader) StartFollower(FollowerReplica) error                           { return nil }
func (*fakeUploader) StopFollower(TopicPartition)                                   {}
func (f *fakeUploader) UploadedOffset(TopicPartition) (int64, bool) {
	return f.uploaded, f.known
}

var _ UploadedOffsetReporter = (*fakeUploader)(nil)

// The retention check runs on the broker's clock every
// log.retention.check.interval.ms and deletes whole expired segments
// (never the active one, never past the remote-WAL upload); Fetch below
// the new log start is OFFSET_OUT_OF_RANGE and ListOffsets EARLIEST is
// the log start.
func TestRetentionCheck(t *testing.T) {
	clk := clock.NewManual(time.Now())
	passes := make(chan struct{}, 16)
	up := &fakeUploader{}
	c := startCluster(t, []string{"az1"}, func(cfg *Config) {
		cfg.Clock = clk
		cfg.RetentionCheckInterval = time.Minute
		cfg.RemoteWAL.SystemEnable = true
		cfg.Replicator = up
		cfg.Logger = testLogger(t, slog.LevelInfo)
		cfg.afterRetention = func() { passes <- struct{}{} }
	})
	br := c.brokers[0]
	cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	createTopic(t, cl, "by-time", 1, 1, map[string]string{"segment.bytes": "1024", "retention.ms": "3600000"})
	createTopic(t, cl, "by-size", 1, 1, map[string]string{"segment.bytes": "1024", "retention.ms": "-1", "retention.bytes": "3000"})
	createTopic(t, cl, "remote", 1, 1, map[string]string{"segment.bytes": "1024", "retention.ms": "3600000", TopicConfigRemoteWAL: "true"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, topic := range []string{"by-time", "by-size", "remote"} {
		for i := 0; i < 60; i++ {
			r := &kgo.Record{Topic: topic, Value: make([]byte, 100)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", topic, err)
			}
		}
	}
	logOf := func(topic string) *kafkalog.Log {
		l, ok := br.PartitionLog(TopicPartition{Topic: topic})
		if !ok {
			t.Fatalf("no log for %s", topic)
		}
		return l
	}
	pass := func(d time.Duration) { t.Helper(); advanceUntilPass(t, ctx, clk, d, passes, "retention") }

	// Within retention.ms: the by-time and remote logs keep everything;
	// the by-size log drops its oldest segments while what stays is at
	// least retention.bytes (Kafka's rule).
	pass(time.Minute)
	if s := logOf("by-time").LogStartOffset(); s != 0 {
		t.Fatalf("by-time: log start %d within retention", s)
	}
	var size int64
	segs := logOf("by-size").Segments()
	for _, s := range segs {
		size += s.Size
	}
	if logOf("by-size").LogStartOffset() == 0 || size < 3000 || size-segs[0].Size >= 3000 {
		t.Fatalf("by-size: log start %d, %d bytes in %d segments, want the fewest segments holding 3000 bytes",
			logOf("by-size").LogStartOffset(), size, len(segs))
	}

	// Past retention.ms: all but the active segment go, except where the
	// remote-WAL leader has not uploaded: there the pass waits.
	pass(2 * time.Hour)
	l := logOf("by-time")
	if n := len(l.Segments()); n != 1 || l.LogStartOffset() != l.Segments()[0].BaseOffset || l.LogStartOffset() == 0 {
		t.Fatalf("by-time: %d segments, log start %d", n, l.LogStartOffset())
	}
	if s := logOf("remote").LogStartOffset(); s != 0 {
		t.Fatalf("remote: log start %d, but the replicator knows no upload", s)
	}
	up.known, up.uploaded = true, logOf("remote").Segments()[2].BaseOffset
	pass(time.Minute)
	if s := logOf("remote").LogStartOffset(); s != up.uploaded {
		t.Fatalf("remote: log start %d, want the upload bound %d", s, up.uploaded)
	}

	if n := br.events.retentionSegments.Load(); n == 0 {
		t.Fatal("kwal_retention_deleted_segments_total did not count the deletions")
	}

	// Clients see the new log start.
	start := l.LogStartOffset()
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "by-time"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -2
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	loResp, err := lo.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := loResp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.Offset != start {
		t.Fatalf("ListOffsets EARLIEST: %+v, want %d", got, start)
	}
	fetchAt := func(offset int64) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.Version = -1, 1<<20, 11
		ft := kmsg.NewFetchRequestTopic()
		ts, _ := c.ctrl.Topic("by-time")
		ft.Topic, ft.TopicID = "by-time", ts.ID // the client sends v13+: by id
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = offset, 1<<20, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctx, cl.Broker(int(br.cfg.BrokerID)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if got := fetchAt(start - 1); got.ErrorCode != kerr.OffsetOutOfRange.Code || got.LogStartOffset != start {
		t.Fatalf("fetch below log start: error %d log start %d", got.ErrorCode, got.LogStartOffset)
	}
	if got := fetchAt(start); got.ErrorCode != 0 || len(got.RecordBatches) == 0 {
		t.Fatalf("fetch at log start: error %d, %d bytes", got.ErrorCode, len(got.RecordBatches))
	}
	desc := describeTopicConfig(t, ctx, cl, "by-size")
	if desc["retention.bytes"] != "3000" {
		t.Fatalf("DescribeConfigs retention.bytes %q", desc["retention.bytes"])
	}
}

// advanceUntilPass moves the manual clock by d and waits for the periodic
// task (what) to report a pass on passes.
func advanceUntilPass(t *testing.T, ctx context.Context, clk *clock.Manual, d time.Duration, passes <-chan struct{}, what string) {
	t.Helper()
	clk.Advance(d)
	select {
	case <-passes:
	case <-ctx.Done():
		t.Fatalf("no %s pass after the clock moved %v", what, d)
	}
}

func describeTopicConfig(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		if c.Value != nil {
			out[c.Name] = *c.Value
		}
	}
	return out
}

func TestRetentionProperties(t *testing.T) {
	for _, tc := range []struct {
		props   string
		wantMs  int64
		wantErr bool
	}{
		{"", kafkalog.DefaultRetentionMs, false},
		{"log.retention.hours=2", 2 * 3600_000, false},
		{"log.retention.hours=2\nlog.retention.minutes=3", 3 * 60_000, false},
		{"log.retention.minutes=3\nlog.retention.ms=5", 5, false},
		{"log.retention.ms=-1\nlog.retention.hours=1", -1, false},
		{"log.retention.ms=0", 1, false},
		{"log.retention.ms=-2", 0, true},
		{"log.retention.hours=9223372036854775807", 0, true},
		{"log.retention.bytes=0", 0, true},
		{"log.retention.check.interval.ms=0", 0, true},
	} {
		sc, err := LoadServerProperties(strings.NewReader(tc.props + "\nlog.dirs=/tmp/x\n"))
		if tc.wantErr {
			if err == nil {
				t.Errorf("%q: no error", tc.props)
			}
			continue
		}
		if err == nil {
			sc.Broker.Controller = NewMemController(nil, 0)
			err = sc.Broker.Validate()
		}
		if err != nil {
			t.Errorf("%q: %v", tc.props, err)
			continue
		}
		if sc.Broker.RetentionMs != tc.wantMs {
			t.Errorf("%q: retention %d ms, want %d", tc.props, sc.Broker.RetentionMs, tc.wantMs)
		}
	}
	sc, err := LoadServerProperties(strings.NewReader("log.dirs=/x\nlog.retention.bytes=77\nlog.retention.check.interval.ms=1500\nkwal.producer.state.rebuild.enable=false\n" +
		"producer.id.expiration.ms=5000\nproducer.id.expiration.check.interval.ms=700\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b := sc.Broker; b.ProducerIDExpiration != 5*time.Second || b.ProducerIDExpirationCheckInterval != 700*time.Millisecond {
		t.Fatalf("producer expiration %v, check every %v", b.ProducerIDExpiration, b.ProducerIDExpirationCheckInterval)
	}
	if b := sc.Broker; b.RetentionBytes != 77 || b.RetentionCheckInterval != 1500*time.Millisecond || !b.ProducerStateRebuildDisabled {
		t.Fatalf("parsed bytes %d interval %v rebuild disabled %v", b.RetentionBytes, b.RetentionCheckInterval, b.ProducerStateRebuildDisabled)
	}
}

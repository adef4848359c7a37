package broker

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func adminCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// produceTo produces values (acks=all) to topic, partition by the
// manual partitioner, and fails on any error.
func produceTo(t *testing.T, cl *kgo.Client, topic string, partition int32, vals ...[]byte) {
	t.Helper()
	var recs []*kgo.Record
	for _, v := range vals {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: v})
	}
	if err := cl.ProduceSync(adminCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s/%d: %v", topic, partition, err)
	}
}

// consumeAll reads n records of topic from the start of every partition.
func consumeAll(t *testing.T, c *testCluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := adminCtx(t)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records of %s: %v", len(out), n, topic, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// Delete a topic with kadm while it has data on every replica: the
// controller forgets it, every broker drops its replicas and removes the
// log directories; deleting it again or by an unknown id is refused with
// Kafka's codes; a topic created again under the name starts empty at
// offset 0 and its consumers see only its own records.
func TestAdminDeleteAndRecreateTopic(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, func(cfg *Config) { cfg.DisableAutoCreateTopics = true })
	cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	const topic = "doomed"
	createTopic(t, cl, topic, 2, 3, nil)
	old, _ := c.ctrl.Topic(topic)
	for p := int32(0); p < 2; p++ {
		for i := range 20 {
			produceTo(t, cl, topic, p, []byte("old-"+string(value(i))))
		}
	}
	dirs := func() []string {
		var out []string
		for _, b := range c.brokers {
			m, _ := filepath.Glob(filepath.Join(b.LogDir(), topic+"-*"))
			out = append(out, m...)
		}
		return out
	}
	if n := len(dirs()); n != 6 {
		t.Fatalf("%d partition directories before the delete, want 6 (2 partitions x RF 3): %v", n, dirs())
	}

	resp, err := adm.DeleteTopics(adminCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp[topic].Err; err != nil {
		t.Fatalf("delete %s: %v", topic, err)
	}
	if _, ok := c.ctrl.Topic(topic); ok {
		t.Fatal("the controller still has the topic")
	}
	for _, b := range c.brokers {
		for p := int32(0); p < 2; p++ {
			if _, ok := b.PartitionLog(TopicPartition{Topic: topic, Partition: p}); ok {
				t.Errorf("broker %d still has a replica of %s/%d", b.info.ID, topic, p)
			}
		}
	}
	if d := dirs(); len(d) != 0 {
		t.Fatalf("log directories left after the delete: %v", d)
	}

	// Again: UNKNOWN_TOPIC_OR_PARTITION; by an id no topic has (v6):
	// UNKNOWN_TOPIC_ID.
	resp, err = adm.DeleteTopics(adminCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(resp[topic].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("second delete: %v, want UNKNOWN_TOPIC_OR_PARTITION", resp[topic].Err)
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.TopicID = old.ID
	req.Topics = append(req.Topics, rt)
	kr, err := req.RequestWith(adminCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(kr.Topics) != 1 || kr.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("delete by the deleted topic's id: %+v, want UNKNOWN_TOPIC_ID", kr.Topics)
	}

	resp, err = adm.DeleteTopics(adminCtx(t), OffsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(resp[OffsetsTopic].Err, kerr.InvalidRequest) {
		t.Fatalf("delete %s: %v, want INVALID_REQUEST", OffsetsTopic, resp[OffsetsTopic].Err)
	}

	createTopic(t, cl, topic, 2, 3, nil)
	fresh, _ := c.ctrl.Topic(topic)
	if fresh.ID == old.ID || fresh.ID.IsZero() {
		t.Fatalf("the new topic has id %s, the deleted one had %s", fresh.ID, old.ID)
	}
	for _, b := range c.brokers {
		for p := int32(0); p < 2; p++ {
			st, ok := b.PartitionStatus(TopicPartition{Topic: topic, Partition: p})
			if !ok || st.LogStart != 0 || st.LogEnd != 0 {
				t.Fatalf("broker %d %s/%d after re-creation: %+v (present %v), want an empty log at 0", b.info.ID, topic, p, st, ok)
			}
		}
	}
	// franz-go, seeing the topic id change in Metadata v10+, fails what it
	// buffers for the old incarnation with UNKNOWN_TOPIC_ID (as against
	// Kafka 3.9): a new client produces to the new one.
	cl2 := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		produceTo(t, cl2, topic, 0, []byte("new-"+string(value(i))))
	}
	recs := consumeAll(t, c, topic, 10)
	for i, r := range recs {
		if !bytes.HasPrefix(r.Value, []byte("new-")) || r.Offset != int64(i) || r.Partition != 0 {
			t.Fatalf("record %d of the new topic: partition %d offset %d %q", i, r.Partition, r.Offset, r.Value)
		}
	}

	// By id (v6), the new incarnation.
	rt.TopicID = fresh.ID
	req.Topics = []kmsg.DeleteTopicsRequestTopic{rt}
	if kr, err = req.RequestWith(adminCtx(t), cl); err != nil {
		t.Fatal(err)
	}
	if len(kr.Topics) != 1 || kr.Topics[0].ErrorCode != 0 || kr.Topics[0].Topic == nil || *kr.Topics[0].Topic != topic {
		t.Fatalf("delete by id: %+v", kr.Topics)
	}
	if d := dirs(); len(d) != 0 {
		t.Fatalf("log directories left after the delete by id: %v", d)
	}
}

// A broker that missed a deletion (its partition directory belongs to the
// old incarnation) removes that directory before the new incarnation's
// log opens, so the new topic still starts at 0.
func TestClaimPartitionDirRemovesOldIncarnation(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	b := c.brokers[0]
	dir := filepath.Join(t.TempDir(), "t-0")
	oldID, newID := newTopicID(), newTopicID()
	if err := b.claimPartitionDir(dir, oldID); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), []byte("old bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.claimPartitionDir(dir, oldID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000000.log")); err != nil {
		t.Fatalf("the same incarnation lost its segment: %v", err)
	}
	if err := b.claimPartitionDir(dir, newID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000000.log")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old incarnation's segment survived: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, partitionMetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := parsePartitionMetadata(data); err != nil || got != newID {
		t.Fatalf("partition.metadata names %s (%v), want %s", got, err, newID)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "*"+deletedDirSuffix))
	if len(left) != 0 {
		t.Fatalf("renamed directories left: %v", left)
	}
}

// CreatePartitions grows a topic (kadm UpdatePartitions); the new
// partitions take produce and fetch; shrinking or keeping the count is
// INVALID_PARTITIONS.
func TestAdminCreatePartitions(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, nil)
	cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	const topic = "growing"
	createTopic(t, cl, topic, 1, 2, nil)
	resp, err := adm.UpdatePartitions(adminCtx(t), 3, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp[topic].Err; err != nil {
		t.Fatalf("grow to 3: %v", err)
	}
	ts, _ := c.ctrl.Topic(topic)
	if len(ts.Partitions) != 3 || len(ts.Partitions[2].Replicas) != 2 {
		t.Fatalf("after growing: %+v", ts.Partitions)
	}
	waitFor(t, "metadata showing 3 partitions", 10*time.Second, func() bool {
		td, err := adm.ListTopics(adminCtx(t), topic)
		return err == nil && len(td[topic].Partitions) == 3
	}, c.sources()...)
	produceTo(t, cl, topic, 2, value(1), value(2))
	recs := consumeAll(t, c, topic, 2)
	if recs[0].Partition != 2 || recs[1].Offset != 1 {
		t.Fatalf("records of the new partition: %+v", recs)
	}
	for _, n := range []int{3, 2} {
		resp, err = adm.UpdatePartitions(adminCtx(t), n, topic)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(resp[topic].Err, kerr.InvalidPartitions) || !strings.Contains(resp[topic].ErrMessage, "only grow") {
			t.Fatalf("set %d partitions: %v %q, want INVALID_PARTITIONS", n, resp[topic].Err, resp[topic].ErrMessage)
		}
	}
	resp, err = adm.UpdatePartitions(adminCtx(t), 2, "no-such-topic")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(resp["no-such-topic"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", resp["no-such-topic"].Err)
	}
}

// IncrementalAlterConfigs and AlterConfigs reach open partitions: a
// smaller segment.bytes rolls segments on every replica, and
// min.insync.replicas above the ISR refuses acks=all produces until the
// key is deleted again. Unknown keys and bad values are INVALID_CONFIG
// naming the key; DescribeConfigs reports the sources.
func TestAdminAlterTopicConfigs(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, nil)
	cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(1), kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	const topic = "tuned"
	createTopic(t, cl, topic, 1, 3, nil)
	tp := TopicPartition{Topic: topic, Partition: 0}

	set := func(k, v string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v} }
	alter := func(cfgs ...kadm.AlterConfig) error {
		t.Helper()
		r, err := adm.AlterTopicConfigs(adminCtx(t), cfgs, topic)
		if err != nil {
			t.Fatal(err)
		}
		if len(r) != 1 {
			t.Fatalf("responses: %+v", r)
		}
		if r[0].Err != nil {
			return errors.Join(r[0].Err, errors.New(r[0].ErrMessage))
		}
		return nil
	}
	if err := alter(set("segment.bytes", "1024")); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		produceTo(t, cl, topic, 0, bytes.Repeat([]byte{byte(i)}, 200))
	}
	for _, b := range c.brokers {
		waitFor(t, "replica caught up", 10*time.Second, func() bool {
			st, _ := b.PartitionStatus(tp)
			return st.LogEnd == 40
		}, c.sources()...)
		l, _ := b.PartitionLog(tp)
		if n := len(l.Segments()); n < 10 {
			t.Errorf("broker %d: %d segments after 40 x 200 B with segment.bytes=1024", b.info.ID, n)
		}
	}

	if err := alter(set("min.insync.replicas", "4")); err != nil {
		t.Fatal(err)
	}
	err := cl.ProduceSync(adminCtx(t), &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("produce with min.insync.replicas=4 > ISR 3: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	rc, err := adm.DescribeTopicConfigs(adminCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]kadm.Config{}
	for _, cfg := range rc[0].Configs {
		got[cfg.Key] = cfg
	}
	if v := got["min.insync.replicas"]; v.MaybeValue() != "4" || v.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("described min.insync.replicas: %+v", v)
	}
	if v := got["retention.ms"]; v.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("described retention.ms: %+v", v)
	}
	if err := alter(kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "min.insync.replicas"}); err != nil {
		t.Fatal(err)
	}
	produceTo(t, cl, topic, 0, []byte("after"))

	// Refusals name the key; nothing changes.
	before, _ := c.ctrl.Topic(topic)
	for _, tc := range []struct {
		cfg  kadm.AlterConfig
		want string
	}{
		{set("no.such.config", "1"), "no.such.config"},
		{set("segment.bytes", "ten"), "segment.bytes"},
		{set(TopicConfigRemoteWAL, "true"), TopicConfigRemoteWAL},
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "segment.bytes", Value: new(string)}, "segment.bytes"},
	} {
		err := alter(tc.cfg)
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("alter %s=%v: %v, want INVALID_CONFIG naming %s", tc.cfg.Name, tc.cfg.Value, err, tc.want)
		}
	}
	if after, _ := c.ctrl.Topic(topic); after.Epoch != before.Epoch {
		t.Fatalf("a refused change moved the topic epoch %d -> %d", before.Epoch, after.Epoch)
	}

	// AlterConfigs (non-incremental) replaces the whole set.
	r, err := adm.AlterTopicConfigsState(adminCtx(t), []kadm.AlterConfig{set("retention.ms", "60000")}, topic)
	if err != nil || r[0].Err != nil {
		t.Fatalf("AlterConfigs: %v %+v", err, r)
	}
	ts, _ := c.ctrl.Topic(topic)
	if len(ts.Configs) != 1 || ts.Configs["retention.ms"] != "60000" {
		t.Fatalf("after AlterConfigs: %v, want only retention.ms=60000", ts.Configs)
	}
	r, err = adm.AlterBrokerConfigsState(adminCtx(t), []kadm.AlterConfig{set("log.segment.bytes", "1")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(r) != 1 || !errors.Is(r[0].Err, kerr.InvalidRequest) {
		t.Fatalf("broker config change: %+v, want INVALID_REQUEST", r)
	}
}

// DescribeCluster lists every broker with its rack and the cluster id.
func TestAdminDescribeCluster(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az3"}, func(cfg *Config) { cfg.ClusterID = "kwal-test" })
	cl := newClient(t, c)
	for _, v := range []int16{0, 1} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		req.EndpointType = 1
		resp, err := req.RequestWith(adminCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || resp.ClusterID != "kwal-test" || resp.ControllerID != 1 || len(resp.Brokers) != 3 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		for i, mb := range resp.Brokers {
			want := c.brokers[i].Info()
			if mb.NodeID != want.ID || mb.Port != want.Port || mb.Rack == nil || *mb.Rack != want.Rack {
				t.Fatalf("v%d broker %d: %+v, want %+v", v, i, mb, want)
			}
		}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version, req.EndpointType = 1, 2
	resp, err := req.RequestWith(adminCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("controller endpoints: error %d, want UNSUPPORTED_ENDPOINT_TYPE", resp.ErrorCode)
	}
}

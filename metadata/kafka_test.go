package metadata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/internal/logbuf"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/clock"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startCluster(t testing.TB) *Embedded {
	t.Helper()
	e, err := StartEmbedded(t.TempDir(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func testTopicConfig(e *Embedded) TopicConfig {
	return TopicConfig{Bootstrap: e.Bootstrap(), Partitions: 8}
}

// waitCtx bounds how long a test waits for the cluster; it is a safety net,
// not a timing assertion.
func waitCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startConsumer(t testing.TB, ctx context.Context, cfg ConsumerConfig, logger *slog.Logger) (*Consumer, *State) {
	t.Helper()
	st := NewState()
	c, err := StartConsumer(ctx, cfg, st, clock.Real{}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	select {
	case <-c.Ready():
	case <-ctx.Done():
		t.Fatal("consumer never ready")
	}
	return c, st
}

func newPublisher(t testing.TB, cfg TopicConfig) *Publisher {
	t.Helper()
	p, err := NewPublisher(cfg, clock.Real{}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func bigObject(id byte, partitions int) *ObjectMetadata {
	var entries []SliceEntry
	for p := 0; p < partitions; p++ {
		entries = append(entries, testEntry(fmt.Sprintf("t%d", p%3), int32(p), int64(id)*100, int64(id)*100+99))
	}
	return testObject(id, 0, CopySegmentFinished, entries...)
}

func TestKafkaPublishConsume(t *testing.T) {
	e := startCluster(t)
	ctx := waitCtx(t)
	cfg := testTopicConfig(e)
	pub := newPublisher(t, cfg)
	objs := []*ObjectMetadata{bigObject(1, 20), bigObject(2, 20)}
	for _, o := range objs {
		if err := pub.PublishObject(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := pub.Partitions(ctx); n != 8 {
		t.Fatalf("topic has %d partitions", n)
	}

	// A consumer of everything sees every slice.
	all, stAll := startConsumer(t, ctx, ConsumerConfig{TopicConfig: cfg}, quietLogger())
	if d, ok := all.BootstrapDuration(); !ok || d <= 0 {
		t.Fatalf("bootstrap duration %v %v", d, ok)
	}
	for p := int32(0); p < 20; p++ {
		tp := TopicPartition{Topic: fmt.Sprintf("t%d", p%3), Partition: p}
		if got := sliceOffsets(stAll.Slices(tp, 0)); !reflect.DeepEqual(got, [][2]int64{{100, 199}, {200, 299}}) {
			t.Fatalf("%s: %v", tp, got)
		}
	}
	if got := len(stAll.Objects()); got != 2 {
		t.Fatalf("%d objects", got)
	}

	// A follower of one partition reads one metadata partition and sees
	// later events after CatchUp.
	tp := TopicPartition{Topic: "t1", Partition: 4}
	one, stOne := startConsumer(t, ctx, ConsumerConfig{TopicConfig: cfg, Follow: []TopicPartition{tp}}, quietLogger())
	if mps := one.MetadataPartitions(); !reflect.DeepEqual(mps, []int32{MetadataPartition(tp, 8)}) {
		t.Fatalf("metadata partitions %v", mps)
	}
	changed := stOne.Changed()
	o3 := bigObject(3, 20)
	if err := pub.PublishObject(ctx, o3); err != nil {
		t.Fatal(err)
	}
	if err := one.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	<-changed
	if got := sliceOffsets(stOne.Slices(tp, 250)); !reflect.DeepEqual(got, [][2]int64{{200, 299}, {300, 399}}) {
		t.Fatalf("follower slices %v", got)
	}
	for _, o := range stOne.Objects() {
		for _, p := range o.Parts {
			if p.MetadataPartition != MetadataPartition(tp, 8) {
				t.Fatalf("follower holds part of metadata partition %d", p.MetadataPartition)
			}
		}
	}
}

func TestKafkaConsumerRefusesMalformedAndContinues(t *testing.T) {
	e := startCluster(t)
	ctx := waitCtx(t)
	cfg := testTopicConfig(e)
	pub := newPublisher(t, cfg)
	good := testObject(1, 2, CopySegmentFinished, testEntry("x", 0, 0, 9))
	if _, err := pub.Partitions(ctx); err != nil {
		t.Fatal(err)
	}
	goodVal, _ := Encode(nil, good)
	future := append([]byte(nil), goodVal...)
	future[0] = Version + 1
	raw, err := kgo.NewClient(kgo.SeedBrokers(cfg.Bootstrap...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	k := ObjectRecordKey(good.Ref())
	bad := []*kgo.Record{
		{Topic: DefaultTopic, Partition: 2, Key: k, Value: []byte("garbage")},
		{Topic: DefaultTopic, Partition: 2, Key: k, Value: future},
		{Topic: DefaultTopic, Partition: 2, Key: k, Value: goodVal[:len(goodVal)-1]},
		{Topic: DefaultTopic, Partition: 3, Key: k, Value: goodVal}, // wrong partition
		{Topic: DefaultTopic, Partition: 2, Key: []byte("junk"), Value: nil},
	}
	if err := raw.ProduceSync(ctx, bad...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, good); err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	c, st := startConsumer(t, ctx, ConsumerConfig{TopicConfig: cfg}, slog.New(slog.NewTextHandler(logs, nil)))
	if s := c.Stats(); s.Malformed != 5 || s.Records != 6 {
		t.Fatalf("stats %+v", s)
	}
	if got := st.Slices(TopicPartition{Topic: "x", Partition: 0}, 0); len(got) != 1 || len(st.Objects()) != 1 {
		t.Fatalf("good event not applied or bad one applied: %+v", st.Objects())
	}
	out := logs.String()
	if strings.Count(out, "metadata event refused") != 5 || !strings.Contains(out, "not supported") {
		t.Fatalf("log lines:\n%s", out)
	}
}

func TestKafkaCompactionRebuildsSameState(t *testing.T) {
	e := startCluster(t)
	ctx := waitCtx(t)
	cfg := testTopicConfig(e)
	pub := newPublisher(t, cfg)
	var objs []*ObjectMetadata
	for i := byte(1); i <= 6; i++ {
		o := bigObject(i, 12)
		objs = append(objs, o)
		if err := pub.PublishObject(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	n := int32(8)
	snap := func(o *ObjectMetadata, st SegmentState) []Event {
		var evs []Event
		for _, p := range Split(o, n) {
			p.State, p.EventTimestampMs = st, p.EventTimestampMs+int64(st)
			evs = append(evs, p)
		}
		return evs
	}
	// Object 1 deleted to the end (tombstoned); object 2 mid-deletion;
	// object 3 deleted but not yet tombstoned.
	for _, evs := range [][]Event{
		snap(objs[0], DeleteSegmentStarted), snap(objs[0], DeleteSegmentFinished),
		snap(objs[1], DeleteSegmentStarted),
		snap(objs[2], DeleteSegmentStarted), snap(objs[2], DeleteSegmentFinished),
		{&PartitionDelete{TopicPartition: TopicPartition{Topic: "t0", Partition: 3}, State: DeletePartitionMarked}},
		{&PartitionDelete{TopicPartition: TopicPartition{Topic: "t0", Partition: 3}, State: DeletePartitionStarted}},
		// Two leader changes of t0-0 (one record per epoch survives; the
		// first kills the epoch-3 entries from 450: objects 5, 6 and the
		// later 7, and leaves object 4's straddling one) and three vouches
		// (the latest survives).
		{&DeadRange{TopicPartition: TopicPartition{Topic: "t0", Partition: 0}, LeaderEpoch: 4, StartOffset: 450}},
		{&ReplicatedOffset{TopicPartition: TopicPartition{Topic: "t0", Partition: 0}, LeaderEpoch: 4, Offset: 1}},
		{&DeadRange{TopicPartition: TopicPartition{Topic: "t0", Partition: 0}, LeaderEpoch: 5, StartOffset: 800}},
		{&ReplicatedOffset{TopicPartition: TopicPartition{Topic: "t0", Partition: 0}, LeaderEpoch: 5, Offset: 2}},
		{&ReplicatedOffset{TopicPartition: TopicPartition{Topic: "t0", Partition: 0}, LeaderEpoch: 5, Offset: 3}},
	} {
		if err := pub.Publish(ctx, evs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.PublishTombstones(ctx, objs[0]); err != nil {
		t.Fatal(err)
	}
	// A last harmless object, so compaction (which keeps the last batch of
	// each partition) can act on all the records above.
	if err := pub.PublishObject(ctx, bigObject(7, 12)); err != nil {
		t.Fatal(err)
	}

	before, stBefore := startConsumer(t, ctx, ConsumerConfig{TopicConfig: cfg}, quietLogger())
	if _, ok := stBefore.ObjectState(objs[0].Key); ok {
		t.Fatal("tombstoned object still present")
	}
	e.Compact()
	after, stAfter := startConsumer(t, ctx, ConsumerConfig{TopicConfig: cfg}, quietLogger())
	rb, ra := before.Stats().Records, after.Stats().Records
	if ra >= rb {
		t.Fatalf("compaction removed nothing: %d records before, %d after", rb, ra)
	}
	t.Logf("records: %d before compaction, %d after", rb, ra)
	if !reflect.DeepEqual(stBefore.Objects(), stAfter.Objects()) {
		t.Fatalf("objects differ after compaction:\n%+v\n%+v", stBefore.Objects(), stAfter.Objects())
	}
	if !reflect.DeepEqual(stBefore.PartitionDeletes(), stAfter.PartitionDeletes()) {
		t.Fatal("partition deletes differ after compaction")
	}
	if !reflect.DeepEqual(stBefore.Partitions(), stAfter.Partitions()) {
		t.Fatal("indexed partitions differ")
	}
	t01 := TopicPartition{Topic: "t0", Partition: 0}
	if got := stAfter.Slices(t01, 0); len(got) != 1 || got[0].BaseOffset != 400 {
		t.Fatalf("t0-0 indexes %+v after compaction, want only object 4's [400, 499]", got)
	}
	if got := stAfter.DeadRanges(t01); len(got) != 2 || !reflect.DeepEqual(got, stBefore.DeadRanges(t01)) {
		t.Fatalf("dead ranges after compaction %+v, before %+v", got, stBefore.DeadRanges(t01))
	}
	if v, ok := stAfter.ReplicatedOffset(t01); !ok || v.LeaderEpoch != 5 || v.Offset != 3 {
		t.Fatalf("replicated offset after compaction %+v %v", v, ok)
	}
	for _, tp := range stBefore.Partitions() {
		if !reflect.DeepEqual(stBefore.Slices(tp, 0), stAfter.Slices(tp, 0)) {
			t.Fatalf("slices of %s differ", tp)
		}
	}
	if _, ok := stAfter.ObjectState(objs[0].Key); ok {
		t.Fatal("tombstoned object came back after compaction")
	}
	if st, _ := stAfter.ObjectState(objs[2].Key); st != DeleteSegmentFinished {
		t.Fatalf("object 3 state %v", st)
	}
}

func TestKafkaPublisherUnreachable(t *testing.T) {
	e := startCluster(t)
	cfg := testTopicConfig(e)
	e.Close() // nothing listens there any more
	pub := newPublisher(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := pub.PublishObject(ctx, bigObject(1, 3))
	if err == nil {
		t.Fatal("publish to an unreachable cluster succeeded")
	}
	if ctx.Err() == nil {
		t.Fatalf("returned before the deadline: %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error does not wrap the deadline: %v", err)
	}
	// Consumer start fails the same way.
	if _, err := StartConsumer(ctx, ConsumerConfig{TopicConfig: cfg}, NewState(), clock.Real{}, quietLogger()); err == nil {
		t.Fatal("consumer started against an unreachable cluster")
	}
}

func TestKafkaPublisherClusterGoneAfterStart(t *testing.T) {
	e := startCluster(t)
	cfg := testTopicConfig(e)
	pub := newPublisher(t, cfg)
	if err := pub.PublishObject(waitCtx(t), bigObject(1, 3)); err != nil {
		t.Fatal(err)
	}
	e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := pub.PublishObject(ctx, bigObject(2, 3)); err == nil {
		t.Fatal("publish to a stopped cluster succeeded")
	}
	if ctx.Err() == nil {
		t.Fatal("returned before the deadline")
	}
}

func TestKafkaReadTopic(t *testing.T) {
	e := startCluster(t)
	ctx := waitCtx(t)
	cfg := testTopicConfig(e)
	pub := newPublisher(t, cfg)
	o := bigObject(1, 10)
	if err := pub.PublishObject(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishTombstones(ctx, o); err != nil {
		t.Fatal(err)
	}
	var objects, tombs int
	err := ReadTopic(ctx, cfg, quietLogger(), func(r TopicRecord) error {
		if r.Err != nil {
			return r.Err
		}
		switch r.Event.(type) {
		case *ObjectMetadata:
			objects++
		case *Tombstone:
			tombs++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	parts := len(Split(o, 8))
	if objects != parts || tombs != parts {
		t.Fatalf("read %d objects and %d tombstones, want %d each", objects, tombs, parts)
	}
}

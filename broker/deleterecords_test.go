package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DeleteRecords (kadm) moves the log start offset on every replica before
// it answers; a consumer from the start then begins there; an offset past
// the high watermark is OFFSET_OUT_OF_RANGE; -1 means the high watermark;
// a compact-only topic refuses with POLICY_VIOLATION.
func TestAdminDeleteRecords(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, nil)
	cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	const topic = "trimmed"
	createTopic(t, cl, topic, 1, 3, map[string]string{"segment.bytes": "1024"})
	for i := range 100 {
		produceTo(t, cl, topic, 0, value(i))
	}
	tp := TopicPartition{Topic: topic, Partition: 0}
	del := func(offset int64) kadm.DeleteRecordsResponse {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset})
		r, err := adm.DeleteRecords(adminCtx(t), os)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := r.Lookup(topic, 0)
		return got
	}
	if got := del(101); !errors.Is(got.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("past the high watermark: %+v", got)
	}
	got := del(42)
	if got.Err != nil || got.LowWatermark != 42 {
		t.Fatalf("delete before 42: %+v", got)
	}
	// Acknowledged: every replica already starts at 42.
	ts, _ := c.ctrl.Topic(topic)
	for _, rid := range ts.Partitions[0].Replicas {
		st, _ := c.broker(rid).PartitionStatus(tp)
		if st.LogStart != 42 {
			t.Errorf("broker %d starts at %d after the acknowledged delete", rid, st.LogStart)
		}
	}
	recs := consumeAll(t, c, topic, 1)
	if recs[0].Offset != 42 || string(recs[0].Value) != string(value(42)) {
		t.Fatalf("first record from the start: %d %q", recs[0].Offset, recs[0].Value)
	}
	lo, err := adm.ListStartOffsets(adminCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup(topic, 0); o.Offset != 42 {
		t.Fatalf("ListOffsets earliest: %+v", o)
	}
	if got := del(10); got.Err != nil || got.LowWatermark != 42 {
		t.Fatalf("deleting below the log start again: %+v", got)
	}
	if got := del(-1); got.Err != nil || got.LowWatermark != 100 {
		t.Fatalf("delete to the high watermark: %+v", got)
	}
	for _, rid := range ts.Partitions[0].Replicas {
		b := c.broker(rid)
		waitFor(t, "segments below the log start deleted", 10*time.Second, func() bool {
			l, _ := b.PartitionLog(tp)
			return len(l.Segments()) == 1
		}, c.sources()...)
	}

	createTopic(t, cl, "compact-only", 1, 1, map[string]string{"cleanup.policy": "compact"})
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "compact-only", Partition: 0, At: 0})
	r, err := adm.DeleteRecords(adminCtx(t), os)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Lookup("compact-only", 0); !errors.Is(got.Err, kerr.PolicyViolation) {
		t.Fatalf("compact-only topic: %+v", got)
	}
}

package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ListOffsets by timestamp (kadm ListOffsetsAfterMilli) answers the first
// record whose timestamp reaches the target, inside a batch too, across
// segments; max-timestamp (kadm ListMaxTimestampOffsets) the first record
// holding the largest timestamp; a target past every record gets -1.
func TestListOffsetsByTimestamp(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2"}, nil)
	cl := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	const topic = "timed"
	createTopic(t, cl, topic, 1, 2, map[string]string{"segment.bytes": "2048"})
	t0 := time.UnixMilli(1_700_000_000_000)
	// 20 batches of 10 records; record i has timestamp t0 + i s, except
	// record 150, the largest (t0 + 1000 s).
	for b := range 20 {
		var recs []*kgo.Record
		for r := range 10 {
			i := b*10 + r
			ts := t0.Add(time.Duration(i) * time.Second)
			if i == 150 {
				ts = t0.Add(1000 * time.Second)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Value: value(i), Timestamp: ts})
		}
		if err := cl.ProduceSync(adminCtx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if l, _ := c.brokers[0].PartitionLog(TopicPartition{Topic: topic}); l == nil || len(l.Segments()) < 3 {
		t.Fatalf("want several segments")
	}
	for _, tc := range []struct {
		target time.Time
		want   int64
	}{
		{t0.Add(-time.Hour), 0},
		{t0, 0},
		{t0.Add(5 * time.Second), 5},
		{t0.Add(5*time.Second + time.Millisecond), 6},
		{t0.Add(137 * time.Second), 137},
		{t0.Add(151 * time.Second), 150}, // record 150 (t0+1000 s) is the first to reach it
		{t0.Add(1000 * time.Second), 150},
		{t0.Add(1001 * time.Second), -1},
	} {
		lo, err := adm.ListOffsetsAfterMilli(adminCtx(t), tc.target.UnixMilli(), topic)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := lo.Lookup(topic, 0)
		if !ok || got.Err != nil {
			t.Fatalf("target %v: %+v", tc.target, got)
		}
		want := tc.want
		if want == -1 {
			want = 200 // kadm reports the end offset when no record reaches the target
		}
		if got.Offset != want && !(tc.want == -1 && got.Offset == -1) {
			t.Errorf("target t0%+v: offset %d, want %d", tc.target.Sub(t0), got.Offset, tc.want)
		}
	}
	lo, err := adm.ListMaxTimestampOffsets(adminCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := lo.Lookup(topic, 0); got.Offset != 150 || got.Timestamp != t0.Add(1000*time.Second).UnixMilli() {
		t.Fatalf("max timestamp: %+v, want offset 150", got)
	}
}

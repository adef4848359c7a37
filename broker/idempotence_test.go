package broker

import (
	"context"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A retried idempotent produce (same producer id, epoch and sequences) is
// answered with the original offsets and not appended twice; a sequence
// gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestIdempotentRetryNotAppendedTwice(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2"}, nil)
	cl := newClient(t, c)
	createTopic(t, cl, "idem", 1, 2, nil)
	ts, _ := c.ctrl.Topic("idem")
	leader := c.broker(ts.Partitions[0].Leader)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	init := kmsg.NewPtrInitProducerIDRequest()
	initResp, err := init.RequestWith(ctx, cl)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, initResp)
	}
	pid, epoch := initResp.ProducerID, initResp.ProducerEpoch

	batch := func(seq int32, vals ...string) []byte {
		var recs []kafkalogtest.Record
		for _, v := range vals {
			recs = append(recs, kafkalogtest.Record{Value: []byte(v)})
		}
		return kafkalogtest.Encode(kafkalogtest.BatchSpec{
			ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, BaseTimestamp: 1, Records: recs,
		})
	}
	produce := func(records []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		return produceRawAcks(ctx, t, cl, leader, TopicPartition{Topic: "idem", Partition: 0}, -1, records)
	}

	first := produce(batch(0, "a", "b", "c"))
	second := produce(batch(3, "d"))
	if first.ErrorCode != 0 || second.ErrorCode != 0 || first.BaseOffset != 0 || second.BaseOffset != 3 {
		t.Fatalf("first %+v second %+v", first, second)
	}
	retry := produce(batch(0, "a", "b", "c"))
	if retry.ErrorCode != 0 || retry.BaseOffset != 0 {
		t.Fatalf("retried batch: error %d base offset %d, want success at 0", retry.ErrorCode, retry.BaseOffset)
	}
	gap := produce(batch(10, "x"))
	if gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: error %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", gap.ErrorCode)
	}
	l, _ := leader.PartitionLog(TopicPartition{Topic: "idem", Partition: 0})
	if leo := l.LogEndOffset(); leo != 4 {
		t.Fatalf("log end %d after a duplicate and a refused batch, want 4", leo)
	}
}

// The producer table keeps the last 5 batches of a producer: duplicates
// among them are found, older ones and gaps are out of order, epochs fence.
func TestProducerTableWindow(t *testing.T) {
	var pt producerTable
	for i := range int32(7) {
		if chk := pt.check(7, 0, i*2, i*2+1); chk.err != nil || chk.dup != nil {
			t.Fatalf("batch %d: %+v", i, chk)
		}
		pt.record(7, 0, producerBatch{firstSeq: i * 2, lastSeq: i*2 + 1, firstOffset: int64(i * 2), lastOffset: int64(i*2 + 1)})
	}
	cases := []struct {
		name         string
		epoch        int16
		first, last  int32
		wantErr      *kerr.Error
		wantDupAt    int64
		wantNoAction bool
	}{
		{name: "duplicate in window", first: 8, last: 9, wantDupAt: 8},
		{name: "latest duplicate", first: 12, last: 13, wantDupAt: 12},
		{name: "older than the 5 kept", first: 2, last: 3, wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "next", first: 14, last: 14, wantNoAction: true},
		{name: "gap", first: 16, last: 16, wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "fenced epoch", epoch: -1, first: 14, last: 14, wantErr: kerr.InvalidProducerEpoch},
		{name: "new epoch from 0", epoch: 1, first: 0, last: 0, wantNoAction: true},
		{name: "new epoch not from 0", epoch: 1, first: 5, last: 5, wantErr: kerr.OutOfOrderSequenceNumber},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chk := pt.check(7, tc.epoch, tc.first, tc.last)
			switch {
			case tc.wantErr != nil:
				if chk.err != tc.wantErr {
					t.Fatalf("err %v, want %v", chk.err, tc.wantErr)
				}
			case tc.wantNoAction:
				if chk.err != nil || chk.dup != nil {
					t.Fatalf("got %+v, want append", chk)
				}
			default:
				if chk.dup == nil || chk.dup.firstOffset != tc.wantDupAt {
					t.Fatalf("got %+v, want duplicate at %d", chk, tc.wantDupAt)
				}
			}
		})
	}
	if chk := pt.check(99, 0, 3, 3); chk.err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("unknown producer not at 0: %+v", chk)
	}
	pt.truncate(10)
	if chk := pt.check(7, 0, 10, 11); chk.err != nil || chk.dup != nil {
		t.Fatalf("after truncation to 10 the next batch is 10: %+v", chk)
	}
}

func TestLaggingReplicas(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := map[int32]*followerState{
		2: {lastCaughtUp: now.Add(-time.Second)},
		3: {lastCaughtUp: now.Add(-31 * time.Second)},
	}
	cases := []struct {
		isr  []int32
		want []int32
	}{
		{[]int32{1, 2, 3}, []int32{3}},
		{[]int32{1, 2}, nil},
		{[]int32{1, 2, 4}, []int32{4}}, // no fetch state at all
	}
	for _, tc := range cases {
		got := laggingReplicas(tc.isr, 1, fs, now, 30*time.Second)
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Errorf("isr %v: lagging %v, want %v", tc.isr, got, tc.want)
		}
	}
}

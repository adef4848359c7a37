package broker

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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

	pid, epoch := initProducerID(t, ctx, cl)
	batch := func(seq int32, vals ...string) []byte { return idemBatch(pid, epoch, seq, vals...) }
	produce := func(records []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		return produceBatch(t, ctx, cl.Broker(int(leader.cfg.BrokerID)), "idem", records)
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

// initProducerID asks for a producer id and epoch.
func initProducerID(t *testing.T, ctx context.Context, cl *kgo.Client) (int64, int16) {
	t.Helper()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, resp)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// idemBatch is a batch of producer pid at epoch from sequence seq, one
// record per value, stamped now by the real clock (producer expiry goes by
// batch timestamps).
func idemBatch(pid int64, epoch int16, seq int32, vals ...string) []byte {
	return idemBatchAt(time.Now().UnixMilli(), pid, epoch, seq, vals...)
}

// idemBatchAt is idemBatch with timestamp ts (ms).
func idemBatchAt(ts int64, pid int64, epoch int16, seq int32, vals ...string) []byte {
	var recs []kafkalogtest.Record
	for _, v := range vals {
		recs = append(recs, kafkalogtest.Record{Value: []byte(v)})
	}
	return kafkalogtest.Encode(kafkalogtest.BatchSpec{
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, BaseTimestamp: ts, Records: recs,
	})
}

// produceBatch sends records to partition 0 of topic with acks=all.
func produceBatch(t *testing.T, ctx context.Context, br *kgo.Broker, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return produceTo(t, ctx, br, TopicPartition{Topic: topic}, -1, records)
}

// The sequence rules over a producer's entry (the log keeps its last 5
// batches): duplicates among them are found, older ones and gaps are out
// of order, epochs fence, sequences wrap at MaxInt32.
func TestCheckSequence(t *testing.T) {
	e := kafkalog.ProducerEntry{ProducerID: 7}
	for i := int32(2); i < 2+defaultProducerStateBatchWindow; i++ { // batches 0 and 1 fell out of the window
		e.Batches = append(e.Batches, kafkalog.ProducerBatch{FirstSeq: i * 2, LastSeq: i*2 + 1, FirstOffset: int64(i * 2), LastOffset: int64(i*2 + 1)})
	}
	wrapped := kafkalog.ProducerEntry{ProducerID: 7, Batches: []kafkalog.ProducerBatch{{FirstSeq: math.MaxInt32 - 1, LastSeq: math.MaxInt32, FirstOffset: 50, LastOffset: 51}}}
	markerOnly := kafkalog.ProducerEntry{ProducerID: 7, Epoch: 2}
	cases := []struct {
		name         string
		entry        kafkalog.ProducerEntry
		known        bool
		epoch        int16
		first, last  int32
		wantErr      *kerr.Error
		wantDupAt    int64
		wantNoAction bool
	}{
		{name: "duplicate in window", entry: e, known: true, first: 8, last: 9, wantDupAt: 8},
		{name: "latest duplicate", entry: e, known: true, first: 12, last: 13, wantDupAt: 12},
		{name: "older than the 5 kept", entry: e, known: true, first: 2, last: 3, wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "next", entry: e, known: true, first: 14, last: 14, wantNoAction: true},
		{name: "gap", entry: e, known: true, first: 16, last: 16, wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "fenced epoch", entry: e, known: true, epoch: -1, first: 14, last: 14, wantErr: kerr.InvalidProducerEpoch},
		{name: "new epoch from 0", entry: e, known: true, epoch: 1, first: 0, last: 0, wantNoAction: true},
		{name: "new epoch not from 0", entry: e, known: true, epoch: 1, first: 5, last: 5, wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "unknown producer from 0", first: 0, last: 3, wantNoAction: true},
		{name: "unknown producer not from 0", first: 3, last: 3, wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "sequence wraps to 0", entry: wrapped, known: true, first: 0, last: 4, wantNoAction: true},
		{name: "after wrap not 0", entry: wrapped, known: true, first: 1, last: 4, wantErr: kerr.OutOfOrderSequenceNumber},
		{name: "epoch from a marker only, from 0", entry: markerOnly, known: true, epoch: 2, first: 0, last: 0, wantNoAction: true},
		{name: "epoch from a marker only, not 0", entry: markerOnly, known: true, epoch: 2, first: 1, last: 1, wantErr: kerr.OutOfOrderSequenceNumber},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chk := checkSequence(tc.entry, tc.known, 7, tc.epoch, tc.first, tc.last)
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
				if chk.dup == nil || chk.dup.FirstOffset != tc.wantDupAt {
					t.Fatalf("got %+v, want duplicate at %d", chk, tc.wantDupAt)
				}
			}
		})
	}
	if chk := checkSequence(kafkalog.ProducerEntry{}, false, -1, -1, -1, -1); chk.err != nil || chk.dup != nil {
		t.Fatalf("non-idempotent batch: %+v", chk)
	}
}

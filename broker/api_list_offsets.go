package broker

import (
	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v0-9 (Kafka 3.9's range).
//
// As Kafka: a timestamp lookup (>= 0) answers the first record whose
// timestamp reaches the target: the time index (kafkalog's per-segment
// time index) gives where to start, batch headers the batch, its records
// the offset; max-timestamp (-3, v7) answers the first record holding the
// largest timestamp.
// As Kafka: -1 latest is the high watermark (no transactions, so read
// committed sees the same), -2 earliest is the log start; only the leader
// answers; the current leader epoch is fenced (v4+). -4 (earliest local,
// v8) is the log start, since kwal keeps every segment locally; -5
// (latest tiered, v9) is offset -1 with epoch -1, Kafka's answer for a
// topic without tiered storage (KIP-405; the remote WAL is not that).
// v0 answers a list of offsets (OldStyleOffsets): [high watermark] for
// -1, [log start] for -2, and for a timestamp [the first offset reaching
// it] or [] (where differs from Kafka: Kafka's v0 lists segment base
// offsets by file modification time, up to MaxNumOffsets of them).

const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3
	listEarliestLocal = -4
	listLatestTiered  = -5
)

func (b *Broker) handleListOffsets(req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			epoch := rp.CurrentLeaderEpoch
			if req.Version < 4 {
				epoch = -1
			}
			if e := b.listOffset(TopicPartition{Topic: rt.Topic, Partition: rp.Partition}, rp.Timestamp, epoch, &sp); e != nil {
				sp.ErrorCode = e.Code
			}
			if req.Version == 0 {
				sp.OldStyleOffsets = []int64{}
				if sp.ErrorCode == 0 && sp.Offset >= 0 && rp.MaxNumOffsets > 0 {
					sp.OldStyleOffsets = append(sp.OldStyleOffsets, sp.Offset)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) listOffset(tp TopicPartition, ts int64, epoch int32, sp *kmsg.ListOffsetsResponseTopicPartition) *kerr.Error {
	p := b.partition(tp)
	if p == nil {
		return b.notHere(tp)
	}
	st, leader := p.snapshot()
	if !leader {
		return kerr.NotLeaderForPartition
	}
	if e := checkEpoch(epoch, st.LeaderEpoch); e != nil {
		return e
	}
	sp.LeaderEpoch = st.LeaderEpoch
	hw := p.log.HighWatermark()
	switch ts {
	case listLatest:
		sp.Offset = hw
	case listEarliest, listEarliestLocal:
		sp.Offset = p.log.LogStartOffset()
	case listLatestTiered:
		sp.Offset, sp.LeaderEpoch = -1, -1
	default:
		if ts < listMaxTimestamp {
			return kerr.InvalidRequest
		}
		off, t, err := scanTimestamps(p.log, hw, ts)
		if err != nil {
			b.logger.Warn("list offsets scan", "partition", tp, "err", err)
			return kerr.KafkaStorageError
		}
		sp.Offset, sp.Timestamp = off, t
		return nil
	}
	return nil
}

// scanTimestamps walks batch headers below hw, from the first segment
// whose largest timestamp reaches the target (kafkalog's per-segment time
// index). For target >= 0 it returns the offset and timestamp of the first
// record whose timestamp is at least target (or -1, -1), as Kafka: the
// first batch whose max timestamp reaches it, then the record inside; for
// listMaxTimestamp the offset and timestamp of the first record holding
// the largest timestamp (KIP-734).
func scanTimestamps(l *kafkalog.Log, hw, target int64) (int64, int64, error) {
	bestOff, bestTs := int64(-1), int64(-1)
	from := l.LogStartOffset()
	if target >= 0 {
		var ok bool
		if from, ok = l.TimestampSearchStart(target); !ok {
			return -1, -1, nil
		}
	}
	var bestBatch []byte
	var bestHeader kafkalog.BatchHeader
	for off := from; off < hw; {
		data, err := l.Read(off, 1<<20)
		if err != nil {
			return 0, 0, err
		}
		data = trimToBound(data, hw)
		if len(data) == 0 {
			break
		}
		err = kafkalog.SplitBatches(data, func(h kafkalog.BatchHeader, batch []byte) error {
			off = h.NextOffset()
			if target >= 0 && bestBatch == nil && h.MaxTimestamp >= target {
				bestBatch, bestHeader = append([]byte(nil), batch...), h
			}
			if target == listMaxTimestamp && h.MaxTimestamp > bestTs {
				bestBatch, bestHeader, bestTs = append([]byte(nil), batch...), h, h.MaxTimestamp
			}
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
		if target >= 0 && bestBatch != nil {
			break
		}
	}
	if bestBatch == nil {
		return -1, -1, nil
	}
	// Inside the batch: the first record reaching the target (or holding
	// the largest timestamp). A LogAppendTime batch stamps every record
	// with its max timestamp.
	want := target
	if target == listMaxTimestamp {
		want = bestHeader.MaxTimestamp
	}
	err := kafkalog.EachRecord(bestBatch, func(r kafkalog.Record) {
		ts := r.Timestamp
		if bestHeader.LogAppendTime() {
			ts = bestHeader.MaxTimestamp
		}
		if bestOff < 0 && ts >= want {
			bestOff, bestTs = r.Offset, ts
		}
	})
	if err != nil {
		return 0, 0, err
	}
	if bestOff < 0 { // a max timestamp no record carries: the batch's
		bestOff, bestTs = bestHeader.LastOffset(), bestHeader.MaxTimestamp
	}
	return bestOff, bestTs, nil
}

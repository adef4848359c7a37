package broker

import (
	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v1-7.
//
// Where it differs from Kafka: a timestamp lookup (>= 0) and max-timestamp
// (-3, v7) are answered at batch granularity by scanning batch headers: the
// first batch whose max timestamp reaches the target (its base offset),
// and the last batch holding the largest timestamp (its last offset).
// As Kafka: -1 latest is the high watermark (no transactions, so read
// committed sees the same), -2 earliest is the log start; only the leader
// answers; the current leader epoch is fenced (v4+).

const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3
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
	case listEarliest:
		sp.Offset = p.log.LogStartOffset()
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

// scanTimestamps walks batch headers below hw. For target >= 0 it returns
// the base offset of the first batch with max timestamp >= target (or -1,
// -1); for listMaxTimestamp the last offset and timestamp of the last
// batch with the largest max timestamp.
func scanTimestamps(l *kafkalog.Log, hw, target int64) (int64, int64, error) {
	bestOff, bestTs := int64(-1), int64(-1)
	for off := l.LogStartOffset(); off < hw; {
		data, err := l.Read(off, 1<<20)
		if err != nil {
			return 0, 0, err
		}
		data = trimToBound(data, hw)
		if len(data) == 0 {
			break
		}
		err = kafkalog.SplitBatches(data, func(h kafkalog.BatchHeader, _ []byte) error {
			off = h.NextOffset()
			if target >= 0 && bestOff < 0 && h.MaxTimestamp >= target {
				bestOff, bestTs = h.BaseOffset, h.MaxTimestamp
			}
			if target == listMaxTimestamp && h.MaxTimestamp >= bestTs {
				bestOff, bestTs = h.LastOffset(), h.MaxTimestamp
			}
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
		if target >= 0 && bestOff >= 0 {
			break
		}
	}
	return bestOff, bestTs, nil
}

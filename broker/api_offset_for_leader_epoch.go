package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch: v0-4 (Kafka 3.9's range; v0-1 carry no current
// leader epoch, so nothing is fenced, and v0 answers no epoch).
//
// As Kafka (KIP-101/KIP-320): only the leader answers; the current leader
// epoch is fenced; the answer is the largest epoch <= the requested one and
// the start offset of the next epoch (the log end for the current epoch).
// Where it differs: the leader's own epoch before its first append in it
// is answered with the log end (Kafka writes the epoch at election; our
// log records it at the first append).

func (b *Broker) handleOffsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
			if e := b.endOffsetForEpoch(TopicPartition{Topic: rt.Topic, Partition: rp.Partition}, rp.CurrentLeaderEpoch, rp.LeaderEpoch, &sp); e != nil {
				sp.ErrorCode = e.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) endOffsetForEpoch(tp TopicPartition, current, epoch int32, sp *kmsg.OffsetForLeaderEpochResponseTopicPartition) *kerr.Error {
	p := b.partition(tp)
	if p == nil {
		return b.notHere(tp)
	}
	st, leader := p.snapshot()
	if !leader {
		return kerr.NotLeaderForPartition
	}
	if e := checkEpoch(current, st.LeaderEpoch); e != nil {
		return e
	}
	latest, ok := p.log.LatestEpoch()
	switch {
	case epoch == st.LeaderEpoch:
		sp.LeaderEpoch, sp.EndOffset = epoch, p.log.LogEndOffset()
	case !ok:
		// Nothing appended with an epoch: everything up to our log end is
		// agreed, as far as we can tell.
		sp.LeaderEpoch, sp.EndOffset = -1, p.log.LogEndOffset()
	case epoch > latest && epoch < st.LeaderEpoch:
		// An epoch we never appended in (a deposed leader's): our latest
		// epoch runs to our log end; the follower truncates by it.
		sp.LeaderEpoch, sp.EndOffset = latest, p.log.LogEndOffset()
	default:
		sp.LeaderEpoch, sp.EndOffset = p.log.EndOffsetForEpoch(epoch)
	}
	return nil
}

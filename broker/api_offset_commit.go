package broker

import (
	"github.com/kwal/kwal/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-9.
//
// As Kafka (classic groups): a commit from a member is checked against
// its generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// REBALANCE_IN_PROGRESS while the group completes a rebalance,
// FENCED_INSTANCE_ID); generation -1 on an empty group commits from
// outside the group (admin tools, simple consumers). The answer comes once
// the offsets are replicated to the ISR of the group's __consumer_offsets
// partition. Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION, metadata
// over offset.metadata.max.bytes (4096) OFFSET_METADATA_TOO_LARGE. The
// offsets of an empty group expire after offsets.retention.minutes
// (KIP-211). Where it differs: v2-4's per-request retention time is
// ignored, as Kafka does since KIP-211 for all but those versions.

const offsetMetadataMaxBytes = 4096

func (b *Broker) handleOffsetCommit(cs *connState, req *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	cr := group.CommitRequest{MemberID: req.MemberID, Generation: req.Generation, Offsets: map[TopicPartition]group.Offset{}}
	if req.Version == 0 {
		cr.Generation = -1
	}
	if req.InstanceID != nil {
		cr.InstanceID = *req.InstanceID
	}
	now := b.clock.Now()
	codes := make([][]*kerr.Error, len(req.Topics))
	for ti, rt := range req.Topics {
		ts, known := b.ctrl.Topic(rt.Topic)
		codes[ti] = make([]*kerr.Error, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			switch {
			case !known || rp.Partition < 0 || int(rp.Partition) >= len(ts.Partitions):
				codes[ti][pi] = kerr.UnknownTopicOrPartition
			case rp.Metadata != nil && len(*rp.Metadata) > offsetMetadataMaxBytes:
				codes[ti][pi] = kerr.OffsetMetadataTooLarge
			default:
				epoch := rp.LeaderEpoch
				if req.Version < 6 {
					epoch = -1
				}
				cr.Offsets[TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = group.Offset{
					Offset: rp.Offset, LeaderEpoch: epoch, Metadata: rp.Metadata, CommitTime: now,
				}
			}
		}
	}
	var err *kerr.Error
	if req.Group == "" {
		err = kerr.InvalidGroupID
	} else {
		ctx, cancel := b.groupCtx(cs, b.cfg.Groups.OffsetCommitTimeout+groupWaitMargin)
		err = b.groups.coord.Commit(ctx, req.Group, cr)
		cancel()
	}
	if err != nil {
		b.logger.Debug("offset commit", "group", req.Group, "member", req.MemberID, "generation", req.Generation, "err", err.Message)
	}
	for ti, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			if c := codes[ti][pi]; c != nil {
				sp.ErrorCode = c.Code
			} else if err != nil {
				sp.ErrorCode = err.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

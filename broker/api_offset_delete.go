package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete: v0.
//
// As Kafka (KIP-496): a group's committed offsets are deleted with
// tombstones; a consumer group that is not empty keeps the offsets of
// topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC per partition); a
// non-empty group of another protocol type gets NON_EMPTY_GROUP.

func (b *Broker) handleOffsetDelete(cs *connState, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	var tps []TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	top := kerr.InvalidGroupID
	var per map[TopicPartition]*kerr.Error
	if req.Group != "" {
		ctx, cancel := b.groupCtx(cs, b.cfg.Groups.OffsetCommitTimeout+groupWaitMargin)
		top, per = b.groups.coord.DeleteOffsets(ctx, req.Group, tps)
		cancel()
	}
	if top != nil {
		resp.ErrorCode = top.Code
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			if e := per[TopicPartition{Topic: t.Topic, Partition: p.Partition}]; e != nil {
				rp.ErrorCode = e.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

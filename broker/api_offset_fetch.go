package broker

import (
	"sort"

	"github.com/kwal/kwal/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch: v0-9.
//
// v0-7 ask for one group, v8+ for several (KIP-709); no topics (v2+)
// means every committed partition. A partition without a commit gets
// offset -1. Group-level errors (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS) are top-level from v2 and per partition
// before. RequireStable (v7) needs nothing: there are no transactional
// commits. v9's member id and epoch belong to KIP-848 groups and are not
// checked for classic groups, as Kafka.

func (b *Broker) handleOffsetFetch(req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			var asked []offsetFetchTopic
			if rg.Topics != nil {
				asked = []offsetFetchTopic{}
				for _, t := range rg.Topics {
					asked = append(asked, offsetFetchTopic{t.Topic, t.Partitions})
				}
			}
			topics, err := b.fetchOffsets(rg.Group, asked)
			if err != nil {
				g.ErrorCode = err.Code
			}
			for _, t := range topics {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = t.Topic
				for _, p := range t.Partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					gt.Partitions = append(gt.Partitions, gp)
				}
				g.Topics = append(g.Topics, gt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
	var asked []offsetFetchTopic
	if req.Topics != nil || req.Version < 2 {
		asked = []offsetFetchTopic{}
		for _, t := range req.Topics {
			asked = append(asked, offsetFetchTopic{t.Topic, t.Partitions})
		}
	}
	topics, err := b.fetchOffsets(req.Group, asked)
	if err != nil {
		if req.Version >= 2 {
			resp.ErrorCode = err.Code
		}
		// v0-1 carry the group's error on every partition asked for.
		for i := range topics {
			for j := range topics[i].Partitions {
				topics[i].Partitions[j].ErrorCode = err.Code
			}
		}
	}
	resp.Topics = topics
	return resp
}

type offsetFetchTopic struct {
	topic      string
	partitions []int32
}

// fetchOffsets answers one group: of the partitions asked, or (asked nil)
// of every committed one. On a group error the asked partitions come back
// with offset -1.
func (b *Broker) fetchOffsets(groupID string, asked []offsetFetchTopic) ([]kmsg.OffsetFetchResponseTopic, *kerr.Error) {
	var tps []TopicPartition
	if asked != nil {
		tps = []TopicPartition{}
		for _, t := range asked {
			for _, p := range t.partitions {
				tps = append(tps, TopicPartition{Topic: t.topic, Partition: p})
			}
		}
	}
	var (
		got map[TopicPartition]group.Offset
		err *kerr.Error
	)
	if groupID == "" {
		err = kerr.InvalidGroupID
	} else {
		got, err = b.groups.coord.Fetch(groupID, tps)
	}
	if asked == nil {
		asked = []offsetFetchTopic{}
		byTopic := map[string][]int32{}
		for tp := range got {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		for t, ps := range byTopic {
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			asked = append(asked, offsetFetchTopic{t, ps})
		}
		sort.Slice(asked, func(i, j int) bool { return asked[i].topic < asked[j].topic })
	}
	out := make([]kmsg.OffsetFetchResponseTopic, 0, len(asked))
	for _, t := range asked {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.topic
		for _, p := range t.partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			empty := ""
			rp.Metadata = &empty
			if o, ok := got[TopicPartition{Topic: t.topic, Partition: p}]; ok {
				rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Offset, o.LeaderEpoch, o.Metadata
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out, err
}

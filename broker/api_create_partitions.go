package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3.
//
// As Kafka: partitions only grow (a count not above the current one gets
// INVALID_PARTITIONS with a message); validate-only changes nothing; the
// new partitions are assigned as CreateTopics assigns (rack-aware round
// robin, the topic's replication factor) and start empty at offset 0.
// Where it differs from Kafka: manual assignments are refused with
// INVALID_REQUEST; any broker creates (Kafka forwards to the controller).

func (b *Broker) handleCreatePartitions(req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		fail := func(e *kerr.Error, msg string) {
			st.ErrorCode = e.Code
			st.ErrorMessage = &msg
			b.logger.Info("create partitions refused", "topic", rt.Topic, "count", rt.Count, "err", e.Message, "detail", msg)
		}
		ts, ok := b.ctrl.Topic(rt.Topic)
		switch {
		case !ok:
			fail(kerr.UnknownTopicOrPartition, fmt.Sprintf("topic %s does not exist", rt.Topic))
		case len(rt.Assignment) > 0:
			fail(kerr.InvalidRequest, "manual replica assignment is not supported")
		case int(rt.Count) <= len(ts.Partitions):
			fail(kerr.InvalidPartitions, fmt.Sprintf("topic %s has %d partitions; the count can only grow", rt.Topic, len(ts.Partitions)))
		case rt.Count > b.cfg.MaxTopicPartitions:
			fail(kerr.InvalidPartitions, fmt.Sprintf("%d partitions is more than %d", rt.Count, b.cfg.MaxTopicPartitions))
		case req.ValidateOnly:
		default:
			if _, err := b.ctrl.CreatePartitions(rt.Topic, rt.Count); err != nil {
				fail(adminErrorCode(err), err.Error())
			} else {
				b.logger.Info("created partitions", "topic", rt.Topic, "from", len(ts.Partitions), "to", rt.Count)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

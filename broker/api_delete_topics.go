package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6.
//
// As Kafka: topics by name (v0-5) or by name or topic id (v6; an unknown
// id gets UNKNOWN_TOPIC_ID, an unknown name UNKNOWN_TOPIC_OR_PARTITION);
// the controller removes the topic, every replica's broker drops it and
// removes its log from disk (topiclifecycle.go); a remotewal partition's
// deletion is published to the metadata topic and its objects collected
// (the Replicator's PartitionDeleter).
// Where it differs from Kafka: __consumer_offsets cannot be deleted
// (INVALID_REQUEST; Kafka leaves that check to its CLI); any broker deletes (Kafka forwards to the
// controller); the response is sent once this broker's controller applied
// the deletion (with the in-process MemController: once every broker
// removed its replicas), not when the timeout says.

func (b *Broker) handleDeleteTopics(req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name string
		id   TopicID
	}
	var targets []target
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: n})
		}
	}
	for _, rt := range req.Topics {
		t := target{id: rt.TopicID}
		if rt.Topic != nil {
			t.name = *rt.Topic
		}
		targets = append(targets, t)
	}
	for _, t := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		name := t.name
		st.TopicID = t.id
		var (
			ts  TopicState
			err error
		)
		if t.name == OffsetsTopic {
			err = errInternalTopic
		} else {
			ts, err = b.ctrl.DeleteTopic(t.name, t.id)
		}
		if err == nil {
			name, st.TopicID = ts.Name, ts.ID
			b.logger.Info("deleted topic", "topic", ts.Name, "topic_id", ts.ID, "partitions", len(ts.Partitions))
		} else {
			e := adminErrorCode(err)
			st.ErrorCode = e.Code
			if req.Version >= 5 {
				msg := err.Error()
				st.ErrorMessage = &msg
			}
			b.logger.Info("delete topic refused", "topic", t.name, "topic_id", TopicID(t.id), "err", err)
		}
		if name != "" || req.Version < 6 {
			st.Topic = &name
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

var errInternalTopic = errors.New("broker: " + OffsetsTopic + " is an internal topic and cannot be deleted (the group coordinator keeps its state there)")

// adminErrorCode maps controller errors of topic administration to
// Kafka's codes.
func adminErrorCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, errInternalTopic):
		return kerr.InvalidRequest
	case errors.Is(err, ErrUnknownTopicID):
		return kerr.UnknownTopicID
	case errors.Is(err, ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition
	case errors.Is(err, ErrStaleEpoch):
		return kerr.RequestTimedOut // retriable: other changes kept overtaking this one
	case errors.Is(err, ErrControllerClosed):
		return kerr.NotController
	default:
		return createErrorCode(err)
	}
}

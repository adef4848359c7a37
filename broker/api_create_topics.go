package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v0-7 (Kafka 3.9's range).
//
// Where it differs from Kafka: manual replica assignments are refused
// with INVALID_REQUEST (the controller assigns round-robin across racks);
// only the topic configs in topicConfigCheck are accepted (others get
// INVALID_CONFIG); any broker creates (Kafka forwards to the controller).
// As Kafka: -1 partitions or replication factor take num.partitions and
// default.replication.factor (v4+), validate-only creates nothing, v5
// reports partitions, replication factor and configs, v7 the topic id
// (v6 only adds THROTTLING_QUOTA_EXCEEDED, which kwal never sends).

func (b *Broker) handleCreateTopics(req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(e *kerr.Error, msg string) {
			st.ErrorCode = e.Code
			if msg != "" {
				st.ErrorMessage = &msg
			}
			b.logger.Info("create topic refused", "topic", rt.Topic, "err", e.Message, "detail", msg)
		}
		configs := map[string]string{}
		for _, c := range rt.Configs {
			if c.Value != nil {
				configs[c.Name] = *c.Value
			}
		}
		spec := TopicSpec{Name: rt.Topic, Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor, Configs: configs}
		if spec.Partitions == -1 {
			spec.Partitions = b.cfg.NumPartitions
		}
		if spec.ReplicationFactor == -1 {
			spec.ReplicationFactor = b.cfg.DefaultReplicationFactor
		}
		switch err := b.checkTopicConfigs(configs, spec.ReplicationFactor); {
		case checkTopicName(rt.Topic) != nil:
			fail(kerr.InvalidTopicException, checkTopicName(rt.Topic).Error())
		case len(rt.ReplicaAssignment) > 0:
			fail(kerr.InvalidRequest, "manual replica assignment is not supported")
		case err != nil:
			fail(kerr.InvalidConfig, err.Error())
		case spec.Partitions < 1 || spec.Partitions > b.cfg.MaxTopicPartitions:
			fail(kerr.InvalidPartitions, "")
		case spec.ReplicationFactor < 1 || int(spec.ReplicationFactor) > len(b.ctrl.Brokers()):
			fail(kerr.InvalidReplicationFactor, "")
		case req.ValidateOnly:
			if _, ok := b.ctrl.Topic(rt.Topic); ok {
				fail(kerr.TopicAlreadyExists, "")
			}
		default:
			if ts, err := b.ctrl.CreateTopic(spec); err != nil {
				msg := ""
				if !errors.Is(err, ErrTopicExists) {
					msg = err.Error()
				}
				fail(createErrorCode(err), msg)
			} else {
				st.TopicID = ts.ID
				b.logger.Info("created topic", "topic", rt.Topic, "topic_id", ts.ID, "partitions", spec.Partitions, "replication_factor", spec.ReplicationFactor, "configs", configs)
			}
		}
		if st.ErrorCode == 0 {
			st.NumPartitions, st.ReplicationFactor = spec.Partitions, spec.ReplicationFactor
			defaults := b.topicConfigDefaults()
			for k, v := range configs {
				defaults[k] = v
			}
			for k, v := range defaults {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name = k
				val := v
				c.Value = &val
				c.Source = int8(kmsg.ConfigSourceDefaultConfig)
				if _, set := configs[k]; set {
					c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
				}
				st.Configs = append(st.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

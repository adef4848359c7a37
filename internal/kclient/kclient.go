package kclient

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopic creates a topic through the CreateTopics API. An existing
// topic is an error unless existsOK.
func CreateTopic(ctx context.Context, cl *kgo.Client, name string, partitions int32, rf int16, configs map[string]string, existsOK bool) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		val := v
		c.Value = &val
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("create topic %s: %d topics in the answer", name, len(resp.Topics))
	}
	err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	if err == nil || existsOK && err == kerr.TopicAlreadyExists {
		return nil
	}
	return fmt.Errorf("create topic %s: %w", name, err)
}

package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnsureTopic creates the metadata topic if it does not exist
// (cleanup.policy=compact,delete, retention.ms and delete.retention.ms from
// cfg) and returns the number of partitions it really has, which is what
// MetadataPartition must be given. cfg must have passed Validate.
func EnsureTopic(ctx context.Context, cl *kgo.Client, cfg *TopicConfig, logger *slog.Logger) (int32, error) {
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, cfg.Partitions, cfg.ReplicationFactor, cfg.topicConfigs(), cfg.Topic)
	switch {
	case err == nil:
		logger.Info("metadata topic created", "topic", cfg.Topic, "partitions", resp.NumPartitions,
			"retention", cfg.Retention)
	case errors.Is(err, kerr.TopicAlreadyExists):
	default:
		return 0, fmt.Errorf("metadata: create topic %s: %w", cfg.Topic, err)
	}
	return TopicPartitions(ctx, cl, cfg.Topic)
}

// TopicPartitions returns the partition count of topic.
func TopicPartitions(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("metadata: describe topic %s: %w", topic, err)
	}
	td, ok := details[topic]
	if !ok {
		return 0, fmt.Errorf("metadata: describe topic %s: not in the answer", topic)
	}
	if td.Err != nil {
		return 0, fmt.Errorf("metadata: describe topic %s: %w", topic, td.Err)
	}
	if len(td.Partitions) == 0 {
		return 0, fmt.Errorf("metadata: topic %s has no partitions", topic)
	}
	return int32(len(td.Partitions)), nil
}

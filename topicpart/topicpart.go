// Package topicpart holds the one TopicPartition type of the module.
// broker, metadata and objstore/ledger re-export it under their own name
// (type aliases, so all are the same type and convert freely).
//
// It owns nothing else: no I/O, no state.
package topicpart

import "fmt"

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
}

// String is "topic-partition", the name of the partition's log directory.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

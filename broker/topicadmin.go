package broker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
)

// Topic administration in the controllers: deleting a topic, growing its
// partition count, replacing its configs. The rules are pure functions over
// the controller's topic map, applied by the state machine both
// controllers run (clusterState, clusterstate.go), so both decide alike.
//
// Each change is checked against the topic incarnation and epoch it was
// asked for: a topic has an id (Kafka's topic id, random at creation, so a
// topic deleted and created again under the same name is a different
// topic) and an Epoch bumped by every partition-count or config change. A
// change proposed against an older epoch or another incarnation is refused
// with ErrStaleEpoch (or ErrUnknownTopicID), never applied to the wrong
// topic.

// TopicID is Kafka's topic id: 16 random bytes given at creation. The zero
// id is "none" (topics created before ids existed).
type TopicID [16]byte

// String is the id in hex.
func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero (absent) id.
func (id TopicID) IsZero() bool { return id == TopicID{} }

func newTopicID() TopicID {
	var id TopicID
	for id.IsZero() {
		if _, err := rand.Read(id[:]); err != nil {
			panic(fmt.Sprintf("broker: reading random topic id: %v", err)) // crypto/rand does not fail
		}
	}
	return id
}

func parseTopicID(s string) (TopicID, error) {
	var id TopicID
	if s == "" {
		return id, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("controller: bad topic id %q", s)
	}
	copy(id[:], b)
	return id, nil
}

// Topic administration errors.
var (
	// ErrUnknownTopicID: a change names a topic id the cluster does not
	// have (Kafka's UNKNOWN_TOPIC_ID).
	ErrUnknownTopicID = errors.New("broker: unknown topic id")
)

// topicChange is one administrative change of a topic, as proposed.
type topicChange struct {
	kind string // kindDeleteTopic, kindCreatePartitions, kindAlterConfigs
	name string
	// id and epoch are the incarnation and epoch the change was asked
	// against; a zero id matches only a topic without an id.
	id    TopicID
	epoch int32
	// create-partitions: the full list after growing (old ones unchanged).
	partitions []PartitionState
	// alter-configs: the complete new config set.
	configs map[string]string
}

// applyTopicChange applies c to topics. It returns the changed topic (for
// a deletion: its last state with Deleted set, already removed from the
// map) or an error, in which case nothing changed.
func applyTopicChange(topics map[string]*TopicState, c topicChange) (*TopicState, error) {
	ts, ok := topics[c.name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, c.name)
	}
	if ts.ID != c.id {
		return nil, fmt.Errorf("%w: %s is incarnation %s, the change was for %s", ErrStaleEpoch, c.name, ts.ID, c.id)
	}
	if c.kind != kindDeleteTopic && ts.Epoch != c.epoch {
		return nil, fmt.Errorf("%w: %s at topic epoch %d, asked %d", ErrStaleEpoch, c.name, ts.Epoch, c.epoch)
	}
	switch c.kind {
	case kindDeleteTopic:
		delete(topics, c.name)
		gone := cloneTopic(ts)
		gone.Deleted = true
		return &gone, nil
	case kindCreatePartitions:
		if len(c.partitions) <= len(ts.Partitions) {
			return nil, fmt.Errorf("%w: %s has %d partitions, asked %d (partitions only grow)", ErrInvalidPartitions, c.name, len(ts.Partitions), len(c.partitions))
		}
		next := make([]PartitionState, 0, len(c.partitions))
		for i, ps := range c.partitions {
			if ps.Partition != int32(i) || len(ps.Replicas) == 0 {
				return nil, fmt.Errorf("%w: malformed partition %d of %s", ErrInvalidPartitions, i, c.name)
			}
			if i < len(ts.Partitions) {
				next = append(next, clonePartition(ts.Partitions[i])) // existing ones keep their state
				continue
			}
			next = append(next, clonePartition(ps))
		}
		ts.Partitions = next
	case kindAlterConfigs:
		ts.Configs = cloneMap(c.configs)
	default:
		return nil, fmt.Errorf("controller: unknown topic change %q", c.kind)
	}
	ts.Epoch++
	return ts, nil
}

// growAssignment returns ts's partitions grown to total: the new ones are
// assigned as AssignReplicas would assign a topic of total partitions, with
// the replication factor of partition 0.
func growAssignment(ts TopicState, total int32, brokers []BrokerInfo) ([]PartitionState, error) {
	if int(total) <= len(ts.Partitions) {
		return nil, fmt.Errorf("%w: %s has %d partitions, asked %d (partitions only grow)", ErrInvalidPartitions, ts.Name, len(ts.Partitions), total)
	}
	rf := int16(len(ts.Partitions[0].Replicas))
	all, err := AssignReplicas(ts.Name, total, rf, brokers)
	if err != nil {
		return nil, err
	}
	return append(ts.Partitions[:len(ts.Partitions):len(ts.Partitions)], all[len(ts.Partitions):]...), nil
}

// TopicConfigEdit computes a topic's new config set from its current one;
// an error refuses the change.
type TopicConfigEdit func(current map[string]string) (map[string]string, error)

// MemController's topic administration.

func (c *MemController) applyChange(tc topicChange) (TopicState, error) {
	res, err := c.commit(topicChangeRecord(tc), c.logger())
	return res.topic, err
}

// DeleteTopic removes a topic. With id given (not zero) it must be the
// topic's id. Errors: ErrUnknownTopic, ErrUnknownTopicID.
func (c *MemController) DeleteTopic(name string, id TopicID) (TopicState, error) {
	return topicAdmin{c, c.applyChange}.deleteTopic(name, id)
}

// CreatePartitions grows a topic to total partitions.
func (c *MemController) CreatePartitions(name string, total int32) (TopicState, error) {
	return topicAdmin{c, c.applyChange}.createPartitions(name, total)
}

// AlterTopicConfigs replaces a topic's configs with edit's result.
func (c *MemController) AlterTopicConfigs(name string, edit TopicConfigEdit) (TopicState, error) {
	return topicAdmin{c, c.applyChange}.alterTopicConfigs(name, edit)
}

// topicAdmin is the topic administration both controllers share: it
// reads the current state through view and hands each change to submit
// (MemController commits it, KafkaController proposes it), again from a
// fresh read when another change overtook it.
type topicAdmin struct {
	view interface {
		Topic(string) (TopicState, bool)
		Topics() []TopicState
		Brokers() []BrokerInfo
	}
	submit func(topicChange) (TopicState, error)
}

func (a topicAdmin) deleteTopic(name string, id TopicID) (TopicState, error) {
	return retryStale(func() (TopicState, error) {
		ts, err := topicFor(a.view, name, id)
		if err != nil {
			return TopicState{}, err
		}
		return a.submit(topicChange{kind: kindDeleteTopic, name: ts.Name, id: ts.ID})
	})
}

func (a topicAdmin) createPartitions(name string, total int32) (TopicState, error) {
	return retryStale(func() (TopicState, error) {
		ts, err := topicFor(a.view, name, TopicID{})
		if err != nil {
			return TopicState{}, err
		}
		parts, err := growAssignment(ts, total, a.view.Brokers())
		if err != nil {
			return TopicState{}, err
		}
		return a.submit(topicChange{kind: kindCreatePartitions, name: name, id: ts.ID, epoch: ts.Epoch, partitions: parts})
	})
}

func (a topicAdmin) alterTopicConfigs(name string, edit TopicConfigEdit) (TopicState, error) {
	return retryStale(func() (TopicState, error) {
		ts, err := topicFor(a.view, name, TopicID{})
		if err != nil {
			return TopicState{}, err
		}
		next, err := edit(maps.Clone(ts.Configs))
		if err != nil {
			return TopicState{}, err
		}
		return a.submit(topicChange{kind: kindAlterConfigs, name: name, id: ts.ID, epoch: ts.Epoch, configs: next})
	})
}

// topicFor reads a topic by name, or by id when name is "" or id is given.
func topicFor(c interface {
	Topic(string) (TopicState, bool)
	Topics() []TopicState
}, name string, id TopicID) (TopicState, error) {
	if name == "" && !id.IsZero() {
		for _, ts := range c.Topics() {
			if ts.ID == id {
				return ts, nil
			}
		}
		return TopicState{}, fmt.Errorf("%w: %s", ErrUnknownTopicID, id)
	}
	ts, ok := c.Topic(name)
	if !ok {
		return TopicState{}, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	if !id.IsZero() && ts.ID != id {
		return TopicState{}, fmt.Errorf("%w: %s for topic %s", ErrUnknownTopicID, id, name)
	}
	return ts, nil
}

// retryStale re-reads and retries a change another change overtook.
func retryStale(fn func() (TopicState, error)) (TopicState, error) {
	var err error
	for range 5 {
		var ts TopicState
		if ts, err = fn(); !errors.Is(err, ErrStaleEpoch) {
			return ts, err
		}
	}
	return TopicState{}, err
}

// KafkaController's topic administration: each change is a record applied
// by every controller in log order (see KafkaController).

func topicChangeOf(rec stateRecord) (topicChange, error) {
	id, err := parseTopicID(rec.TopicID)
	if err != nil {
		return topicChange{}, err
	}
	tc := topicChange{kind: rec.Kind, name: rec.TopicName, id: id, epoch: rec.TopicEpoch, configs: rec.Configs}
	if rec.Kind == kindCreatePartitions {
		if rec.Topic == nil {
			return topicChange{}, fmt.Errorf("%w: create-partitions record without partitions", ErrInvalidPartitions)
		}
		for _, wp := range rec.Topic.Partitions {
			tc.partitions = append(tc.partitions, PartitionState{
				Partition: wp.Partition, Leader: wp.Leader, LeaderEpoch: wp.LeaderEpoch,
				PartitionEpoch: wp.PartitionEpoch, Replicas: wp.Replicas, ISR: wp.ISR,
			})
		}
	}
	return tc, nil
}

// topicChangeRecord is tc as a cluster-state record, applied by
// clusterState (both controllers).
func topicChangeRecord(tc topicChange) stateRecord {
	rec := stateRecord{Kind: tc.kind, TopicName: tc.name, TopicEpoch: tc.epoch, Configs: tc.configs}
	if !tc.id.IsZero() {
		rec.TopicID = tc.id.String()
	}
	if tc.kind == kindCreatePartitions {
		rec.Topic = topicToWire(TopicState{Name: tc.name, Partitions: tc.partitions})
	}
	return rec
}

func (c *KafkaController) proposeChange(tc topicChange) (TopicState, error) {
	res, err := c.propose(func(p string) string { return "topic/" + tc.name + "/" + p }, topicChangeRecord(tc))
	if err != nil {
		return TopicState{}, err
	}
	return res.topic, res.err
}

func (c *KafkaController) DeleteTopic(name string, id TopicID) (TopicState, error) {
	return topicAdmin{c, c.proposeChange}.deleteTopic(name, id)
}

func (c *KafkaController) CreatePartitions(name string, total int32) (TopicState, error) {
	return topicAdmin{c, c.proposeChange}.createPartitions(name, total)
}

func (c *KafkaController) AlterTopicConfigs(name string, edit TopicConfigEdit) (TopicState, error) {
	return topicAdmin{c, c.proposeChange}.alterTopicConfigs(name, edit)
}

var _ DurableController = (*KafkaController)(nil)

// DurableState: a KafkaController's topics are the cluster's durable state
// once NewKafkaController returned.
func (c *KafkaController) DurableState() bool { return true }

package broker

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// applyResult is what applying one record decided, for its proposer.
type applyResult struct {
	topic        TopicState
	partition    PartitionState
	registration BrokerRegistration
	err          error
}

// clusterState is the controllers' state machine: apply takes records in
// log order and does no I/O, so every controller that applies the same log
// holds the same state. KafkaController applies the records of
// __kwal_cluster_state; MemController applies records it makes itself.
type clusterState struct {
	fixed        bool
	brokers      map[int32]BrokerInfo
	regs         map[int32]BrokerRegistration
	topics       map[string]*TopicState
	nextPIDBlock int64
}

func newClusterState(static []BrokerInfo) *clusterState {
	s := &clusterState{
		brokers: map[int32]BrokerInfo{}, regs: map[int32]BrokerRegistration{},
		topics: map[string]*TopicState{}, fixed: len(static) > 0,
	}
	for _, b := range static {
		s.brokers[b.ID] = b
	}
	return s
}

func (s *clusterState) brokerList() []BrokerInfo {
	out := make([]BrokerInfo, 0, len(s.brokers))
	for _, b := range s.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *clusterState) registrations() []BrokerRegistration {
	out := make([]BrokerRegistration, 0, len(s.regs))
	for _, r := range s.regs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *clusterState) topicList() []TopicState {
	out := make([]TopicState, 0, len(s.topics))
	for _, ts := range s.topics {
		out = append(out, cloneTopic(ts))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// checkBroker is the rule for a fixed cluster list.
func (s *clusterState) checkBroker(b BrokerInfo) error {
	old, ok := s.brokers[b.ID]
	switch {
	case s.fixed && !ok:
		return fmt.Errorf("broker: broker %d is not in the fixed cluster list", b.ID)
	case s.fixed && old.Rack != b.Rack:
		return fmt.Errorf("broker: broker %d has rack %q in the cluster list, registers %q", b.ID, old.Rack, b.Rack)
	}
	return nil
}

// applied is what one record changed.
type applied struct {
	topics  []*TopicState     // changed topics, by name
	changes []partitionChange // partition changes made by fencing, registration or election
}

// apply applies the record at offset (the new broker epoch of a
// registration). The result goes to the record's proposer.
func (s *clusterState) apply(rec stateRecord, offset int64) (applied, applyResult) {
	switch rec.Kind {
	case kindBroker:
		if rec.Broker == nil {
			return applied{}, applyResult{err: errors.New("controller: broker record without a broker")}
		}
		b := brokerFromWire(rec.Broker)
		if err := s.checkBroker(b); err != nil {
			return applied{}, applyResult{err: err}
		}
		if s.fixed { // a static list decides the inter-broker address
			b = fixedBrokerUpdate(s.brokers[b.ID], b)
		}
		s.brokers[b.ID] = b
		changes := registerBroker(s.topics, s.regs, b.ID, offset, rec.Unclean, rec.FencePrevious)
		return s.appliedOf(changes), applyResult{registration: s.regs[b.ID]}
	case kindFence:
		changes, err := fenceBroker(s.topics, s.regs, rec.BrokerID, rec.BrokerEpoch, rec.Unclean)
		if err != nil {
			return applied{}, applyResult{err: fmt.Errorf("%w: broker %d epoch %d", err, rec.BrokerID, rec.BrokerEpoch)}
		}
		return s.appliedOf(changes), applyResult{registration: s.regs[rec.BrokerID]}
	case kindLogDirOffline:
		changes, err := logDirOffline(s.topics, s.regs, rec.BrokerID, rec.BrokerEpoch, rec.Unclean)
		if err != nil {
			return applied{}, applyResult{err: fmt.Errorf("%w: broker %d epoch %d reporting its log dir offline", err, rec.BrokerID, rec.BrokerEpoch)}
		}
		return s.appliedOf(changes), applyResult{registration: s.regs[rec.BrokerID]}
	case kindHeartbeat:
		// Liveness only (the controller's session tracker); no state. It
		// is judged here, at its place in the log, and the result goes
		// back to the broker that sent it: a heartbeat behind a fence of
		// its registration is refused even when the sender had not yet
		// applied that fence, so that a resumed broker never renews its
		// lease on a leadership it lost (see KafkaController.Heartbeat).
		if err := checkHeartbeat(s.regs, rec.BrokerID, rec.BrokerEpoch); err != nil {
			return applied{}, applyResult{err: err}
		}
		return applied{}, applyResult{registration: s.regs[rec.BrokerID]}
	case kindTopic:
		w := rec.Topic
		if w == nil || w.Name == "" || len(w.Partitions) == 0 {
			return applied{}, applyResult{err: fmt.Errorf("%w: malformed topic record", ErrInvalidPartitions)}
		}
		if _, ok := s.topics[w.Name]; ok {
			return applied{}, applyResult{err: fmt.Errorf("%w: %s", ErrTopicExists, w.Name)}
		}
		id, err := parseTopicID(w.ID)
		if err != nil {
			return applied{}, applyResult{err: fmt.Errorf("%w: %v", ErrInvalidPartitions, err)}
		}
		ts := &TopicState{Name: w.Name, ID: id, Epoch: w.Epoch, Configs: cloneMap(w.Configs)}
		for i, wp := range w.Partitions {
			if wp.Partition != int32(i) || len(wp.Replicas) == 0 {
				return applied{}, applyResult{err: fmt.Errorf("%w: malformed partition %d of %s", ErrInvalidPartitions, i, w.Name)}
			}
			ts.Partitions = append(ts.Partitions, clonePartition(PartitionState{
				Partition: wp.Partition, Leader: wp.Leader, LeaderEpoch: wp.LeaderEpoch,
				PartitionEpoch: wp.PartitionEpoch, Replicas: wp.Replicas, ISR: wp.ISR,
			}))
			placeOnline(&ts.Partitions[i], s.regs)
		}
		s.topics[w.Name] = ts
		return applied{topics: []*TopicState{ts}}, applyResult{topic: cloneTopic(ts)}
	case kindAlterISR, kindElectLeader, kindElectPreferred:
		tp := TopicPartition{Topic: rec.TopicName, Partition: rec.Partition}
		ts, ok := s.topics[tp.Topic]
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(ts.Partitions) {
			return applied{}, applyResult{err: fmt.Errorf("%w: %s", ErrUnknownTopic, tp)}
		}
		ps := &ts.Partitions[tp.Partition]
		refuse := func(err error) (applied, applyResult) {
			return applied{}, applyResult{partition: clonePartition(*ps), err: err}
		}
		if err := checkPartitionEpochs(tp, ps, rec.LeaderEpoch, rec.PartitionEpoch); err != nil {
			return refuse(err)
		}
		// Work on a copy so that a refused change leaves no trace.
		next := clonePartition(*ps)
		var err error
		switch rec.Kind {
		case kindAlterISR:
			err = applyISR(tp, &next, rec.ISR)
			if err == nil && next.Leader != NoLeader && !slices.Contains(next.ISR, next.Leader) {
				// Only the leader proposes its ISR, and never without
				// itself: such a proposal was made for another leader
				// (chaos seed 249, a deposed leader's shrink sent at the
				// new leader's epochs).
				err = fmt.Errorf("%w: ISR %v of %s lacks its leader %d", ErrLeaderNotInISR, rec.ISR, tp, next.Leader)
			}
			for _, r := range next.ISR {
				if reg, ok := s.regs[r]; err == nil && ok && !reg.eligible() && !slices.Contains(ps.ISR, r) {
					err = fmt.Errorf("%w: %d joining the ISR of %s is fenced or its log dir is offline", ErrIneligibleReplica, r, tp)
				}
			}
		case kindElectLeader:
			err = applyLeader(tp, &next, rec.Leader)
		case kindElectPreferred:
			err = electPreferred(&next, s.regs)
		}
		if err != nil {
			return refuse(err)
		}
		if rec.Kind == kindElectPreferred && next.Leader == ps.Leader {
			return applied{}, applyResult{partition: clonePartition(*ps)}
		}
		*ps = next
		ps.PartitionEpoch++
		return applied{topics: []*TopicState{ts}}, applyResult{partition: clonePartition(*ps)}
	case kindDeleteTopic, kindCreatePartitions, kindAlterConfigs:
		// Topic administration (topicadmin.go).
		tc, err := topicChangeOf(rec)
		if err != nil {
			return applied{}, applyResult{err: err}
		}
		had := 0
		if ts, ok := s.topics[tc.name]; ok {
			had = len(ts.Partitions)
		}
		ts, err := applyTopicChange(s.topics, tc)
		if err != nil {
			return applied{}, applyResult{err: err}
		}
		if rec.Kind == kindCreatePartitions {
			for i := had; i < len(ts.Partitions); i++ {
				placeOnline(&ts.Partitions[i], s.regs)
			}
		}
		return applied{topics: []*TopicState{ts}}, applyResult{topic: cloneTopic(ts)}
	case kindPIDBlock:
		if rec.Block != s.nextPIDBlock {
			return applied{}, applyResult{err: fmt.Errorf("controller: producer id block %d already claimed", rec.Block)}
		}
		s.nextPIDBlock++
		return applied{}, applyResult{}
	default:
		return applied{}, applyResult{err: fmt.Errorf("controller: unknown record kind %q", rec.Kind)}
	}
}

func (s *clusterState) appliedOf(changes []partitionChange) applied {
	a := applied{changes: changes}
	for _, name := range changedTopics(changes) {
		a.topics = append(a.topics, s.topics[name])
	}
	return a
}

// placeOnline is a new partition's ISR and leader given the
// registrations: a replica whose broker reported its log dir offline
// starts outside the ISR (but as its last member) and does not lead; the
// first other in-sync replica leads. Only offline log dirs count, not
// fences: records written before log-dir reports existed must replay to
// the same state. A broker not registered here (a static cluster list)
// counts as online.
func placeOnline(ps *PartitionState, regs map[int32]BrokerRegistration) {
	offline := func(r int32) bool { reg, ok := regs[r]; return ok && reg.LogDirOffline }
	for _, r := range slices.Clone(ps.ISR) {
		if offline(r) && len(ps.ISR) > 1 {
			ps.ISR = slices.DeleteFunc(ps.ISR, func(x int32) bool { return x == r })
		}
	}
	if !offline(ps.Leader) {
		return
	}
	ps.Leader = NoLeader
	for _, r := range ps.Replicas {
		if slices.Contains(ps.ISR, r) && !offline(r) {
			ps.Leader = r
			return
		}
	}
}

// The partition-state rules of AlterISR and ElectLeader (the caller bumps
// the partition epoch after a successful change).

// checkPartitionEpochs refuses a change made against an older state.
func checkPartitionEpochs(tp TopicPartition, ps *PartitionState, leaderEpoch, partitionEpoch int32) error {
	if ps.LeaderEpoch != leaderEpoch || ps.PartitionEpoch != partitionEpoch {
		return fmt.Errorf("%w: %s at leader epoch %d partition epoch %d, asked %d/%d", ErrStaleEpoch, tp, ps.LeaderEpoch, ps.PartitionEpoch, leaderEpoch, partitionEpoch)
	}
	return nil
}

// applyISR sets the ISR, which must name replicas only.
func applyISR(tp TopicPartition, ps *PartitionState, isr []int32) error {
	for _, r := range isr {
		if !slices.Contains(ps.Replicas, r) {
			return fmt.Errorf("%w: %d in ISR of %s", ErrNotReplica, r, tp)
		}
	}
	ps.ISR = slices.Clone(isr)
	slices.Sort(ps.ISR)
	return nil
}

// applyLeader makes leader (a replica) the leader at the next leader epoch;
// a leader outside the ISR joins it (an unclean election, as asked).
func applyLeader(tp TopicPartition, ps *PartitionState, leader int32) error {
	if !slices.Contains(ps.Replicas, leader) {
		return fmt.Errorf("%w: %d for %s", ErrNotReplica, leader, tp)
	}
	ps.Leader = leader
	ps.LeaderEpoch++
	if !slices.Contains(ps.ISR, leader) {
		ps.ISR = append(ps.ISR, leader)
		slices.Sort(ps.ISR)
	}
	return nil
}

package broker

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-12 (Kafka 3.9's range).
//
// v0's empty topic list means every topic (v1+: a null list).
// __consumer_offsets is marked internal and is created only
// by the group coordinator (FindCoordinator), never by auto-creation;
// nor is __remote_wal_log_metadata auto-created (a cluster hosting it
// gets it from the remote WAL's own CreateTopics, compacted, with its
// partition count), so a client asking for it early cannot give it
// default configs.
// As Kafka: v10+ answer each topic's id (given at creation, kept in the
// controller state, new on recreation); v12 may ask by id, an unknown id
// getting UNKNOWN_TOPIC_ID with a null name; v10-11 asking by id or with
// a null name is INVALID_REQUEST on every topic asked (Kafka throws
// InvalidRequestException there).
//
// Brokers are listed with their address on the listener the request came
// in on (Kafka's behaviour with several listeners); a broker that has no
// such listener is left out.
//
// Where it differs from Kafka: no authorized operations (always -2147483648). Offline replicas are the fenced ones; a
// partition without a leader (-1) has LEADER_NOT_AVAILABLE. The controller id
// is the lowest broker id. Topics are auto-created with num.partitions and
// default.replication.factor when the request allows it (v4+; always for
// v1-3) and auto.create.topics.enable is on.

func (b *Broker) handleMetadata(cs *connState, req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	brokers := b.ctrl.Brokers()
	resp.ControllerID = -1
	listenerName := b.cfg.InterBrokerListenerName
	if cs.listener != nil {
		listenerName = cs.listener.cfg.Name
	}
	for _, bi := range brokers {
		// As Kafka: each broker's address on the listener the client
		// came in on; a broker without that listener is left out.
		ep, ok := bi.Endpoint(listenerName)
		if len(bi.Endpoints) == 0 && listenerName != b.cfg.InterBrokerListenerName {
			// Known only from a static list: that address is the
			// inter-broker listener's, not this one's.
			ok = false
		}
		if !ok {
			b.logger.Debug("metadata: broker has no endpoint on the listener", "broker_id", bi.ID, "listener", listenerName)
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = bi.ID, ep.Host, ep.Port
		if bi.Rack != "" {
			rack := bi.Rack
			mb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, mb)
		if resp.ControllerID == -1 || bi.ID < resp.ControllerID {
			resp.ControllerID = bi.ID
		}
	}
	cid := b.cfg.ClusterID
	resp.ClusterID = &cid
	resp.AuthorizedOperations = -2147483648

	regs := map[int32]BrokerRegistration{}
	for _, r := range b.ctrl.Registrations() {
		regs[r.ID] = r
	}
	var topics []TopicState
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		topics = b.ctrl.Topics()
	} else if req.Version >= 10 && req.Version < 12 && slices.ContainsFunc(req.Topics, func(rt kmsg.MetadataRequestTopic) bool {
		return rt.Topic == nil || TopicID(rt.TopicID) != TopicID{}
	}) {
		for _, rt := range req.Topics {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, mt)
		}
		return resp
	} else {
		allowCreate := (req.Version < 4 || req.AllowAutoTopicCreation) && !b.cfg.DisableAutoCreateTopics
		for _, rt := range req.Topics {
			if req.Version >= 12 && TopicID(rt.TopicID) != (TopicID{}) {
				ts, ok := b.topicByID(rt.TopicID)
				if !ok {
					mt := kmsg.NewMetadataResponseTopic()
					mt.TopicID, mt.ErrorCode = rt.TopicID, kerr.UnknownTopicID.Code
					resp.Topics = append(resp.Topics, mt)
					continue
				}
				topics = append(topics, ts)
				continue
			}
			if rt.Topic == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.ErrorCode = kerr.InvalidTopicException.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			name := *rt.Topic
			ts, ok := b.ctrl.Topic(name)
			if !ok && allowCreate && name != OffsetsTopic && name != RemoteWALMetadataTopic {
				var err error
				ts, err = b.autoCreate(name)
				ok = err == nil
				if err != nil && !errors.Is(err, ErrTopicExists) {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic = &name
					mt.ErrorCode = createErrorCode(err).Code
					resp.Topics = append(resp.Topics, mt)
					continue
				}
				if !ok {
					ts, ok = b.ctrl.Topic(name)
				}
			}
			if !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = &name
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			topics = append(topics, ts)
		}
	}
	for _, ts := range topics {
		name := ts.Name
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = &name, ts.ID
		mt.IsInternal = name == OffsetsTopic
		mt.AuthorizedOperations = -2147483648
		for _, ps := range ts.Partitions {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.LeaderEpoch = ps.Partition, ps.Leader, ps.LeaderEpoch
			mp.Replicas, mp.ISR = ps.Replicas, ps.ISR
			mp.OfflineReplicas = offlineReplicas(ps.Replicas, regs)
			if b.dir.offline() && slices.Contains(ps.Replicas, b.cfg.BrokerID) && !slices.Contains(mp.OfflineReplicas, b.cfg.BrokerID) {
				// Its only log dir is offline: what Kafka reports of a
				// replica on a failed dir.
				mp.OfflineReplicas = append(mp.OfflineReplicas, b.cfg.BrokerID)
			}
			if ps.Leader == NoLeader {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// autoCreate creates a topic with the broker defaults.
func (b *Broker) autoCreate(name string) (TopicState, error) {
	if err := checkTopicName(name); err != nil {
		return TopicState{}, errInvalidTopic
	}
	rf := min(int(b.cfg.DefaultReplicationFactor), len(b.ctrl.Brokers()))
	ts, err := b.ctrl.CreateTopic(TopicSpec{Name: name, Partitions: b.cfg.NumPartitions, ReplicationFactor: int16(rf)})
	if err == nil {
		b.logger.Info("auto-created topic", "topic", name, "partitions", b.cfg.NumPartitions, "replication_factor", rf)
	}
	return ts, err
}

var errInvalidTopic = errors.New("broker: invalid topic name")

// createErrorCode maps controller errors to Kafka's codes.
func createErrorCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, ErrTopicExists):
		return kerr.TopicAlreadyExists
	case errors.Is(err, ErrInvalidPartitions):
		return kerr.InvalidPartitions
	case errors.Is(err, ErrInvalidReplicationFactor):
		return kerr.InvalidReplicationFactor
	case errors.Is(err, errInvalidTopic):
		return kerr.InvalidTopicException
	case errors.Is(err, errInvalidConfig):
		return kerr.InvalidConfig
	default:
		return kerr.UnknownServerError
	}
}

// offlineReplicas are the replicas whose broker is registered and fenced
// or has reported its log dir offline.
func offlineReplicas(replicas []int32, regs map[int32]BrokerRegistration) []int32 {
	out := []int32{}
	for _, r := range replicas {
		if reg, ok := regs[r]; ok && !reg.eligible() {
			out = append(out, r)
		}
	}
	return out
}

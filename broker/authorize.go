package broker

import (
	"reflect"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// principal is the connection's identity for ACLs.
func (cs *connState) principal() string {
	switch {
	case cs.sasl != nil && cs.sasl.authenticated():
		return "User:" + cs.sasl.principal
	case cs.tlsPrincipal != "":
		return cs.tlsPrincipal
	}
	return AnonymousPrincipal
}

// authorize applies the ACLs to a request before its handler runs, as
// Kafka's KafkaApis does per API: topics the principal may not touch are
// taken out of the request and answered TOPIC_AUTHORIZATION_FAILED
// (fix adds them to the handler's response); a request refused whole
// gets deny. Keys without a rule here are refused to all but super users.
// Without an Authorizer everything passes.
func (b *Broker) authorize(cs *connState, req kmsg.Request) (deny kmsg.Response, fix func(kmsg.Response), ok bool) {
	a := b.cfg.Authorizer
	if a == nil {
		return nil, nil, true
	}
	who := cs.principal()
	if a.IsSuperUser(who) {
		return nil, nil, true
	}
	topicOK := func(op, topic string) bool { return a.TopicAllowed(who, op, topic) }
	denied := func(what string, topics []string) {
		if len(topics) > 0 {
			b.logger.Info("authorization failed", "principal", who, "remote", cs.remote, "api", what, "topics", topics)
		}
	}
	code := kerr.TopicAuthorizationFailed.Code
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest, *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest:
		return nil, nil, true
	case *kmsg.ProduceRequest:
		return nil, refuse(denied, "Produce", &r.Topics, func(t kmsg.ProduceRequestTopic) bool { return topicOK(OpWrite, t.Topic) },
			func(t kmsg.ProduceRequestTopic) string { return t.Topic },
			func(resp kmsg.Response, t kmsg.ProduceRequestTopic) {
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic = t.Topic
				rt.Partitions = mapParts(t.Partitions, func(p kmsg.ProduceRequestTopicPartition) kmsg.ProduceResponseTopicPartition {
					rp := kmsg.NewProduceResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, code
					return rp
				})
				pr := resp.(*kmsg.ProduceResponse)
				pr.Topics = append(pr.Topics, rt)
			}), true
	case *kmsg.FetchRequest:
		replica := r.ReplicaID
		if r.Version >= 15 {
			replica = r.ReplicaState.ID
		}
		// v13+ name topics by id: authorize the name the id resolves to;
		// an unknown id passes, to be answered UNKNOWN_TOPIC_ID.
		fetchTopic := func(t kmsg.FetchRequestTopic) (string, bool) {
			if r.Version < 13 {
				return t.Topic, true
			}
			ts, ok := b.topicByID(t.TopicID)
			return ts.Name, ok
		}
		if replica >= 0 {
			if a.ClusterAllowed(who, OpClusterAction) {
				return nil, nil, true
			}
			b.logger.Warn("authorization failed: replica fetch without ClusterAction", "principal", who, "remote", cs.remote)
			resp := r.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil, true
		}
		return nil, refuse(denied, "Fetch", &r.Topics, func(t kmsg.FetchRequestTopic) bool {
			name, known := fetchTopic(t)
			return !known || topicOK(OpRead, name)
		},
			func(t kmsg.FetchRequestTopic) string { name, _ := fetchTopic(t); return name },
			func(resp kmsg.Response, t kmsg.FetchRequestTopic) {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				rt.Partitions = mapParts(t.Partitions, func(p kmsg.FetchRequestTopicPartition) kmsg.FetchResponseTopicPartition {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.HighWatermark, rp.LastStableOffset = p.Partition, code, -1, -1
					return rp
				})
				fr := resp.(*kmsg.FetchResponse)
				fr.Topics = append(fr.Topics, rt)
			}), true
	case *kmsg.ListOffsetsRequest:
		return nil, refuse(denied, "ListOffsets", &r.Topics, func(t kmsg.ListOffsetsRequestTopic) bool { return topicOK(OpDescribe, t.Topic) },
			func(t kmsg.ListOffsetsRequestTopic) string { return t.Topic },
			func(resp kmsg.Response, t kmsg.ListOffsetsRequestTopic) {
				rt := kmsg.NewListOffsetsResponseTopic()
				rt.Topic = t.Topic
				rt.Partitions = mapParts(t.Partitions, func(p kmsg.ListOffsetsRequestTopicPartition) kmsg.ListOffsetsResponseTopicPartition {
					rp := kmsg.NewListOffsetsResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, code
					return rp
				})
				lr := resp.(*kmsg.ListOffsetsResponse)
				lr.Topics = append(lr.Topics, rt)
			}), true
	case *kmsg.OffsetForLeaderEpochRequest:
		if r.ReplicaID >= 0 && !a.ClusterAllowed(who, OpClusterAction) {
			b.logger.Warn("authorization failed: replica OffsetForLeaderEpoch without ClusterAction", "principal", who, "remote", cs.remote)
			r.ReplicaID = -1 // answered as for a consumer, topic by topic
		}
		if r.ReplicaID >= 0 {
			return nil, nil, true
		}
		return nil, refuse(denied, "OffsetForLeaderEpoch", &r.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) bool { return topicOK(OpDescribe, t.Topic) },
			func(t kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic },
			func(resp kmsg.Response, t kmsg.OffsetForLeaderEpochRequestTopic) {
				rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
				rt.Topic = t.Topic
				rt.Partitions = mapParts(t.Partitions, func(p kmsg.OffsetForLeaderEpochRequestTopicPartition) kmsg.OffsetForLeaderEpochResponseTopicPartition {
					rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
					return rp
				})
				or := resp.(*kmsg.OffsetForLeaderEpochResponse)
				or.Topics = append(or.Topics, rt)
			}), true
	case *kmsg.MetadataRequest:
		return nil, b.authorizeMetadata(r, who, topicOK), true
	case *kmsg.CreateTopicsRequest:
		return nil, refuse(denied, "CreateTopics", &r.Topics, func(t kmsg.CreateTopicsRequestTopic) bool {
			return topicOK(OpCreate, t.Topic) || a.ClusterAllowed(who, OpCreate)
		},
			func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic },
			func(resp kmsg.Response, t kmsg.CreateTopicsRequestTopic) {
				rt := kmsg.NewCreateTopicsResponseTopic()
				rt.Topic, rt.ErrorCode = t.Topic, code
				cr := resp.(*kmsg.CreateTopicsResponse)
				cr.Topics = append(cr.Topics, rt)
			}), true
	case *kmsg.DescribeConfigsRequest:
		return nil, refuse(denied, "DescribeConfigs", &r.Resources, func(res kmsg.DescribeConfigsRequestResource) bool {
			if res.ResourceType == kmsg.ConfigResourceTypeTopic {
				return topicOK(OpDescribeConfigs, res.ResourceName)
			}
			return a.ClusterAllowed(who, OpDescribeConfigs)
		},
			func(res kmsg.DescribeConfigsRequestResource) string { return res.ResourceName },
			func(resp kmsg.Response, res kmsg.DescribeConfigsRequestResource) {
				rr := kmsg.NewDescribeConfigsResponseResource()
				rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
				rr.ErrorCode = code
				if res.ResourceType != kmsg.ConfigResourceTypeTopic {
					rr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				}
				dr := resp.(*kmsg.DescribeConfigsResponse)
				dr.Resources = append(dr.Resources, rr)
			}), true
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID == nil && a.ClusterAllowed(who, OpIdempotentWrite) {
			return nil, nil, true
		}
		b.logger.Info("authorization failed", "principal", who, "remote", cs.remote, "api", "InitProducerID")
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		if r.TransactionalID != nil {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		}
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil, true
	case *kmsg.FindCoordinatorRequest:
		if r.CoordinatorType != 0 { // transactions: not served anyway
			break
		}
		keys := r.CoordinatorKeys
		if r.Version < 4 {
			keys = []string{r.CoordinatorKey}
		}
		var out []string
		keys, out = splitTopics(keys, func(g string) bool { return a.GroupAllowed(who, OpDescribe, g) })
		if len(out) == 0 {
			return nil, nil, true
		}
		denied("FindCoordinator", out)
		gcode := kerr.GroupAuthorizationFailed.Code
		if r.Version < 4 {
			resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.ErrorCode, resp.NodeID = gcode, -1
			return resp, nil, true
		}
		r.CoordinatorKeys = keys
		return nil, func(resp kmsg.Response) {
			fr := resp.(*kmsg.FindCoordinatorResponse)
			for _, g := range out {
				c := kmsg.NewFindCoordinatorResponseCoordinator()
				c.Key, c.NodeID, c.ErrorCode = g, -1, gcode
				fr.Coordinators = append(fr.Coordinators, c)
			}
		}, true
	case *kmsg.JoinGroupRequest:
		return b.authorizeGroup(cs, who, req, r.Group)
	case *kmsg.SyncGroupRequest:
		return b.authorizeGroup(cs, who, req, r.Group)
	case *kmsg.HeartbeatRequest:
		return b.authorizeGroup(cs, who, req, r.Group)
	case *kmsg.LeaveGroupRequest:
		return b.authorizeGroup(cs, who, req, r.Group)
	case *kmsg.OffsetCommitRequest:
		return b.authorizeGroup(cs, who, req, r.Group)
	case *kmsg.OffsetFetchRequest:
		if r.Version < 8 {
			return b.authorizeGroup(cs, who, req, r.Group)
		}
		return nil, refuse(denied, "OffsetFetch", &r.Groups, func(g kmsg.OffsetFetchRequestGroup) bool { return a.GroupAllowed(who, OpDescribe, g.Group) },
			func(g kmsg.OffsetFetchRequestGroup) string { return g.Group },
			func(resp kmsg.Response, g kmsg.OffsetFetchRequestGroup) {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
				or := resp.(*kmsg.OffsetFetchResponse)
				or.Groups = append(or.Groups, rg)
			}), true
	}
	// No rule for this key: super users only.
	b.logger.Warn("authorization failed: no ACL rule for this API", "principal", who, "remote", cs.remote, "api", kmsg.NameForKey(req.Key()))
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if !setTopErrorCode(resp, kerr.ClusterAuthorizationFailed.Code) {
		return nil, nil, false // no way to say no in this response: close
	}
	return resp, nil, true
}

// authorizedDispatch is dispatch behind the ACLs.
func (b *Broker) authorizedDispatch(cs *connState, req kmsg.Request) (kmsg.Response, bool) {
	deny, fix, ok := b.authorize(cs, req)
	switch {
	case !ok:
		return nil, false
	case deny != nil:
		return deny, true
	case fix == nil:
		return b.dispatch(cs, req)
	}
	resp, keep := b.dispatch(cs, req)
	if resp != nil {
		fix(resp)
	}
	if d := cs.deferred; d != nil {
		cs.deferred = func() kmsg.Response {
			r := d()
			if r != nil {
				fix(r)
			}
			return r
		}
	}
	return resp, keep
}

// authorizeGroup lets a one-group request through with Read on the group,
// else answers it GROUP_AUTHORIZATION_FAILED (topics named in offset
// commits and fetches are not checked separately).
func (b *Broker) authorizeGroup(cs *connState, who string, req kmsg.Request, group string) (kmsg.Response, func(kmsg.Response), bool) {
	if b.cfg.Authorizer.GroupAllowed(who, OpRead, group) {
		return nil, nil, true
	}
	b.logger.Info("authorization failed", "principal", who, "remote", cs.remote, "api", kmsg.NameForKey(req.Key()), "group", group)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if !setTopErrorCode(resp, kerr.GroupAuthorizationFailed.Code) {
		return nil, nil, false
	}
	return resp, nil, true
}

// authorizeMetadata: topics the principal may not describe are left out
// of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when
// named; a named topic that does not exist is created only with Create,
// else answered UNKNOWN_TOPIC_OR_PARTITION (as Kafka).
func (b *Broker) authorizeMetadata(r *kmsg.MetadataRequest, who string, topicOK func(op, topic string) bool) func(kmsg.Response) {
	if r.Topics == nil {
		return func(resp kmsg.Response) {
			mr := resp.(*kmsg.MetadataResponse)
			mr.Topics = slices.DeleteFunc(mr.Topics, func(t kmsg.MetadataResponseTopic) bool {
				return t.Topic == nil || !topicOK(OpDescribe, *t.Topic)
			})
		}
	}
	type refusal struct {
		name string
		id   [16]byte // asked by id (v12): answered with a null name, as Kafka
		code int16
	}
	var out []refusal
	keep := r.Topics[:0]
	for _, t := range r.Topics {
		if t.Topic == nil {
			// By id (v12): authorize the name it resolves to; an unknown
			// id passes, to be answered UNKNOWN_TOPIC_ID.
			if ts, ok := b.topicByID(t.TopicID); ok && !topicOK(OpDescribe, ts.Name) {
				out = append(out, refusal{id: t.TopicID, code: kerr.TopicAuthorizationFailed.Code})
				continue
			}
			keep = append(keep, t)
			continue
		}
		name := *t.Topic
		_, exists := b.ctrl.Topic(name)
		switch {
		case !topicOK(OpDescribe, name):
			out = append(out, refusal{name: name, code: kerr.TopicAuthorizationFailed.Code})
		case !exists && !topicOK(OpCreate, name):
			out = append(out, refusal{name: name, code: kerr.UnknownTopicOrPartition.Code})
		default:
			keep = append(keep, t)
		}
	}
	r.Topics = keep
	if len(out) > 0 {
		b.logger.Info("authorization failed", "principal", who, "api", "Metadata", "topics", len(out))
	}
	return func(resp kmsg.Response) {
		mr := resp.(*kmsg.MetadataResponse)
		for _, o := range out {
			mt := kmsg.NewMetadataResponseTopic()
			name := o.name
			mt.Topic, mt.TopicID, mt.ErrorCode = &name, o.id, o.code
			if o.name == "" {
				mt.Topic = nil
			}
			mr.Topics = append(mr.Topics, mt)
		}
	}
}

// refuse takes the items of *items that ok refuses out of the request,
// logs them (denied, under api) and returns the fix that answers each of
// them in the handler's response (answer).
func refuse[T any](denied func(string, []string), api string, items *[]T, ok func(T) bool, name func(T) string, answer func(kmsg.Response, T)) func(kmsg.Response) {
	var out []T
	*items, out = splitTopics(*items, ok)
	denied(api, names(out, name))
	return func(resp kmsg.Response) {
		for _, t := range out {
			answer(resp, t)
		}
	}
}

// mapParts answers every partition of a refused topic (nil for none, as
// appending to a nil slice gives).
func mapParts[P, R any](in []P, answer func(P) R) []R {
	var out []R
	for _, p := range in {
		out = append(out, answer(p))
	}
	return out
}

// splitTopics keeps the items ok accepts and returns the others.
func splitTopics[T any](in []T, ok func(T) bool) (kept, refused []T) {
	for _, t := range in {
		if ok(t) {
			kept = append(kept, t)
		} else {
			refused = append(refused, t)
		}
	}
	return kept, refused
}

func names[T any](in []T, name func(T) string) []string {
	var out []string
	for _, t := range in {
		out = append(out, name(t))
	}
	return out
}

// setTopErrorCode sets a response's top-level ErrorCode field, if it has one.
func setTopErrorCode(r kmsg.Response, code int16) bool {
	v := reflect.ValueOf(r)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	f := v.Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 || !f.CanSet() {
		return false
	}
	f.SetInt(int64(code))
	return true
}

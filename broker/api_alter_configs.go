package broker

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-2.
//
// As Kafka: a topic resource's config set is replaced by the one given
// (keys left out return to their defaults), checked as CreateTopics checks
// configs (an unknown key or a bad value gets INVALID_CONFIG with a
// message naming the key); validate-only changes nothing; the new configs
// reach every open replica of the topic (segment, retention, message size,
// min.insync.replicas; topiclifecycle.go).
// Where it differs from Kafka: broker resources are refused with
// INVALID_REQUEST (kwal's broker configs are static: server.properties);
// remote.wal.storage.enable cannot change after creation (INVALID_CONFIG).

func (b *Broker) handleAlterConfigs(req *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		e, msg := b.alterTopicConfigs(rr.ResourceType, rr.ResourceName, req.ValidateOnly, func(map[string]string) (map[string]string, error) {
			next := map[string]string{}
			for _, c := range rr.Configs {
				if c.Value != nil {
					next[c.Name] = *c.Value
				}
			}
			return next, nil
		})
		if e != nil {
			sr.ErrorCode, sr.ErrorMessage = e.Code, &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

var errImmutableConfig = fmt.Errorf("%w: %s cannot change after the topic is created", errInvalidConfig, TopicConfigRemoteWAL)

// alterTopicConfigs checks and applies edit to a topic's configs; it
// returns the error to answer with, if any, and its message.
func (b *Broker) alterTopicConfigs(rtype kmsg.ConfigResourceType, name string, validateOnly bool, edit TopicConfigEdit) (*kerr.Error, string) {
	if rtype != kmsg.ConfigResourceTypeTopic {
		msg := fmt.Sprintf("resource type %s cannot be altered: only topic configs are dynamic in kwal (broker configs come from server.properties)", rtype)
		b.logger.Info("alter configs refused", "resource_type", rtype, "resource", name, "err", msg)
		return kerr.InvalidRequest, msg
	}
	checked := func(cur map[string]string) (map[string]string, error) {
		next, err := edit(cur)
		if err != nil {
			return nil, err
		}
		m1, _ := replicationModeOf(cur)
		if m2, _ := replicationModeOf(next); m1 != m2 {
			return nil, errImmutableConfig
		}
		// min.insync.replicas is not held to the replication factor here
		// (only at creation): as in Kafka, AlterConfigs may raise it above
		// the ISR, and acks=all produces then get NOT_ENOUGH_REPLICAS.
		if err := b.checkTopicConfigs(next, math.MaxInt16); err != nil {
			return nil, err
		}
		return next, nil
	}
	var err error
	if validateOnly {
		ts, ok := b.ctrl.Topic(name)
		if !ok {
			err = fmt.Errorf("%w: %s", ErrUnknownTopic, name)
		} else {
			_, err = checked(maps.Clone(ts.Configs))
		}
	} else {
		var ts TopicState
		if ts, err = b.ctrl.AlterTopicConfigs(name, checked); err == nil {
			b.logger.Info("altered topic configs", "topic", name, "topic_epoch", ts.Epoch, "configs", ts.Configs)
		}
	}
	if err == nil {
		return nil, ""
	}
	b.logger.Info("alter configs refused", "topic", name, "err", err)
	if errors.Is(err, errInvalidConfig) {
		return kerr.InvalidConfig, err.Error()
	}
	return adminErrorCode(err), err.Error()
}

// IncrementalAlterConfigs: v0-1.
//
// As Kafka: SET and DELETE (back to the default) on any topic config,
// APPEND and SUBTRACT on list configs (cleanup.policy; on any other key
// INVALID_CONFIG); the result is checked as CreateTopics checks configs
// (INVALID_CONFIG naming the key) and applied to open replicas, as
// AlterConfigs. Broker resources: INVALID_REQUEST, as AlterConfigs.

// listTopicConfigs are the topic configs whose value is a comma-separated list.
var listTopicConfigs = map[string]bool{"cleanup.policy": true}

func (b *Broker) handleIncrementalAlterConfigs(req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		e, msg := b.alterTopicConfigs(rr.ResourceType, rr.ResourceName, req.ValidateOnly, func(cur map[string]string) (map[string]string, error) {
			return applyConfigOps(cur, rr.Configs, b.topicConfigDefaults())
		})
		if e != nil {
			sr.ErrorCode, sr.ErrorMessage = e.Code, &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// applyConfigOps applies incremental operations to a config set (defaults
// give list configs their starting value). Pure.
func applyConfigOps(cur map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, defaults map[string]string) (map[string]string, error) {
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]string{}
	}
	for _, op := range ops {
		val := ""
		if op.Value != nil {
			val = *op.Value
		}
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, fmt.Errorf("%w: %s: SET without a value", errInvalidConfig, op.Name)
			}
			next[op.Name] = val
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if !listTopicConfigs[op.Name] {
				return nil, fmt.Errorf("%w: %s is not a list config: %s is not allowed", errInvalidConfig, op.Name, op.Op)
			}
			base, ok := next[op.Name]
			if !ok {
				base = defaults[op.Name]
			}
			items := splitList(base)
			for _, v := range splitList(val) {
				has := slices.Contains(items, v)
				if op.Op == kmsg.IncrementalAlterConfigOpAppend && !has {
					items = append(items, v)
				}
				if op.Op == kmsg.IncrementalAlterConfigOpSubtract && has {
					items = slices.DeleteFunc(items, func(s string) bool { return s == v })
				}
			}
			next[op.Name] = strings.Join(items, ",")
		default:
			return nil, fmt.Errorf("%w: %s: unknown operation %d", errInvalidConfig, op.Name, op.Op)
		}
	}
	return next, nil
}

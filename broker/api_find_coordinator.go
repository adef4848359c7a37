package broker

import (
	"github.com/kwal/kwal/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-6 (Kafka 3.9's range).
//
// Group keys (key type 0) are answered with the leader of the group's
// __consumer_offsets partition, which is created on first use. Where it
// differs from Kafka: there is no transaction coordinator, so transaction
// keys (type 1) get INVALID_REQUEST with a message, as any other
// unsupported key type does, instead of a coordinator. Share-group keys
// (type 2, v6, KIP-932) get INVALID_REQUEST as on a Kafka 3.9 broker whose
// share groups are off (its default). Batched keys: v4+.

const (
	coordinatorKeyGroup       = 0
	coordinatorKeyTransaction = 1
	coordinatorKeyShare       = 2
)

func (b *Broker) handleFindCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Port = -1, -1
		code, msg := b.findCoordinator(req.CoordinatorType, key, &c)
		if code != nil {
			c.ErrorCode = code.Code
			if msg == "" {
				msg = code.Message
			}
			c.ErrorMessage = &msg
			b.logger.Debug("find coordinator", "key", key, "type", req.CoordinatorType, "err", code.Message, "detail", msg)
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
	}
	return resp
}

func (b *Broker) findCoordinator(keyType int8, key string, c *kmsg.FindCoordinatorResponseCoordinator) (*kerr.Error, string) {
	switch keyType {
	case coordinatorKeyGroup:
	case coordinatorKeyTransaction:
		return kerr.InvalidRequest, "kwal has no transaction coordinator: transactions are not supported"
	case coordinatorKeyShare:
		return kerr.InvalidRequest, "share groups (KIP-932) are not enabled"
	default:
		return kerr.InvalidRequest, "unsupported coordinator key type"
	}
	ts, err := b.ensureOffsetsTopic()
	if err != nil {
		b.logger.Warn("create __consumer_offsets", "err", err)
		return kerr.CoordinatorNotAvailable, err.Error()
	}
	p := group.PartitionFor(key, int32(len(ts.Partitions)))
	var leader int32 = -1
	for _, ps := range ts.Partitions {
		if ps.Partition == p {
			leader = ps.Leader
		}
	}
	for _, bi := range b.ctrl.Brokers() {
		if bi.ID == leader {
			c.NodeID, c.Host, c.Port = bi.ID, bi.Host, bi.Port
			return nil, ""
		}
	}
	return kerr.CoordinatorNotAvailable, ""
}

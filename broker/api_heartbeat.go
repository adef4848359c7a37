package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-4.
//
// As Kafka: REBALANCE_IN_PROGRESS while the group prepares a rebalance,
// ILLEGAL_GENERATION for an old generation, FENCED_INSTANCE_ID for a
// replaced static member (v3+).

func (b *Broker) handleHeartbeat(req *kmsg.HeartbeatRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	inst := ""
	if req.InstanceID != nil {
		inst = *req.InstanceID
	}
	err := kerr.InvalidGroupID
	if req.Group != "" {
		err = b.groups.coord.Heartbeat(req.Group, req.MemberID, inst, req.Generation)
	}
	if err != nil {
		resp.ErrorCode = err.Code
	}
	return resp
}

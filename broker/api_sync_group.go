package broker

import (
	"bytes"
	"github.com/kwal/kwal/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup: v0-5.
//
// As Kafka: the leader's SyncGroup carries every member's assignment;
// followers wait for it; nobody is answered before the generation and its
// assignment are replicated in __consumer_offsets (a failed write answers
// its error and rebalances). v5 checks the protocol type and name
// (INCONSISTENT_GROUP_PROTOCOL).

func (b *Broker) handleSyncGroup(cs *connState, req *kmsg.SyncGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	sr := group.SyncRequest{MemberID: req.MemberID, Generation: req.Generation, Assignments: map[string][]byte{}}
	if req.InstanceID != nil {
		sr.InstanceID = *req.InstanceID
	}
	if req.ProtocolType != nil {
		sr.ProtocolType = *req.ProtocolType
	}
	if req.Protocol != nil {
		sr.Protocol = *req.Protocol
	}
	for _, a := range req.GroupAssignment {
		// Copied: decoded bytes alias the connection's read buffer.
		sr.Assignments[a.MemberID] = bytes.Clone(a.MemberAssignment)
	}
	var r group.SyncResult
	if req.Group == "" {
		r.Err = kerr.InvalidGroupID
	} else {
		ctx, cancel := b.groupCtx(cs, 0)
		r = b.groups.coord.Sync(ctx, req.Group, sr)
		cancel()
	}
	resp.MemberAssignment = []byte{}
	if r.Err != nil {
		resp.ErrorCode = r.Err.Code
		b.logger.Debug("sync group", "group", req.Group, "member", req.MemberID, "err", r.Err.Message)
		return resp
	}
	resp.MemberAssignment = r.Assignment
	ptype, proto := r.ProtocolType, r.Protocol
	resp.ProtocolType, resp.Protocol = &ptype, &proto
	return resp
}

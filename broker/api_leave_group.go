package broker

import (
	"github.com/kwal/kwal/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup: v0-5.
//
// v0-2 name one member; v3+ a batch of members by member id and/or
// group.instance.id, each answered on its own (KIP-345).

func (b *Broker) handleLeaveGroup(req *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	var leaving []group.LeaveMember
	if req.Version < 3 {
		leaving = []group.LeaveMember{{MemberID: req.MemberID}}
	}
	for _, m := range req.Members {
		lm := group.LeaveMember{MemberID: m.MemberID}
		if m.InstanceID != nil {
			lm.InstanceID = *m.InstanceID
		}
		leaving = append(leaving, lm)
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	top, errs := b.groups.coord.Leave(req.Group, leaving)
	if top != nil {
		resp.ErrorCode = top.Code
		return resp
	}
	if req.Version < 3 {
		if errs[0] != nil {
			resp.ErrorCode = errs[0].Code
		}
		return resp
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		if errs[i] != nil {
			rm.ErrorCode = errs[i].Code
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

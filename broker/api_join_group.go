package broker

import (
	"bytes"
	"net"
	"time"

	"github.com/kwal/kwal/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup: v0-9.
//
// As Kafka (classic protocol): v4+ new dynamic members get
// MEMBER_ID_REQUIRED and a member id (KIP-394); v5+ static members
// (group.instance.id, KIP-345); the answer waits for the join phase, at
// most the rebalance timeout. Where it differs: SkipAssignment (v9) is
// never set: a static leader that restarts triggers a rebalance.

func (b *Broker) handleJoinGroup(cs *connState, req *kmsg.JoinGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	jr := group.JoinRequest{
		MemberID: req.MemberID, ClientID: cs.clientID, ClientHost: clientHost(cs.remote),
		ProtocolType:         req.ProtocolType,
		SessionTimeout:       time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		RequireKnownMemberID: req.Version >= 4,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	if req.InstanceID != nil {
		jr.InstanceID = *req.InstanceID
	}
	// Copied: decoded bytes alias the connection's read buffer, which the
	// next request overwrites; the group keeps these.
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	var r group.JoinResult
	if req.Group == "" {
		r = group.JoinResult{Err: kerr.InvalidGroupID, Generation: -1, MemberID: req.MemberID}
	} else {
		// Bounded by the rebalance timeout plus a margin: the join phase
		// ends by then.
		ctx, cancel := b.groupCtx(cs, jr.RebalanceTimeout+groupWaitMargin)
		r = b.groups.coord.Join(ctx, req.Group, jr)
		cancel()
	}
	resp.Generation, resp.LeaderID, resp.MemberID = r.Generation, r.LeaderID, r.MemberID
	if r.Err != nil {
		resp.ErrorCode = r.Err.Code
		b.logger.Debug("join group", "group", req.Group, "member", req.MemberID, "err", r.Err.Message)
		return resp
	}
	proto, ptype := r.Protocol, r.ProtocolType
	resp.Protocol, resp.ProtocolType = &proto, &ptype
	for _, m := range r.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.ProtocolMetadata = m.MemberID, m.Metadata
		if m.InstanceID != "" {
			inst := m.InstanceID
			rm.InstanceID = &inst
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// clientHost is Kafka's client host: "/" and the address.
func clientHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return "/" + host
}

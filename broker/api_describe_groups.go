package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-5.
//
// As Kafka: an unknown group is described as Dead with no members;
// member metadata and assignments are shown only when the group is
// Stable. Where it differs: no authorized operations (v3+, always
// -2147483648).

func (b *Broker) handleDescribeGroups(req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		rg.AuthorizedOperations = -2147483648
		d, err := b.groups.coord.Describe(id)
		if err != nil {
			rg.ErrorCode = err.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.State, rg.ProtocolType, rg.Protocol = d.State.String(), d.ProtocolType, d.Protocol
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.ClientID, rm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
			if m.InstanceID != "" {
				inst := m.InstanceID
				rm.InstanceID = &inst
			}
			rm.ProtocolMetadata, rm.MemberAssignment = orEmpty(m.Metadata), orEmpty(m.Assignment)
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

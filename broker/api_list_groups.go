package broker

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-5.
//
// Lists the groups this broker coordinates, as Kafka (a client asks every
// broker). StatesFilter (v4+) matches Kafka's state names, case
// insensitively; every group is of type "classic" (v5 TypesFilter).

func (b *Broker) handleListGroups(req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	match := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	for _, g := range b.groups.coord.List() {
		if !match(req.StatesFilter, g.State.String()) || !match(req.TypesFilter, "classic") {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.ID, g.ProtocolType, g.State.String(), "classic"
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

package group

import (
	"time"
)

// Record returns what the group persists: its generation and members.
func (g *Group) Record() GroupRecord {
	r := GroupRecord{ProtocolType: g.protoType, Generation: g.generation, Protocol: g.protocol, Leader: g.leader, StateSince: g.stateSince}
	for _, id := range g.order {
		m := g.members[id]
		r.Members = append(r.Members, MemberRecord{
			MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionTimeout: m.sessionTimeout, RebalanceTimeout: m.rebalanceTimeout,
			Metadata: m.metadataFor(g.protocol), Assignment: m.assignment,
		})
	}
	return r
}

// Restore returns the group a coordinator loads from its record: Stable
// with the record's members (each must heartbeat within its session
// timeout from now), or Empty.
func Restore(id string, rec GroupRecord, limits Limits, newID func(string) string, now time.Time) *Group {
	g := New(id, limits, newID, now)
	g.generation, g.protoType, g.protocol, g.leader = rec.Generation, rec.ProtocolType, rec.Protocol, rec.Leader
	for _, mr := range rec.Members {
		m := &member{
			id: mr.MemberID, instanceID: mr.InstanceID, clientID: mr.ClientID, clientHost: mr.ClientHost,
			sessionTimeout: mr.SessionTimeout, rebalanceTimeout: mr.RebalanceTimeout,
			protocolType: rec.ProtocolType, protocols: []Protocol{{Name: rec.Protocol, Metadata: mr.Metadata}},
			assignment: mr.Assignment, deadline: now.Add(mr.SessionTimeout),
		}
		g.members[m.id] = m
		g.order = append(g.order, m.id)
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
	}
	g.stateSince = now
	if len(g.members) > 0 {
		g.state = Stable
	} else {
		g.protocol, g.leader = "", ""
		if !rec.StateSince.IsZero() {
			// Empty since then: offset retention counts from it.
			g.stateSince = rec.StateSince
		}
	}
	return g
}

// MemberInfo is a member as DescribeGroups shows it.
type MemberInfo struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Metadata, Assignment                       []byte
}

// Members lists the members in join order; metadata and assignments
// only when the group is Stable, as Kafka.
func (g *Group) Members() []MemberInfo {
	var out []MemberInfo
	for _, id := range g.order {
		m := g.members[id]
		mi := MemberInfo{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		if g.state == Stable {
			mi.Metadata, mi.Assignment = m.metadataFor(g.protocol), m.assignment
		}
		out = append(out, mi)
	}
	return out
}

// SelectedMetadata returns every member's metadata for the selected
// protocol (OffsetDelete reads consumer subscriptions from it).
func (g *Group) SelectedMetadata() [][]byte {
	var out [][]byte
	for _, id := range g.order {
		out = append(out, g.members[id].metadataFor(g.protocol))
	}
	return out
}

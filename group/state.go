package group

import (
	"bytes"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a classic group's state, named as Kafka names it.
type State int8

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// Protocol is one assignment protocol a member supports, opaque to the
// coordinator (range, roundrobin, cooperative-sticky, ...).
type Protocol struct {
	Name     string
	Metadata []byte
}

// Limits are the broker's group settings the state machine enforces.
type Limits struct {
	MinSessionTimeout     time.Duration // group.min.session.timeout.ms
	MaxSessionTimeout     time.Duration // group.max.session.timeout.ms
	InitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms
	MaxSize               int           // group.max.size
}

// JoinRequest is a JoinGroup for one group.
type JoinRequest struct {
	MemberID         string
	InstanceID       string // group.instance.id; "" for a dynamic member
	ClientID         string
	ClientHost       string
	ProtocolType     string
	Protocols        []Protocol
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// RequireKnownMemberID is JoinGroup v4+: a new dynamic member is given
	// an id with MEMBER_ID_REQUIRED and must join again with it.
	RequireKnownMemberID bool
}

// JoinMember is a member as the leader's JoinGroup response lists it.
type JoinMember struct {
	MemberID, InstanceID string
	Metadata             []byte
}

// JoinResult is a JoinGroup answer.
type JoinResult struct {
	Err          *kerr.Error
	Generation   int32
	ProtocolType string
	Protocol     string
	LeaderID     string
	MemberID     string
	Members      []JoinMember // the leader's answer only
}

// SyncRequest is a SyncGroup for one group.
type SyncRequest struct {
	MemberID, InstanceID string
	Generation           int32
	ProtocolType         string // v5+; "" not checked
	Protocol             string // v5+; "" not checked
	Assignments          map[string][]byte
}

// SyncResult is a SyncGroup answer.
type SyncResult struct {
	Err          *kerr.Error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// LeaveMember names one leaving member (LeaveGroup v3+ carries several).
type LeaveMember struct{ MemberID, InstanceID string }

// member is one group member.
type member struct {
	id, instanceID       string
	clientID, clientHost string
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	protocolType         string
	protocols            []Protocol
	assignment           []byte
	join                 func(JoinResult) // awaiting a JoinGroup answer
	sync                 func(SyncResult) // awaiting a SyncGroup answer
	deadline             time.Time        // session expiry (heartbeat)
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// Group is one classic consumer group: a pure state machine. It reads no
// clock and does no I/O: every call takes the time it happens at, blocking
// JoinGroup and SyncGroup requests are answered through the callbacks they
// pass (called synchronously from within a later call), and Expire
// delivers session, join and sync timeouts, which fall due at NextDeadline.
// A Group is not safe for concurrent use.
type Group struct {
	id         string
	limits     Limits
	newID      func(clientID string) string
	state      State
	generation int32
	protoType  string
	protocol   string
	leader     string
	members    map[string]*member
	order      []string             // member ids in join order
	static     map[string]string    // group.instance.id → member id
	pending    map[string]time.Time // ids given with MEMBER_ID_REQUIRED → expiry
	pendSync   map[string]bool      // members yet to SyncGroup this generation
	// joinDeadline ends the join phase (PreparingRebalance); during the
	// initial delayed join of an empty group it moves on with each join,
	// up to initialEnd.
	joinDeadline time.Time
	initialEnd   time.Time
	initial      bool
	syncDeadline time.Time
	stateSince   time.Time
	// storing: the leader's assignment waits to be stored (Stored).
	storing bool
	// dirty is set when what the group persists changed.
	dirty bool
}

// New returns an empty group. newID makes member ids (Kafka: client id,
// "-", a UUID).
func New(id string, limits Limits, newID func(clientID string) string, now time.Time) *Group {
	return &Group{
		id: id, limits: limits, newID: newID, state: Empty,
		members: map[string]*member{}, static: map[string]string{},
		pending: map[string]time.Time{}, pendSync: map[string]bool{}, stateSince: now,
	}
}

func (g *Group) ID() string               { return g.id }
func (g *Group) State() State             { return g.state }
func (g *Group) Generation() int32        { return g.generation }
func (g *Group) ProtocolType() string     { return g.protoType }
func (g *Group) Protocol() string         { return g.protocol }
func (g *Group) Leader() string           { return g.leader }
func (g *Group) NumMembers() int          { return len(g.members) }
func (g *Group) StateSince() time.Time    { return g.stateSince }
func (g *Group) HasMember(id string) bool { _, ok := g.members[id]; return ok }

// Idle reports whether the group is Empty with no member and no pending
// member id: with no offsets either, nothing of it is left to keep.
func (g *Group) Idle() bool {
	return g.state == Empty && len(g.members) == 0 && len(g.pending) == 0
}

// Unused reports whether the group is idle and never had a generation: a
// failed first JoinGroup leaves it so.
func (g *Group) Unused() bool { return g.Idle() && g.generation == 0 }

// TakeDirty reports whether the persisted part of the group changed since
// the last call, and clears the flag.
func (g *Group) TakeDirty() bool {
	d := g.dirty
	g.dirty = false
	return d
}

func (g *Group) setState(s State, now time.Time) {
	if g.state != s {
		g.state, g.stateSince = s, now
	}
}

func errJoin(err *kerr.Error, memberID string) JoinResult {
	return JoinResult{Err: err, Generation: -1, MemberID: memberID}
}

// Join handles a JoinGroup. reply is called once, now or later.
func (g *Group) Join(now time.Time, req JoinRequest, reply func(JoinResult)) {
	switch {
	case g.state == Dead:
		reply(errJoin(kerr.CoordinatorNotAvailable, req.MemberID))
		return
	case req.SessionTimeout < g.limits.MinSessionTimeout || req.SessionTimeout > g.limits.MaxSessionTimeout:
		reply(errJoin(kerr.InvalidSessionTimeout, req.MemberID))
		return
	case req.ProtocolType == "" || len(req.Protocols) == 0 || !g.supports(req.ProtocolType, req.Protocols):
		reply(errJoin(kerr.InconsistentGroupProtocol, req.MemberID))
		return
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout // JoinGroup v0
	}
	if req.MemberID == "" {
		g.joinNew(now, req, reply)
		return
	}
	g.joinKnown(now, req, reply)
}

// supports is Kafka's supportsProtocols: an empty group takes any type;
// otherwise the type must match and one of the member's protocols must
// be supported by every member.
func (g *Group) supports(protoType string, protocols []Protocol) bool {
	if len(g.members) == 0 {
		return true
	}
	if protoType != g.protoType {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if !hasProtocol(m.protocols, p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func hasProtocol(ps []Protocol, name string) bool {
	return slices.ContainsFunc(ps, func(p Protocol) bool { return p.Name == name })
}

func (g *Group) full() bool { return g.limits.MaxSize > 0 && len(g.members) >= g.limits.MaxSize }

func (g *Group) joinNew(now time.Time, req JoinRequest, reply func(JoinResult)) {
	if req.InstanceID != "" {
		if old, ok := g.static[req.InstanceID]; ok {
			g.replaceStatic(now, old, req, reply)
			return
		}
	}
	if g.full() {
		reply(errJoin(kerr.GroupMaxSizeReached, ""))
		return
	}
	id := g.newID(req.ClientID)
	if req.InstanceID == "" && req.RequireKnownMemberID {
		// KIP-394: the member comes back with this id; until then it only
		// holds a place for its session timeout.
		g.pending[id] = now.Add(req.SessionTimeout)
		reply(JoinResult{Err: kerr.MemberIDRequired, Generation: -1, MemberID: id})
		return
	}
	g.addMember(now, id, req, reply)
}

// replaceStatic gives a known group.instance.id a new member id: the old
// id is fenced (its waiting requests get FENCED_INSTANCE_ID).
func (g *Group) replaceStatic(now time.Time, oldID string, req JoinRequest, reply func(JoinResult)) {
	m := g.members[oldID]
	if m.join != nil {
		m.join(errJoin(kerr.FencedInstanceID, oldID))
		m.join = nil
	}
	if m.sync != nil {
		m.sync(SyncResult{Err: kerr.FencedInstanceID})
		m.sync = nil
	}
	newID := g.newID(req.ClientID)
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	g.static[req.InstanceID] = newID
	g.order[slices.Index(g.order, oldID)] = newID
	if g.pendSync[oldID] {
		delete(g.pendSync, oldID)
		g.pendSync[newID] = true
	}
	wasLeader := g.leader == oldID
	if wasLeader {
		g.leader = newID
	}
	changed := !sameProtocols(m.protocols, req.Protocols)
	g.updateMember(m, req)
	g.dirty = true
	switch {
	case g.state == Stable && !changed && !wasLeader:
		// Kafka: a static member that restarts gets its old assignment
		// back without a rebalance.
		m.deadline = now.Add(m.sessionTimeout)
		reply(JoinResult{Generation: g.generation, ProtocolType: g.protoType, Protocol: g.protocol, LeaderID: g.leader, MemberID: newID})
	case g.state == PreparingRebalance:
		m.join = reply
		g.maybeCompleteJoin(now)
	default:
		// A changed subscription, the leader, or a rebalance under way
		// past its join phase: rebalance (the leader must compute
		// assignments again to learn the new id).
		m.join = reply
		g.prepareRebalance(now)
	}
}

func sameProtocols(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool { return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata) })
}

func (g *Group) updateMember(m *member, req JoinRequest) {
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.sessionTimeout, m.rebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	m.protocolType, m.protocols = req.ProtocolType, req.Protocols
}

func (g *Group) addMember(now time.Time, id string, req JoinRequest, reply func(JoinResult)) {
	m := &member{id: id, instanceID: req.InstanceID}
	g.updateMember(m, req)
	m.join = reply
	if len(g.members) == 0 {
		g.protoType = req.ProtocolType
	}
	g.members[id] = m
	g.order = append(g.order, id)
	if req.InstanceID != "" {
		g.static[req.InstanceID] = id
	}
	delete(g.pending, id)
	switch g.state {
	case PreparingRebalance:
		if g.initial {
			// The initial delayed join waits on while members keep
			// arriving, up to the rebalance timeout.
			g.joinDeadline = minTime(now.Add(g.limits.InitialRebalanceDelay), g.initialEnd)
		}
		g.maybeCompleteJoin(now)
	default:
		g.prepareRebalance(now)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (g *Group) joinKnown(now time.Time, req JoinRequest, reply func(JoinResult)) {
	if _, ok := g.pending[req.MemberID]; ok {
		if g.full() {
			delete(g.pending, req.MemberID)
			reply(errJoin(kerr.GroupMaxSizeReached, req.MemberID))
			return
		}
		g.addMember(now, req.MemberID, req, reply)
		return
	}
	m, err := g.checkMember(req.MemberID, req.InstanceID)
	if err != nil {
		reply(errJoin(err, req.MemberID))
		return
	}
	switch g.state {
	case Empty, Dead:
		reply(errJoin(kerr.UnknownMemberID, req.MemberID))
	case PreparingRebalance:
		if m.join != nil {
			m.join(errJoin(kerr.RebalanceInProgress, m.id))
		}
		g.updateMember(m, req)
		m.join = reply
		g.maybeCompleteJoin(now)
	case CompletingRebalance, Stable:
		if sameProtocols(m.protocols, req.Protocols) && (g.state == CompletingRebalance || m.id != g.leader) {
			// A retried JoinGroup of the current generation: the same
			// answer again, no rebalance.
			reply(g.joinResult(m))
			return
		}
		g.updateMember(m, req)
		m.join = reply
		g.prepareRebalance(now)
	}
}

// checkMember finds a member by id and fences a stale static one.
func (g *Group) checkMember(id, instanceID string) (*member, *kerr.Error) {
	if instanceID != "" {
		cur, ok := g.static[instanceID]
		if ok && cur != id {
			return nil, kerr.FencedInstanceID
		}
	}
	m, ok := g.members[id]
	if !ok {
		return nil, kerr.UnknownMemberID
	}
	if m.instanceID != "" && instanceID != "" && m.instanceID != instanceID {
		return nil, kerr.FencedInstanceID
	}
	return m, nil
}

func (g *Group) joinResult(m *member) JoinResult {
	r := JoinResult{Generation: g.generation, ProtocolType: g.protoType, Protocol: g.protocol, LeaderID: g.leader, MemberID: m.id}
	if m.id == g.leader {
		for _, id := range g.order {
			o := g.members[id]
			r.Members = append(r.Members, JoinMember{MemberID: o.id, InstanceID: o.instanceID, Metadata: o.metadataFor(g.protocol)})
		}
	}
	return r
}

func (g *Group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// prepareRebalance starts a join phase. Waiting SyncGroups of a
// rebalance being completed are answered REBALANCE_IN_PROGRESS.
func (g *Group) prepareRebalance(now time.Time) {
	if g.state == CompletingRebalance || g.state == Stable {
		for _, m := range g.members {
			if m.sync != nil {
				m.sync(SyncResult{Err: kerr.RebalanceInProgress})
				m.sync = nil
				// Its session was on hold while it waited; it starts
				// again now, as Kafka reschedules a member's heartbeat
				// when it answers the member.
				m.deadline = now.Add(m.sessionTimeout)
			}
			if g.state == CompletingRebalance {
				m.assignment = nil
			}
		}
	}
	clear(g.pendSync)
	g.storing = false
	rt := g.rebalanceTimeout()
	if g.state == Empty {
		// Kafka's InitialDelayedJoin: let the members of a starting
		// group arrive before the first generation.
		g.initial = true
		g.initialEnd = now.Add(rt)
		g.joinDeadline = minTime(now.Add(g.limits.InitialRebalanceDelay), g.initialEnd)
	} else {
		g.initial = false
		g.joinDeadline = now.Add(rt)
	}
	g.setState(PreparingRebalance, now)
	g.maybeCompleteJoin(now)
}

func (g *Group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return true
}

func (g *Group) maybeCompleteJoin(now time.Time) {
	if g.state != PreparingRebalance {
		return
	}
	if (!g.initial && g.allJoined()) || !now.Before(g.joinDeadline) {
		g.completeJoin(now)
	}
}

// completeJoin ends the join phase: members that did not join are
// removed, the next generation begins and every joined member is answered.
func (g *Group) completeJoin(now time.Time) {
	for _, id := range slices.Clone(g.order) {
		if g.members[id].join == nil {
			g.remove(id)
		}
	}
	clear(g.pending)
	g.initial = false
	g.generation++
	g.dirty = true
	if len(g.members) == 0 {
		// The protocol type stays, as Kafka keeps it: an empty consumer
		// group is still listed and described as "consumer" (tools filter
		// groups by it). The next first member sets it again (addMember).
		g.protocol, g.leader = "", ""
		g.setState(Empty, now)
		return
	}
	g.protocol = g.selectProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.order[0]
	}
	g.setState(CompletingRebalance, now)
	g.syncDeadline = now.Add(g.rebalanceTimeout())
	for _, id := range g.order {
		m := g.members[id]
		g.pendSync[id] = true
		m.deadline = now.Add(m.sessionTimeout)
		reply := m.join
		m.join = nil
		reply(g.joinResult(m))
	}
}

// selectProtocol is Kafka's vote: among the protocols every member
// supports, each member votes for the first it lists; the most votes win,
// ties going to the earliest in the first member's preference.
func (g *Group) selectProtocol() string {
	first := g.members[g.order[0]]
	var candidates []string
	for _, p := range first.protocols {
		all := true
		for _, m := range g.members {
			if !hasProtocol(m.protocols, p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, id := range g.order {
		for _, p := range g.members[id].protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// remove drops a member; its waiting requests get UNKNOWN_MEMBER_ID.
func (g *Group) remove(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	if m.join != nil {
		m.join(errJoin(kerr.UnknownMemberID, id))
	}
	if m.sync != nil {
		m.sync(SyncResult{Err: kerr.UnknownMemberID})
	}
	delete(g.members, id)
	delete(g.pendSync, id)
	g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == id })
	if m.instanceID != "" && g.static[m.instanceID] == id {
		delete(g.static, m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
	}
	g.dirty = true
}

// removeAndRebalance removes a member and moves the group on.
func (g *Group) removeAndRebalance(now time.Time, id string) {
	g.remove(id)
	switch g.state {
	case CompletingRebalance, Stable:
		g.prepareRebalance(now)
	case PreparingRebalance:
		g.maybeCompleteJoin(now)
	}
}

// Sync handles a SyncGroup. reply is called once, now or later.
func (g *Group) Sync(now time.Time, req SyncRequest, reply func(SyncResult)) {
	if g.state == Dead {
		reply(SyncResult{Err: kerr.CoordinatorNotAvailable})
		return
	}
	m, err := g.checkMember(req.MemberID, req.InstanceID)
	switch {
	case err != nil:
	case req.Generation != g.generation:
		err = kerr.IllegalGeneration
	case (req.ProtocolType != "" && req.ProtocolType != g.protoType) || (req.Protocol != "" && req.Protocol != g.protocol):
		err = kerr.InconsistentGroupProtocol
	}
	if err != nil {
		reply(SyncResult{Err: err})
		return
	}
	switch g.state {
	case Empty:
		reply(SyncResult{Err: kerr.UnknownMemberID})
	case PreparingRebalance:
		reply(SyncResult{Err: kerr.RebalanceInProgress})
	case CompletingRebalance:
		if m.sync != nil {
			m.sync(SyncResult{Err: kerr.RebalanceInProgress})
		}
		m.sync = reply
		m.deadline = now.Add(m.sessionTimeout)
		delete(g.pendSync, m.id)
		if m.id != g.leader || g.storing {
			return
		}
		// As Kafka, the generation and its assignment are stored before
		// anyone is answered: the driver writes Record and calls Stored.
		for _, o := range g.members {
			o.assignment = req.Assignments[o.id]
		}
		g.storing = true
		g.dirty = true
	case Stable:
		m.deadline = now.Add(m.sessionTimeout)
		delete(g.pendSync, m.id)
		reply(g.syncResult(m))
	}
}

// Storing reports whether the leader's assignment of generation waits to
// be stored; the driver writes Record and then calls Stored.
func (g *Group) Storing() (generation int32, ok bool) {
	return g.generation, g.storing && g.state == CompletingRebalance
}

// Stored ends the store of generation's assignment: on success the group
// is Stable and every waiting SyncGroup gets its assignment; on failure
// they get err, and the group rebalances (Kafka's answer to a failed
// group-metadata append). A store of an older generation is ignored.
func (g *Group) Stored(now time.Time, generation int32, err *kerr.Error) {
	if !g.storing || g.generation != generation || g.state != CompletingRebalance {
		return
	}
	g.storing = false
	if err != nil {
		for _, id := range g.order {
			o := g.members[id]
			o.assignment = nil
			if o.sync != nil {
				r := o.sync
				o.sync = nil
				o.deadline = now.Add(o.sessionTimeout)
				r(SyncResult{Err: err})
			}
		}
		g.prepareRebalance(now)
		return
	}
	g.setState(Stable, now)
	for _, id := range g.order {
		o := g.members[id]
		if o.sync != nil {
			r := o.sync
			o.sync = nil
			o.deadline = now.Add(o.sessionTimeout)
			r(g.syncResult(o))
		}
	}
}

func (g *Group) syncResult(m *member) SyncResult {
	a := m.assignment
	if a == nil {
		a = []byte{}
	}
	return SyncResult{ProtocolType: g.protoType, Protocol: g.protocol, Assignment: a}
}

// Heartbeat handles a Heartbeat; it returns the error code (nil: none).
func (g *Group) Heartbeat(now time.Time, memberID, instanceID string, generation int32) *kerr.Error {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	m, err := g.checkMember(memberID, instanceID)
	if err != nil {
		return err
	}
	if g.state == Empty {
		return kerr.UnknownMemberID
	}
	if generation != g.generation {
		return kerr.IllegalGeneration
	}
	m.deadline = now.Add(m.sessionTimeout)
	if g.state == PreparingRebalance {
		return kerr.RebalanceInProgress
	}
	return nil
}

// Leave handles a LeaveGroup: one error code per member (nil: left).
func (g *Group) Leave(now time.Time, leaving []LeaveMember) []*kerr.Error {
	out := make([]*kerr.Error, len(leaving))
	for i, l := range leaving {
		if g.state == Dead {
			out[i] = kerr.CoordinatorNotAvailable
			continue
		}
		id := l.MemberID
		if l.InstanceID != "" {
			cur, ok := g.static[l.InstanceID]
			switch {
			case !ok:
				out[i] = kerr.UnknownMemberID
				continue
			case id != "" && id != cur:
				out[i] = kerr.FencedInstanceID
				continue
			}
			id = cur
		} else if _, ok := g.pending[id]; ok {
			delete(g.pending, id)
			g.maybeCompleteJoin(now)
			continue
		}
		if _, ok := g.members[id]; !ok {
			out[i] = kerr.UnknownMemberID
			continue
		}
		g.removeAndRebalance(now, id)
	}
	return out
}

// CheckCommit validates an OffsetCommit as Kafka's classic groups do; a
// member's commit counts as a heartbeat.
func (g *Group) CheckCommit(now time.Time, memberID, instanceID string, generation int32) *kerr.Error {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if generation < 0 && g.state == Empty {
		return nil // a commit from outside the group (admin, simple consumer)
	}
	m, err := g.checkMember(memberID, instanceID)
	if err != nil {
		return err
	}
	if generation != g.generation {
		return kerr.IllegalGeneration
	}
	if g.state == CompletingRebalance {
		return kerr.RebalanceInProgress
	}
	m.deadline = now.Add(m.sessionTimeout)
	return nil
}

// Delete marks an empty group dead (DeleteGroups); NON_EMPTY_GROUP else.
func (g *Group) Delete(now time.Time) *kerr.Error {
	switch g.state {
	case Dead:
		return kerr.GroupIDNotFound
	case Empty:
		g.setState(Dead, now)
		return nil
	}
	return kerr.NonEmptyGroup
}

// Unload answers every waiting request with err (the coordinator moved)
// and marks the group dead.
func (g *Group) Unload(now time.Time, err *kerr.Error) {
	for _, id := range g.order {
		m := g.members[id]
		if m.join != nil {
			m.join(errJoin(err, id))
			m.join = nil
		}
		if m.sync != nil {
			m.sync(SyncResult{Err: err})
			m.sync = nil
		}
	}
	g.setState(Dead, now)
}

// Expire delivers every timeout due at now: pending member ids, member
// sessions, the end of the join phase and of the sync phase.
func (g *Group) Expire(now time.Time) {
	for id, d := range g.pending {
		if !now.Before(d) {
			delete(g.pending, id)
		}
	}
	for _, id := range slices.Clone(g.order) {
		m := g.members[id]
		if m == nil || m.join != nil || m.sync != nil || m.deadline.IsZero() {
			continue // waiting in a join or sync phase, or never joined
		}
		if !now.Before(m.deadline) {
			g.removeAndRebalance(now, id)
		}
	}
	g.maybeCompleteJoin(now)
	if len(g.pendSync) > 0 && (g.state == CompletingRebalance || g.state == Stable) && !now.Before(g.syncDeadline) {
		// Members that never sent SyncGroup within the rebalance timeout
		// are removed, as Kafka's pending-sync timeout does.
		for _, id := range slices.Clone(g.order) {
			if g.pendSync[id] {
				g.remove(id)
			}
		}
		g.prepareRebalance(now)
	}
}

// NextDeadline is when Expire has something to do next (zero: never).
func (g *Group) NextDeadline() time.Time {
	var next time.Time
	take := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, d := range g.pending {
		take(d)
	}
	for _, m := range g.members {
		if m.join == nil && m.sync == nil {
			take(m.deadline)
		}
	}
	if g.state == PreparingRebalance {
		take(g.joinDeadline)
	}
	if len(g.pendSync) > 0 && (g.state == CompletingRebalance || g.state == Stable) {
		take(g.syncDeadline)
	}
	return next
}

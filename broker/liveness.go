package broker

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Broker liveness, fencing and leader election: the decisions, as pure
// functions over the cluster state and events with their times. The
// controllers (MemController, KafkaController) feed them and apply what
// they decide; see doc.go ("Liveness and election").

// Liveness defaults (Kafka's names and values).
const (
	DefaultBrokerSessionTimeout    = 9 * time.Second   // broker.session.timeout.ms
	DefaultBrokerHeartbeatInterval = 2 * time.Second   // broker.heartbeat.interval.ms
	DefaultLeaderImbalanceInterval = 300 * time.Second // leader.imbalance.check.interval.seconds
)

// NoLeader is the leader of a partition without one (Kafka's -1).
const NoLeader int32 = -1

// Liveness errors.
var (
	// ErrBrokerFenced: the registration named is fenced or superseded by
	// a newer one; the broker must register again.
	ErrBrokerFenced = errors.New("broker: broker registration fenced or superseded")
	// ErrNotElectable: the asked leader is not an in-sync, live replica.
	ErrNotElectable = errors.New("broker: replica not electable (not in the ISR or not live)")
	// ErrIneligibleReplica: a fenced broker, or one whose log dir is
	// offline, cannot join an ISR.
	ErrIneligibleReplica = errors.New("broker: ineligible replica")
)

// BrokerRegistration is one incarnation of a broker as the cluster state
// holds it. Epoch (Kafka's broker epoch) is new at every registration, so
// heartbeats and fences of an earlier life do not count.
type BrokerRegistration struct {
	ID     int32
	Epoch  int64
	Fenced bool
	// LogDirOffline: the broker reported its log dir offline during this
	// registration (ReportLogDirOffline). It stays registered and
	// heartbeats, but it holds no replica in any ISR (but as a last
	// member) and is elected nowhere; a new registration (a restart onto
	// a healthy log dir) clears it.
	LogDirOffline bool
}

// sessionTracker decides who is silent: it is fed registrations and
// heartbeats with the time they were seen and answers, for a time, which
// live registrations have not been heard of for longer than the session
// timeout. Pure: it reads no clock.
type sessionTracker struct {
	timeout time.Duration
	last    map[int32]session
}

type session struct {
	epoch int64
	heard time.Time
}

func newSessionTracker(timeout time.Duration) *sessionTracker {
	return &sessionTracker{timeout: timeout, last: map[int32]session{}}
}

// registered starts the session of a new registration at now.
func (s *sessionTracker) registered(id int32, epoch int64, now time.Time) {
	if cur, ok := s.last[id]; ok && cur.epoch > epoch {
		return
	}
	s.last[id] = session{epoch: epoch, heard: now}
}

// heard renews the session of id's registration epoch; a heartbeat of any
// other epoch (an earlier life's) is ignored. It reports whether it counted.
func (s *sessionTracker) heard(id int32, epoch int64, now time.Time) bool {
	cur, ok := s.last[id]
	if !ok || cur.epoch != epoch {
		return false
	}
	if now.After(cur.heard) {
		cur.heard = now
		s.last[id] = cur
	}
	return true
}

// expired returns the live registrations (of regs) whose session ended
// before now, by id.
func (s *sessionTracker) expired(now time.Time, regs map[int32]BrokerRegistration) []BrokerRegistration {
	var out []BrokerRegistration
	for id, r := range regs {
		cur, ok := s.last[id]
		if r.Fenced || !ok || cur.epoch != r.Epoch {
			continue
		}
		if now.Sub(cur.heard) > s.timeout {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// checkHeartbeat is the rule for a heartbeat of registration epoch of
// broker id: it counts only while that registration is the broker's
// current one and is not fenced; otherwise ErrBrokerFenced, and the broker
// must register again.
func checkHeartbeat(regs map[int32]BrokerRegistration, id int32, epoch int64) error {
	r, ok := regs[id]
	if !ok || r.Epoch != epoch || r.Fenced {
		return fmt.Errorf("%w: broker %d epoch %d", ErrBrokerFenced, id, epoch)
	}
	return nil
}

// election is one leader decision for a partition.
type election struct {
	leader  int32
	unclean bool // chosen outside the ISR
}

// electLeader picks a leader as Kafka's PartitionChangeBuilder does: the
// first replica, in replica order, that is in the ISR and live; with
// unclean allowed and no such replica, the first live replica; otherwise
// NoLeader.
func electLeader(ps *PartitionState, live func(int32) bool, unclean bool) election {
	for _, r := range ps.Replicas {
		if slices.Contains(ps.ISR, r) && live(r) {
			return election{leader: r}
		}
	}
	if unclean {
		for _, r := range ps.Replicas {
			if live(r) {
				return election{leader: r, unclean: true}
			}
		}
	}
	return election{leader: NoLeader}
}

// setLeader installs an election's outcome, bumping the leader epoch when
// the leader changes. An unclean leader becomes the whole ISR.
func setLeader(ps *PartitionState, e election) bool {
	if e.leader == ps.Leader {
		return false
	}
	ps.Leader = e.leader
	ps.LeaderEpoch++
	if e.unclean {
		ps.ISR = []int32{e.leader}
	}
	return true
}

// partitionChange is what fencing or unfencing did to one partition.
type partitionChange struct {
	topic   string
	ps      PartitionState // after
	unclean bool
}

// fencePartition takes id out of a partition's ISR, except as its last
// member (kept, so that it is electable, cleanly, when it returns), and
// elects a new leader if id led. It reports whether anything changed.
func fencePartition(ps *PartitionState, id int32, live func(int32) bool, unclean bool) (changed, wasUnclean bool) {
	if !slices.Contains(ps.Replicas, id) {
		return false, false
	}
	if i := slices.Index(ps.ISR, id); i >= 0 && len(ps.ISR) > 1 {
		ps.ISR = slices.Delete(slices.Clone(ps.ISR), i, i+1)
		changed = true
	}
	if ps.Leader == id {
		if e := electLeader(ps, live, unclean); setLeader(ps, e) {
			changed, wasUnclean = true, e.unclean
		}
	}
	return changed, wasUnclean
}

// revivePartition elects a leader for a leaderless partition once a
// replica is live again.
func revivePartition(ps *PartitionState, live func(int32) bool, unclean bool) (changed, wasUnclean bool) {
	if ps.Leader != NoLeader {
		return false, false
	}
	e := electLeader(ps, live, unclean)
	if e.leader == NoLeader {
		return false, false
	}
	setLeader(ps, e)
	return true, e.unclean
}

// fenceBroker fences registration (id, epoch) in the state held by topics
// and regs: it leaves every ISR (but as a last member) and leads nothing.
// uncleanDefault is unclean.leader.election.enable for topics that do not
// set it. It returns the changed partitions (partition epochs bumped), or
// ErrBrokerFenced if that registration is not the live one.
func fenceBroker(topics map[string]*TopicState, regs map[int32]BrokerRegistration, id int32, epoch int64, uncleanDefault bool) ([]partitionChange, error) {
	r, ok := regs[id]
	if !ok || r.Epoch != epoch || r.Fenced {
		return nil, ErrBrokerFenced
	}
	r.Fenced = true
	regs[id] = r
	return dropReplicas(topics, regs, id, uncleanDefault), nil
}

// logDirOffline applies the report of registration (id, epoch) that its
// log dir went offline (Kafka's KIP-858 offline log dirs; kwal has one
// dir, so every replica of the broker is on it): the registration stays
// live (it heartbeats on) but is marked LogDirOffline, so it leaves every
// ISR (but as a last member, as a fence) and new leaders are elected at
// once where it led, from the rest of the ISR; it is elected nowhere and
// joins no ISR until it registers again. A second report of the same
// registration changes nothing. ErrBrokerFenced: that registration is not
// the live one (a report from an earlier life, or behind a fence: the
// broker registers again when its dir is healthy, after a restart).
func logDirOffline(topics map[string]*TopicState, regs map[int32]BrokerRegistration, id int32, epoch int64, uncleanDefault bool) ([]partitionChange, error) {
	r, ok := regs[id]
	if !ok || r.Epoch != epoch || r.Fenced {
		return nil, ErrBrokerFenced
	}
	if r.LogDirOffline {
		return nil, nil
	}
	r.LogDirOffline = true
	regs[id] = r
	return dropReplicas(topics, regs, id, uncleanDefault), nil
}

// dropReplicas takes id, no longer eligible in regs, out of every ISR (but
// as a last member) and elects a new leader wherever it led.
func dropReplicas(topics map[string]*TopicState, regs map[int32]BrokerRegistration, id int32, uncleanDefault bool) []partitionChange {
	live := liveIn(regs)
	var out []partitionChange
	forEachPartition(topics, func(ts *TopicState, ps *PartitionState) {
		if changed, unclean := fencePartition(ps, id, live, uncleanFor(ts, uncleanDefault)); changed {
			ps.PartitionEpoch++
			out = append(out, partitionChange{topic: ts.Name, ps: clonePartition(*ps), unclean: unclean})
		}
	})
	return out
}

// registerBroker installs a new registration of id at epoch. With
// fencePrevious (liveness on), a live earlier registration is fenced
// first: a restarted broker's log may have lost its unflushed tail, so it
// must not go on leading as if nothing happened (Kafka makes it wait for
// the old session to expire, which ends the same way). Then leaderless
// partitions that id can lead get a leader.
func registerBroker(topics map[string]*TopicState, regs map[int32]BrokerRegistration, id int32, epoch int64, uncleanDefault, fencePrevious bool) []partitionChange {
	var out []partitionChange
	if old, ok := regs[id]; ok && !old.Fenced && fencePrevious {
		out, _ = fenceBroker(topics, regs, id, old.Epoch, uncleanDefault)
	}
	regs[id] = BrokerRegistration{ID: id, Epoch: epoch}
	live := liveIn(regs)
	forEachPartition(topics, func(ts *TopicState, ps *PartitionState) {
		if !slices.Contains(ps.Replicas, id) {
			return
		}
		if changed, unclean := revivePartition(ps, live, uncleanFor(ts, uncleanDefault)); changed {
			ps.PartitionEpoch++
			out = append(out, partitionChange{topic: ts.Name, ps: clonePartition(*ps), unclean: unclean})
		}
	})
	return mergeChanges(out)
}

// electPreferred makes the preferred replica (the first) leader if it is
// in the ISR and live: Kafka's preferred-leader election.
func electPreferred(ps *PartitionState, regs map[int32]BrokerRegistration) error {
	if len(ps.Replicas) == 0 {
		return ErrNotElectable
	}
	pref := ps.Replicas[0]
	if ps.Leader == pref {
		return nil
	}
	if !slices.Contains(ps.ISR, pref) || !liveIn(regs)(pref) {
		return ErrNotElectable
	}
	setLeader(ps, election{leader: pref})
	return nil
}

// preferredToElect returns the partitions of topics, by topic and
// partition, whose preferred replica is self, is in the ISR and live, and
// does not lead: what self nominates itself for at each imbalance check.
func preferredToElect(topics []TopicState, regs map[int32]BrokerRegistration, self int32) []TopicPartition {
	live := liveIn(regs)
	var out []TopicPartition
	for _, ts := range topics {
		for _, ps := range ts.Partitions {
			if len(ps.Replicas) > 0 && ps.Replicas[0] == self && ps.Leader != self && slices.Contains(ps.ISR, self) && live(self) {
				out = append(out, TopicPartition{Topic: ts.Name, Partition: ps.Partition})
			}
		}
	}
	return out
}

// liveIn says whether a broker has a live registration that may lead and
// join ISRs: not fenced, its log dir not offline. A broker never
// registered is not live.
func liveIn(regs map[int32]BrokerRegistration) func(int32) bool {
	return func(id int32) bool {
		r, ok := regs[id]
		return ok && r.eligible()
	}
}

// eligible says whether the registration may lead and join ISRs.
func (r BrokerRegistration) eligible() bool { return !r.Fenced && !r.LogDirOffline }

// uncleanFor is a topic's unclean.leader.election.enable.
func uncleanFor(ts *TopicState, def bool) bool {
	switch ts.Configs["unclean.leader.election.enable"] {
	case "true":
		return true
	case "false":
		return false
	}
	return def
}

// forEachPartition visits every partition, topics by name.
func forEachPartition(topics map[string]*TopicState, fn func(*TopicState, *PartitionState)) {
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ts := topics[n]
		for i := range ts.Partitions {
			fn(ts, &ts.Partitions[i])
		}
	}
}

// mergeChanges keeps the last change of each partition, in first-seen order.
func mergeChanges(in []partitionChange) []partitionChange {
	type key struct {
		t string
		p int32
	}
	idx := map[key]int{}
	var out []partitionChange
	for _, c := range in {
		k := key{c.topic, c.ps.Partition}
		if i, ok := idx[k]; ok {
			c.unclean = c.unclean || out[i].unclean
			out[i] = c
			continue
		}
		idx[k] = len(out)
		out = append(out, c)
	}
	return out
}

// changedTopics names the topics of changes, sorted, once each.
func changedTopics(cs []partitionChange) []string {
	var out []string
	for _, c := range cs {
		if !slices.Contains(out, c.topic) {
			out = append(out, c.topic)
		}
	}
	sort.Strings(out)
	return out
}

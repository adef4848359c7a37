package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestGroupInvariants drives one group with seeded random schedules of
// joins (dynamic, v4 two-step, static and static restarts), syncs,
// heartbeats, commits, leaves and the passage of time, and checks after
// every step what must always hold:
//
//   - every waiting request is answered exactly once (Unload answers the
//     rest);
//   - generations only grow, by one per completed join phase, and every
//     successful JoinGroup of a generation names the same leader and
//     protocol; the leader's member list is exactly the members answered
//     for that generation;
//   - a successful SyncGroup hands a member what the leader assigned it in
//     that generation, and only after the assignment was stored;
//   - Empty has no members and no leader; CompletingRebalance and Stable
//     have a leader among their members; one member per group.instance.id;
//   - after Expire(now) nothing is still due (NextDeadline is after now);
//   - all of this across failovers: the group is rebuilt (Restore) from
//     the last record the driver would have written (generations begun
//     after it are forgotten and numbered again, as in Kafka).
func TestGroupInvariants(t *testing.T) {
	synced, stable, failovers := 0, 0, 0
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, st, f := runSchedule(t, seed)
			synced, stable, failovers = synced+s, stable+st, failovers+f
		})
	}
	// The schedules must reach what they check.
	if synced < 300 || stable < 300 || failovers < 100 {
		t.Fatalf("the schedules reached only %d successful SyncGroups, %d Stable steps, %d failovers", synced, stable, failovers)
	}
	t.Logf("%d successful SyncGroups, %d steps in Stable, %d failovers", synced, stable, failovers)
}

type simClient struct {
	client, instance, member string
	gen                      int32
	waiting                  bool
}

type genInfo struct {
	leader, protocol string
	answered         []string          // members answered successfully (static ones by instance id)
	leaderList       []string          // what the leader was told (likewise)
	leaderIDs        []string          // the member ids the leader was told
	assigned         map[string]string // the leader's assignment
}

func runSchedule(t *testing.T, seed uint64) (synced, stable, failovers int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	now := time.Unix(1_700_000_000, 0)
	ids := 0
	limits := Limits{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Hour, InitialRebalanceDelay: time.Duration(rng.IntN(2)) * time.Second}
	g := New("g", limits, func(c string) string { ids++; return fmt.Sprintf("%s-%d", c, ids) }, now)
	pending := map[int]bool{} // request id → not yet answered
	nextReq := 0
	gens := map[int32]*genInfo{}
	lastGen := int32(0)
	clients := make([]*simClient, 6)
	for i := range clients {
		clients[i] = &simClient{client: fmt.Sprintf("c%d", i)}
		if i >= 4 {
			clients[i].instance = fmt.Sprintf("i%d", i)
		}
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format, append([]any{seed}, args...)...)
	}
	answer := func(id int) {
		if !pending[id] {
			fail("request %d answered twice (or never sent)", id)
		}
		delete(pending, id)
	}
	protocols := []Protocol{{"range", []byte("r")}, {"roundrobin", []byte("rr")}}
	join := func(c *simClient) {
		id := nextReq
		nextReq++
		pending[id] = true
		c.waiting = true
		req := JoinRequest{MemberID: c.member, InstanceID: c.instance, ClientID: c.client, ProtocolType: "consumer",
			Protocols: protocols[:1+rng.IntN(2)], SessionTimeout: time.Duration(3+rng.IntN(8)) * time.Second,
			RebalanceTimeout: time.Duration(5+rng.IntN(10)) * time.Second, RequireKnownMemberID: rng.IntN(2) == 0}
		g.Join(now, req, func(r JoinResult) {
			answer(id)
			c.waiting = false
			if r.Err == kerr.MemberIDRequired {
				c.member = r.MemberID
				return
			}
			if r.Err != nil {
				if r.Err == kerr.UnknownMemberID || r.Err == kerr.FencedInstanceID {
					c.member = ""
				}
				return
			}
			c.member, c.gen = r.MemberID, r.Generation
			gi := gens[r.Generation]
			if gi == nil {
				gi = &genInfo{leader: r.LeaderID, protocol: r.Protocol, assigned: map[string]string{}}
				gens[r.Generation] = gi
			}
			if gi.leader != r.LeaderID || gi.protocol != r.Protocol {
				fail("generation %d: leader/protocol %s/%s, earlier %s/%s", r.Generation, r.LeaderID, r.Protocol, gi.leader, gi.protocol)
			}
			// A static member restarting in a Stable group gets a new id
			// in the same generation: static members count by instance.
			who := r.MemberID
			if c.instance != "" {
				who = c.instance
			}
			if !slices.Contains(gi.answered, who) {
				gi.answered = append(gi.answered, who)
			}
			if r.MemberID == r.LeaderID && len(r.Members) > 0 {
				gi.leaderList, gi.leaderIDs = nil, nil
				for _, m := range r.Members {
					k := m.MemberID
					if m.InstanceID != "" {
						k = m.InstanceID
					}
					gi.leaderList = append(gi.leaderList, k)
					gi.leaderIDs = append(gi.leaderIDs, m.MemberID)
				}
			}
		})
	}
	sync := func(c *simClient) {
		id := nextReq
		nextReq++
		pending[id] = true
		c.waiting = true
		req := SyncRequest{MemberID: c.member, InstanceID: c.instance, Generation: c.gen}
		if gi := gens[c.gen]; gi != nil && gi.leader == c.member {
			req.Assignments = map[string][]byte{}
			for i, m := range gi.leaderIDs {
				a := fmt.Sprintf("%d:%s", c.gen, m)
				req.Assignments[m] = []byte(a)
				gi.assigned[gi.leaderList[i]] = a
			}
		}
		member, gen := c.member, c.gen
		if c.instance != "" {
			member = c.instance
		}
		g.Sync(now, req, func(r SyncResult) {
			answer(id)
			c.waiting = false
			if r.Err != nil {
				return
			}
			synced++
			if g.state != Stable && g.generation == gen {
				fail("generation %d: %s synced before the assignment was stored", gen, member)
			}
			if want := gens[gen].assigned[member]; string(r.Assignment) != want {
				fail("generation %d: %s synced %q, the leader assigned %q", gen, member, r.Assignment, want)
			}
		})
	}
	check := func(step int, op string) {
		t.Helper()
		if g.generation < lastGen {
			fail("step %d (%s): generation went from %d to %d", step, op, lastGen, g.generation)
		}
		if g.generation > lastGen+1 && gens[lastGen+1] == nil && g.state != Empty {
			// Generations that completed with no one answered are only
			// the empty ones.
			fail("step %d (%s): generation jumped %d → %d", step, op, lastGen, g.generation)
		}
		lastGen = g.generation
		switch g.state {
		case Empty:
			if len(g.members) != 0 || g.leader != "" {
				fail("step %d (%s): Empty with members %v leader %q", step, op, g.order, g.leader)
			}
		case CompletingRebalance, Stable:
			if _, ok := g.members[g.leader]; !ok {
				fail("step %d (%s): %s with leader %q not a member of %v", step, op, g.state, g.leader, g.order)
			}
			gi := gens[g.generation]
			if gi == nil {
				fail("step %d (%s): %s generation %d answered no one", step, op, g.state, g.generation)
			}
			slices.Sort(gi.answered)
			ll := slices.Clone(gi.leaderList)
			slices.Sort(ll)
			if !slices.Equal(gi.answered, ll) {
				fail("step %d (%s): generation %d answered %v, the leader was told %v", step, op, g.generation, gi.answered, ll)
			}
		}
		if len(g.members) != len(g.order) {
			fail("step %d (%s): %d members, order %v", step, op, len(g.members), g.order)
		}
		seen := map[string]bool{}
		for _, m := range g.members {
			if m.instanceID != "" {
				if seen[m.instanceID] || g.static[m.instanceID] != m.id {
					fail("step %d (%s): instance %s held by more than one member", step, op, m.instanceID)
				}
				seen[m.instanceID] = true
			}
		}
	}
	var persisted *GroupRecord // what the driver would have written last
	for step := range 400 {
		c := clients[rng.IntN(len(clients))]
		op := rng.IntN(10)
		name := ""
		switch {
		case op <= 2 && !c.waiting:
			name = "join " + c.client
			join(c)
		case op <= 4 && !c.waiting && c.member != "":
			name = "sync " + c.client
			sync(c)
		case op == 5 && c.member != "":
			name = "heartbeat " + c.client
			g.Heartbeat(now, c.member, c.instance, c.gen)
		case op == 6 && c.member != "":
			name = "commit " + c.client
			g.CheckCommit(now, c.member, c.instance, c.gen)
		case op == 7 && c.member != "" && rng.IntN(3) == 0:
			name = "leave " + c.client
			g.Leave(now, []LeaveMember{{MemberID: c.member, InstanceID: c.instance}})
			if c.instance == "" {
				c.member = ""
			}
		case op == 8 && c.instance != "" && !c.waiting && rng.IntN(2) == 0:
			name = "restart " + c.client // a static member comes back without its id
			c.member = ""
			join(c)
		default:
			d := time.Duration(rng.IntN(4000)) * time.Millisecond
			name = fmt.Sprintf("advance %v", d)
			now = now.Add(d)
			g.Expire(now)
			if next := g.NextDeadline(); !next.IsZero() && !next.After(now) {
				fail("step %d: after Expire(%v) a deadline is still due at %v: %s", step, now, next, describe(g, now)+debugDeadlines(g, now))
			}
		}
		if gen, ok := g.Storing(); ok {
			// The store of the leader's assignment: mostly quick, at
			// times failing, at times still under way.
			rec := g.Record()
			switch r := rng.IntN(10); {
			case r < 7:
				g.Stored(now, gen, nil)
				persisted, g.dirty = &rec, false
			case r < 8:
				g.Stored(now, gen, kerr.CoordinatorNotAvailable)
			}
		} else if (g.state == Stable || g.state == Empty) && g.TakeDirty() {
			rec := g.Record()
			persisted = &rec
		}
		if rng.IntN(60) == 0 && persisted != nil {
			// The coordinator moves: waiting requests get NOT_COORDINATOR
			// and the next one loads what was persisted.
			name += ", failover"
			g.Unload(now, kerr.NotCoordinator)
			g = Restore("g", *persisted, limits, g.newID, now)
			failovers++
			// Generations begun after the last record are lost, as in
			// Kafka: the next join phase numbers its generation again
			// (members are checked by id, so one of the lost generation
			// is refused by the new one unless it joined it).
			for gen := range gens {
				if gen > g.generation {
					delete(gens, gen)
				}
			}
			lastGen = g.generation
		}
		check(step, name)
		if g.state == Stable {
			stable++
		}
	}
	g.Unload(now, kerr.NotCoordinator)
	if len(pending) != 0 {
		fail("%d requests never answered", len(pending))
	}
	return synced, stable, failovers
}

func debugDeadlines(g *Group, now time.Time) string {
	s := fmt.Sprintf(" join=%v initial=%v", g.joinDeadline.Sub(now), g.initial)
	for _, id := range g.order {
		m := g.members[id]
		s += fmt.Sprintf(" %s{join=%v sync=%v dl=%v}", id, m.join != nil, m.sync != nil, m.deadline.Sub(now))
	}
	return s
}

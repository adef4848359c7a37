package group

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The state machine is driven by scripts in testdata/: each command is a
// request or the passage of time, and its output lists, in order, every
// answer the group gave during the command (answers to earlier, blocked
// requests included), then, with "state", the group as a whole.
//
//	join client=c [id=m] [inst=i] [protos=range:md,...] [type=consumer] [session=10s] [rebalance=30s] [v4]
//	sync id=m gen=N [inst=i] [assign=m:bytes,...]
//	heartbeat id=m gen=N [inst=i]
//	leave [id=m] [inst=i]
//	commit id=m gen=N [inst=i]
//	delete
//	store [err=x]  (ends the store of the leader's assignment; any command
//	                with "hold" leaves it pending, else it succeeds at once)
//	advance d=5s   (moves time and delivers the timeouts due)
//	state
func TestGroupScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var (
			g     *Group
			now   time.Time
			out   []string
			seq   map[string]int
			limit Limits
		)
		reset := func() {
			now = time.Unix(1_700_000_000, 0)
			seq = map[string]int{}
			limit = Limits{MinSessionTimeout: 6 * time.Second, MaxSessionTimeout: 30 * time.Minute, InitialRebalanceDelay: 0}
			g = New("g", limit, func(client string) string {
				seq[client]++
				return fmt.Sprintf("%s-%d", client, seq[client])
			}, now)
		}
		reset()
		arg := func(td *datadriven.TestData, k, def string) string {
			if a, ok := td.Arg(k); ok {
				if len(a.Vals) == 0 {
					return "true"
				}
				return strings.Join(a.Vals, ",")
			}
			return def
		}
		dur := func(td *datadriven.TestData, k, def string) time.Duration {
			d, err := time.ParseDuration(arg(td, k, def))
			if err != nil {
				t.Fatalf("%s: %s: %v", td.Pos, k, err)
			}
			return d
		}
		num := func(td *datadriven.TestData, k string) int32 {
			var n int
			if _, err := fmt.Sscan(arg(td, k, "0"), &n); err != nil {
				t.Fatalf("%s: %s: %v", td.Pos, k, err)
			}
			return int32(n)
		}
		code := func(e *kerr.Error) string {
			if e == nil {
				return "OK"
			}
			return e.Message
		}
		joinReply := func(who string) func(JoinResult) {
			return func(r JoinResult) {
				s := fmt.Sprintf("join %s: %s member=%s", who, code(r.Err), r.MemberID)
				if r.Err == nil {
					s += fmt.Sprintf(" gen=%d protocol=%s leader=%s", r.Generation, r.Protocol, r.LeaderID)
					if len(r.Members) > 0 {
						var ms []string
						for _, m := range r.Members {
							ms = append(ms, m.MemberID+"="+string(m.Metadata))
						}
						s += " members=[" + strings.Join(ms, " ") + "]"
					}
				}
				out = append(out, s)
			}
		}
		syncReply := func(who string) func(SyncResult) {
			return func(r SyncResult) {
				s := fmt.Sprintf("sync %s: %s", who, code(r.Err))
				if r.Err == nil {
					s += fmt.Sprintf(" assignment=%q", r.Assignment)
				}
				out = append(out, s)
			}
		}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out = nil
			switch td.Cmd {
			case "reset":
				reset()
				if td.HasArg("delay") {
					limit.InitialRebalanceDelay = dur(td, "delay", "0s")
				}
				if td.HasArg("maxsize") {
					limit.MaxSize = int(num(td, "maxsize"))
				}
				g.limits = limit
			case "join":
				req := JoinRequest{
					MemberID: arg(td, "id", ""), InstanceID: arg(td, "inst", ""), ClientID: arg(td, "client", "c"),
					ProtocolType: arg(td, "type", "consumer"), SessionTimeout: dur(td, "session", "10s"),
					RebalanceTimeout: dur(td, "rebalance", "30s"), RequireKnownMemberID: td.HasArg("v4"),
				}
				for _, p := range strings.Split(arg(td, "protos", "range:r"), ",") {
					name, md, _ := strings.Cut(p, ":")
					req.Protocols = append(req.Protocols, Protocol{Name: name, Metadata: []byte(md)})
				}
				who := req.MemberID
				if who == "" {
					who = "(" + req.ClientID + ")"
				}
				g.Join(now, req, joinReply(who))
			case "sync":
				req := SyncRequest{MemberID: arg(td, "id", ""), InstanceID: arg(td, "inst", ""), Generation: num(td, "gen"), Assignments: map[string][]byte{}}
				if a := arg(td, "assign", ""); a != "" {
					for _, p := range strings.Split(a, ",") {
						m, v, _ := strings.Cut(p, ":")
						req.Assignments[m] = []byte(v)
					}
				}
				g.Sync(now, req, syncReply(req.MemberID))
			case "heartbeat":
				out = append(out, "heartbeat: "+code(g.Heartbeat(now, arg(td, "id", ""), arg(td, "inst", ""), num(td, "gen"))))
			case "leave":
				errs := g.Leave(now, []LeaveMember{{MemberID: arg(td, "id", ""), InstanceID: arg(td, "inst", "")}})
				out = append(out, "leave: "+code(errs[0]))
			case "commit":
				out = append(out, "commit: "+code(g.CheckCommit(now, arg(td, "id", ""), arg(td, "inst", ""), num(td, "gen"))))
			case "delete":
				out = append(out, "delete: "+code(g.Delete(now)))
			case "advance":
				now = now.Add(dur(td, "d", "0s"))
				g.Expire(now)
			case "store":
				// The store of the leader's assignment ends (by default
				// it ends after every command, as a quick durable write).
				gen, ok := g.Storing()
				if !ok {
					t.Fatalf("%s: nothing is being stored", td.Pos)
				}
				var err *kerr.Error
				if e := arg(td, "err", ""); e != "" {
					err = kerr.CoordinatorNotAvailable // the answer to a failed append
				}
				g.Stored(now, gen, err)
			case "state":
			default:
				t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			}
			if gen, ok := g.Storing(); ok && !td.HasArg("hold") && td.Cmd != "store" {
				g.Stored(now, gen, nil)
			}
			if td.Cmd == "state" || td.HasArg("state") {
				out = append(out, describe(g, now))
			}
			if len(out) == 0 {
				return "(no answers)\n"
			}
			return strings.Join(out, "\n") + "\n"
		})
	})
}

func describe(g *Group, now time.Time) string {
	var ms []string
	for _, id := range g.order {
		m := g.members[id]
		s := id
		if m.instanceID != "" {
			s += "(" + m.instanceID + ")"
		}
		if m.assignment != nil {
			s += "=" + string(m.assignment)
		}
		ms = append(ms, s)
	}
	var pend []string
	for id := range g.pending {
		pend = append(pend, id)
	}
	sort.Strings(pend)
	next := "none"
	if d := g.NextDeadline(); !d.IsZero() {
		next = d.Sub(now).String()
	}
	return fmt.Sprintf("state=%s gen=%d type=%s protocol=%s leader=%s members=[%s] pending=[%s] next=%s",
		g.state, g.generation, g.protoType, g.protocol, g.leader, strings.Join(ms, " "), strings.Join(pend, " "), next)
}

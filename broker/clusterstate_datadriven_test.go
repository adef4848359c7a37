package broker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// csHarness drives the controllers' state machine (clusterState) with
// records, as a controller applies them in log order, and keeps the log
// so that a replay can be compared with the live state.
type csHarness struct {
	st  *clusterState
	log []stateRecord
}

func newCSHarness() *csHarness { return &csHarness{st: newClusterState(nil)} }

// apply applies rec at the next offset (broker epochs are offsets, from 1)
// after a JSON round trip, as KafkaController reads its records.
func (h *csHarness) apply(t testing.TB, rec stateRecord) (applied, applyResult) {
	t.Helper()
	rec.V = clusterStateVersion
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var back stateRecord
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	h.log = append(h.log, back)
	return h.st.apply(back, int64(len(h.log)))
}

// replayed is a fresh state machine fed the whole log.
func (h *csHarness) replayed() *clusterState {
	st := newClusterState(nil)
	for i, rec := range h.log {
		st.apply(rec, int64(i+1))
	}
	return st
}

// dump prints registrations and every partition, sorted.
func dumpClusterState(st *clusterState) string {
	var b strings.Builder
	b.WriteString("regs:")
	for _, r := range st.registrations() {
		fmt.Fprintf(&b, " %d@%d", r.ID, r.Epoch)
		if r.Fenced {
			b.WriteString(",fenced")
		}
		if r.LogDirOffline {
			b.WriteString(",offline")
		}
	}
	b.WriteString("\n")
	for _, ts := range st.topicList() {
		for _, ps := range ts.Partitions {
			fmt.Fprintf(&b, "%s/%d leader=%d le=%d pe=%d replicas=%v isr=%v\n",
				ts.Name, ps.Partition, ps.Leader, ps.LeaderEpoch, ps.PartitionEpoch, ps.Replicas, ps.ISR)
		}
	}
	return b.String()
}

func ddInt(t *testing.T, d *datadriven.TestData, key string) int64 {
	t.Helper()
	var s string
	d.ScanArgs(t, key, &s)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return v
}

func ddIDs(t *testing.T, d *datadriven.TestData, key string) []int32 {
	t.Helper()
	var out []int32
	for _, v := range strings.Fields(strings.ReplaceAll(key, ",", " ")) {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			d.Fatalf(t, "%q: %v", v, err)
		}
		out = append(out, int32(n))
	}
	return out
}

// TestClusterStateData runs the scripts under testdata/clusterstate.
// Commands:
//
//	register id=N [liveness=false]         a registration (fence_previous unless liveness=false)
//	topic name=T                           one partition per input line: its replicas, "1 2 3"
//	report-offline id=N epoch=E            a log-dir-offline record
//	fence id=N epoch=E
//	heartbeat id=N epoch=E
//	alter-isr topic=T p=P le=L pe=E isr=1,2
//	elect-preferred topic=T p=P le=L pe=E
//
// Each prints what applying decided, then the whole state; after each,
// the state must equal a replay of the log so far.
func TestClusterStateData(t *testing.T) {
	datadriven.Walk(t, "testdata/clusterstate", func(t *testing.T, path string) {
		h := newCSHarness()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var rec stateRecord
			switch d.Cmd {
			case "register":
				id := int32(ddInt(t, d, "id"))
				liveness := true
				if d.HasArg("liveness") {
					d.ScanArgs(t, "liveness", &liveness)
				}
				rec = stateRecord{Kind: kindBroker, Broker: &wireBroker{ID: id, Host: "127.0.0.1", Port: 9000 + id}, FencePrevious: liveness}
			case "topic":
				var name string
				d.ScanArgs(t, "name", &name)
				w := &wireTopic{Name: name}
				for i, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					reps := ddIDs(t, d, line)
					isr := slices.Clone(reps)
					slices.Sort(isr)
					w.Partitions = append(w.Partitions, wirePartition{Partition: int32(i), Leader: reps[0], Replicas: reps, ISR: isr})
				}
				rec = stateRecord{Kind: kindTopic, Topic: w}
			case "report-offline", "fence", "heartbeat":
				kind := map[string]string{"report-offline": kindLogDirOffline, "fence": kindFence, "heartbeat": kindHeartbeat}[d.Cmd]
				rec = stateRecord{Kind: kind, BrokerID: int32(ddInt(t, d, "id")), BrokerEpoch: ddInt(t, d, "epoch")}
			case "alter-isr", "elect-preferred":
				d.ScanArgs(t, "topic", &rec.TopicName)
				rec.Partition = int32(ddInt(t, d, "p"))
				rec.LeaderEpoch, rec.PartitionEpoch = int32(ddInt(t, d, "le")), int32(ddInt(t, d, "pe"))
				rec.Kind = kindElectPreferred
				if d.Cmd == "alter-isr" {
					var isr string
					d.ScanArgs(t, "isr", &isr)
					rec.Kind, rec.ISR = kindAlterISR, ddIDs(t, d, isr)
				}
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			done, res := h.apply(t, rec)
			var out strings.Builder
			if res.err != nil {
				fmt.Fprintf(&out, "refused: %v\n", res.err)
			} else {
				fmt.Fprintf(&out, "ok, %d partitions changed\n", len(done.changes))
			}
			now := dumpClusterState(h.st)
			if replay := dumpClusterState(h.replayed()); replay != now {
				t.Fatalf("%s: replay differs:\n%s\nlive:\n%s", d.Pos, replay, now)
			}
			out.WriteString(now)
			return out.String()
		})
	})
}

// TestLogDirOfflineProperty applies random sequences of registrations,
// log-dir reports (current, repeated and stale epochs), fences, heartbeats
// and the ISR changes and preferred elections a leader would propose, and
// checks after every record: no broker whose registration is fenced or
// offline leads, or is in an ISR beside another member; a leader is in
// its ISR. At the end a replay of the log gives the same state.
func TestLogDirOfflineProperty(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 1176))
		h := newCSHarness()
		epochs := map[int32][]int64{} // every epoch each broker had, last is current
		for id := int32(1); id <= 4; id++ {
			_, res := h.apply(t, stateRecord{Kind: kindBroker, Broker: &wireBroker{ID: id, Host: "h", Port: id}, FencePrevious: true})
			epochs[id] = append(epochs[id], res.registration.Epoch)
		}
		w := &wireTopic{Name: "t"}
		for p := range int32(6) {
			reps := []int32{p%4 + 1, (p+1)%4 + 1, (p+2)%4 + 1}
			isr := slices.Clone(reps)
			slices.Sort(isr)
			w.Partitions = append(w.Partitions, wirePartition{Partition: p, Leader: reps[0], Replicas: reps, ISR: isr})
		}
		h.apply(t, stateRecord{Kind: kindTopic, Topic: w})
		var trace []string
		for step := range 60 {
			id := int32(rng.IntN(4) + 1)
			eps := epochs[id]
			epoch := eps[len(eps)-1]
			if rng.IntN(5) == 0 { // an earlier life's, or a stale copy
				epoch = eps[rng.IntN(len(eps))]
			}
			var rec stateRecord
			switch rng.IntN(7) {
			case 0:
				rec = stateRecord{Kind: kindBroker, Broker: &wireBroker{ID: id, Host: "h", Port: id}, FencePrevious: true}
			case 1, 2:
				rec = stateRecord{Kind: kindLogDirOffline, BrokerID: id, BrokerEpoch: epoch}
			case 3:
				rec = stateRecord{Kind: kindFence, BrokerID: id, BrokerEpoch: epoch}
			case 4:
				rec = stateRecord{Kind: kindHeartbeat, BrokerID: id, BrokerEpoch: epoch}
			case 5: // the leader's ISR change: its ISR plus or minus one replica
				ps := h.st.topics["t"].Partitions[rng.IntN(6)]
				if ps.Leader == NoLeader {
					continue
				}
				r := ps.Replicas[rng.IntN(len(ps.Replicas))]
				isr := slices.Clone(ps.ISR)
				if i := slices.Index(isr, r); i >= 0 && r != ps.Leader {
					isr = slices.Delete(isr, i, i+1)
				} else if i < 0 {
					isr = append(isr, r)
				}
				rec = stateRecord{Kind: kindAlterISR, TopicName: "t", Partition: ps.Partition, LeaderEpoch: ps.LeaderEpoch, PartitionEpoch: ps.PartitionEpoch, ISR: isr}
			case 6:
				ps := h.st.topics["t"].Partitions[rng.IntN(6)]
				rec = stateRecord{Kind: kindElectPreferred, TopicName: "t", Partition: ps.Partition, LeaderEpoch: ps.LeaderEpoch, PartitionEpoch: ps.PartitionEpoch}
			}
			_, res := h.apply(t, rec)
			if rec.Kind == kindBroker && res.err == nil {
				epochs[id] = append(epochs[id], res.registration.Epoch)
			}
			trace = append(trace, fmt.Sprintf("%d: %s id=%d epoch=%d isr=%v -> %v", step, rec.Kind, rec.BrokerID, rec.BrokerEpoch, rec.ISR, res.err))
			if msg := checkEligibility(h.st); msg != "" {
				t.Fatalf("seed %d: %s\n%s\n%s", seed, msg, strings.Join(trace, "\n"), dumpClusterState(h.st))
			}
		}
		if a, b := dumpClusterState(h.st), dumpClusterState(h.replayed()); a != b {
			t.Fatalf("seed %d: replay differs:\n%s\nlive:\n%s\n%s", seed, b, a, strings.Join(trace, "\n"))
		}
	}
}

// checkEligibility returns what breaks the rules of ineligible brokers.
func checkEligibility(st *clusterState) string {
	for _, ts := range st.topicList() {
		for _, ps := range ts.Partitions {
			if ps.Leader != NoLeader && !slices.Contains(ps.ISR, ps.Leader) {
				return fmt.Sprintf("%s/%d: leader %d not in ISR %v", ts.Name, ps.Partition, ps.Leader, ps.ISR)
			}
			for _, r := range ps.ISR {
				if reg := st.regs[r]; !reg.Fenced && !reg.LogDirOffline {
					continue
				}
				if ps.Leader == r {
					return fmt.Sprintf("%s/%d: ineligible %d leads", ts.Name, ps.Partition, r)
				}
				if len(ps.ISR) > 1 {
					return fmt.Sprintf("%s/%d: ineligible %d in ISR %v beside others", ts.Name, ps.Partition, r, ps.ISR)
				}
			}
		}
	}
	return ""
}

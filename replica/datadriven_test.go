package replica

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kerr"
)

// t0 is the scripts' time zero; t=DURATION arguments count from it.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func argInt(t testing.TB, d *datadriven.TestData, key string, def int64) int64 {
	t.Helper()
	a, ok := d.Arg(key)
	if !ok {
		return def
	}
	v, err := strconv.ParseInt(a.SingleVal(t), 10, 64)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return v
}

func argIDs(t testing.TB, d *datadriven.TestData, key string) []int32 {
	t.Helper()
	a, ok := d.Arg(key)
	if !ok {
		return nil
	}
	var out []int32
	for _, v := range a.Vals {
		if strings.TrimSpace(v) == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			d.Fatalf(t, "%s: %v", key, err)
		}
		out = append(out, int32(n))
	}
	return out
}

func argTime(t testing.TB, d *datadriven.TestData) time.Time {
	t.Helper()
	var dur time.Duration
	d.MaybeScanArgs(t, "t", &dur)
	return t0.Add(dur)
}

// argEpochs reads a leader-epoch cache written epoch@start,...
func argEpochs(t testing.TB, d *datadriven.TestData, key string) []kafkalog.EpochEntry {
	t.Helper()
	a, ok := d.Arg(key)
	if !ok {
		return nil
	}
	var out []kafkalog.EpochEntry
	for _, v := range a.Vals {
		if strings.TrimSpace(v) == "" {
			continue
		}
		e, s, ok := strings.Cut(strings.TrimSpace(v), "@")
		if !ok {
			d.Fatalf(t, "%s: %q is not epoch@start", key, v)
		}
		ep, err1 := strconv.ParseInt(e, 10, 32)
		st, err2 := strconv.ParseInt(s, 10, 64)
		if err1 != nil || err2 != nil {
			d.Fatalf(t, "%s: %q is not epoch@start", key, v)
		}
		out = append(out, kafkalog.EpochEntry{Epoch: int32(ep), StartOffset: st})
	}
	return out
}

func printActions(b *strings.Builder, acts []Action) {
	if len(acts) == 0 {
		b.WriteString("no actions\n")
	}
	for _, a := range acts {
		fmt.Fprintln(b, a)
	}
}

func errName(err *kerr.Error) string {
	if err == nil {
		return "ok"
	}
	return err.Message
}

func (l *Leader) describe(b *strings.Builder) {
	fmt.Fprintf(b, "hw=%d epoch=%d isr=%v", l.hw, l.st.LeaderEpoch, l.st.ISR)
	if l.applied != l.hw {
		fmt.Fprintf(b, " applied=%d", l.applied)
	}
	if l.pending != nil {
		fmt.Fprintf(b, " pending=%v", *l.pending)
	}
	b.WriteString("\n")
	ids := make([]int32, 0, len(l.followers))
	for r := range l.followers {
		ids = append(ids, r)
	}
	slices.Sort(ids)
	for _, r := range ids {
		f := l.followers[r]
		fmt.Fprintf(b, "  %d: leo=%d caught-up=%s\n", r, f.LEO, f.LastCaughtUp.Sub(t0))
	}
}

// TestLeaderScripts runs testdata/leader/*: HW advance, ISR shrink and
// expand under lag, min.insync.replicas, duplicated and stale fetches.
//
//	new-leader self=1 epoch=E [pe=N] replicas=(..) isr=(..) leo=N hw=N lag=DUR min-isr=N [t=DUR]
//	fetch replica=R offset=N leo=N [epoch=E] [inc=I seq=S] [t=DUR] [hold]
//	    FollowerFetchStamped (inc, seq: the FetchStamp, 0 unstamped), then MaybeAdvanceHW
//	append leo=N [hold]          the leader appended; its log ends at N
//	hw-applied hw=N              HWApplied (the driver set the log's HW)
//	steady leo=N from=DUR to=DUR every=DUR per=N replicas=(..) behind=(..)
//	    continuous produce: from a log end of leo at from, the leader
//	    appends per records every step until to; at each step each replica
//	    listed fetches with the leader's log end behind[i] steps earlier
//	    as its offset (-1: its last offset, a stuck follower), then
//	    MaybeAdvanceHW and Tick run. Prints the ISR proposals with their
//	    time, then the state.
//
// As the broker does, an AdvanceHW is applied to the log at once
// (HWApplied) unless the command says hold.
//
//	tick t=DUR                   ISR expiration
//	isr-changed pe=N isr=(..) [replicas=(..)] leo=N [t=DUR]
//	isr-refused
//	produce acks=A               CheckProduce
//	ack required=N               AckDone
//	state
func TestLeaderScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/leader", func(t *testing.T, path string) {
		var l *Leader
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var b strings.Builder
			if l == nil && d.Cmd != "new-leader" {
				d.Fatalf(t, "new-leader first")
			}
			now := argTime(t, d)
			leo := argInt(t, d, "leo", 0)
			switch d.Cmd {
			case "new-leader":
				var lag time.Duration
				d.ScanArgs(t, "lag", &lag)
				l = NewLeader(LeaderState{
					Self: int32(argInt(t, d, "self", 1)), LeaderEpoch: int32(argInt(t, d, "epoch", 0)),
					PartitionEpoch: int32(argInt(t, d, "pe", 0)),
					Replicas:       argIDs(t, d, "replicas"), ISR: argIDs(t, d, "isr"),
				}, leo, argInt(t, d, "hw", 0), now, lag, int(argInt(t, d, "min-isr", 1)))
				l.describe(&b)
			case "fetch":
				stamp := FetchStamp{Incarnation: uint64(argInt(t, d, "inc", 0)), Seq: uint64(argInt(t, d, "seq", 0)), BrokerEpoch: argInt(t, d, "bepoch", 0)}
				err, acts := l.FollowerFetchStamped(now, int32(argInt(t, d, "replica", 0)), int32(argInt(t, d, "epoch", -1)), argInt(t, d, "offset", 0), leo, stamp)
				fmt.Fprintf(&b, "error: %s\n", errName(err))
				if err == nil {
					acts = append(acts, l.MaybeAdvanceHW(leo)...)
				}
				printActions(&b, acts)
				applyHW(d, l, acts)
				l.describe(&b)
			case "append":
				acts := l.MaybeAdvanceHW(leo)
				printActions(&b, acts)
				applyHW(d, l, acts)
				l.describe(&b)
			case "steady":
				steady(t, d, l, &b)
				l.describe(&b)
			case "hw-applied":
				l.HWApplied(argInt(t, d, "hw", 0))
				l.describe(&b)
			case "tick":
				if !d.HasArg("leo") {
					d.Fatalf(t, "tick needs leo= (the leader's log end)")
				}
				printActions(&b, l.Tick(now, leo))
				l.describe(&b)
			case "isr-changed":
				replicas := argIDs(t, d, "replicas")
				if replicas == nil {
					replicas = l.st.Replicas
				}
				acts := l.ISRChanged(int32(argInt(t, d, "pe", 0)), replicas, argIDs(t, d, "isr"), leo, now)
				printActions(&b, acts)
				applyHW(d, l, acts)
				l.describe(&b)
			case "isr-refused":
				l.ISRRefused()
				l.describe(&b)
			case "produce":
				fmt.Fprintf(&b, "%s\n", errName(l.CheckProduce(int16(argInt(t, d, "acks", -1)))))
			case "ack":
				done, err := l.AckDone(argInt(t, d, "required", 0))
				fmt.Fprintf(&b, "done=%t error=%s\n", done, errName(err))
			case "state":
				l.describe(&b)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			return b.String()
		})
	})
}

func steady(t *testing.T, d *datadriven.TestData, l *Leader, b *strings.Builder) {
	var from, to, every time.Duration
	d.ScanArgs(t, "from", &from)
	d.ScanArgs(t, "to", &to)
	d.ScanArgs(t, "every", &every)
	per := argInt(t, d, "per", 1)
	reps, behind := argIDs(t, d, "replicas"), argIDs(t, d, "behind")
	if len(reps) != len(behind) || every <= 0 {
		d.Fatalf(t, "steady: replicas and behind differ in length, or no step")
	}
	hist := []int64{argInt(t, d, "leo", 0)} // the leader's log end at each step
	proposals := 0
	for at := from + every; at <= to; at += every {
		now := t0.Add(at)
		leo := hist[len(hist)-1] + per
		hist = append(hist, leo)
		var acts []Action
		for i, r := range reps {
			var off int64
			if behind[i] < 0 {
				p, _ := l.Follower(r)
				off = max(p.LEO, 0)
			} else {
				off = hist[max(len(hist)-1-int(behind[i]), 0)]
			}
			err, a := l.FollowerFetch(now, r, -1, off, leo)
			if err != nil {
				fmt.Fprintf(b, "%s: fetch of %d: %s\n", at, r, errName(err))
			}
			acts = append(acts, a...)
		}
		acts = append(acts, l.MaybeAdvanceHW(leo)...)
		acts = append(acts, l.Tick(now, leo)...)
		for _, a := range acts {
			switch a := a.(type) {
			case AdvanceHW:
				l.HWApplied(a.HW)
			case ProposeISR:
				fmt.Fprintf(b, "%s: %s\n", at, a)
				proposals++
			}
		}
	}
	if proposals == 0 {
		b.WriteString("no ISR proposals\n")
	}
}

// applyHW carries out the AdvanceHW of acts as the broker does, unless
// the command holds them.
func applyHW(d *datadriven.TestData, l *Leader, acts []Action) {
	if d.HasArg("hold") {
		return
	}
	for _, a := range acts {
		if a, ok := a.(AdvanceHW); ok {
			l.HWApplied(a.HW)
		}
	}
}

// TestTruncationScripts runs testdata/truncation/*: the truncation rule on
// its own, one step or to the end against scripted answers.
//
//	step local=(e@s,..) leo=N asked=E answer=E@END
//	walk local=(e@s,..) leo=N answers=(asked:e@end,..)
func TestTruncationScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/truncation", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			local := argEpochs(t, d, "local")
			leo := argInt(t, d, "leo", 0)
			switch d.Cmd {
			case "step":
				ans := argEpochs(t, d, "answer")
				if len(ans) != 1 {
					d.Fatalf(t, "answer=E@END")
				}
				st := Truncation(local, leo, int32(argInt(t, d, "asked", 0)), EpochAnswer{Epoch: ans[0].Epoch, EndOffset: ans[0].StartOffset})
				return fmt.Sprintf("to=%d complete=%t\n", st.To, st.Complete)
			case "walk":
				answers := map[int32]EpochAnswer{}
				a, _ := d.Arg("answers")
				for _, v := range a.Vals {
					if strings.TrimSpace(v) == "" {
						continue
					}
					k, rest, _ := strings.Cut(strings.TrimSpace(v), ":")
					e, end, _ := strings.Cut(rest, "@")
					kk, _ := strconv.ParseInt(k, 10, 32)
					ee, _ := strconv.ParseInt(e, 10, 32)
					nn, _ := strconv.ParseInt(end, 10, 64)
					answers[int32(kk)] = EpochAnswer{Epoch: int32(ee), EndOffset: nn}
				}
				var b strings.Builder
				to, err := TruncationOffset(local, leo, func(e int32) (int32, int64, error) {
					ans, ok := answers[e]
					if !ok {
						return 0, 0, fmt.Errorf("no answer scripted for epoch %d", e)
					}
					fmt.Fprintf(&b, "ask %d -> %d@%d\n", e, ans.Epoch, ans.EndOffset)
					return ans.Epoch, ans.EndOffset, nil
				})
				if err != nil {
					fmt.Fprintf(&b, "error: %v\n", err)
				} else {
					fmt.Fprintf(&b, "truncate to %d\n", to)
				}
				return b.String()
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			return ""
		})
	})
}

func argMode(t testing.TB, d *datadriven.TestData) Mode {
	var m string
	d.MaybeScanArgs(t, "mode", &m)
	if m == "remotewal" {
		return RemoteWAL
	}
	return Classic
}

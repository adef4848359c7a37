package replica

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kerr"
)

// simLog is a replica's log in the cluster scripts: the leader epoch of
// each offset (one record per batch) and the high watermark.
type simLog struct {
	recs []int32
	hw   int64
}

// epochs is the leader-epoch cache the records imply.
func (l *simLog) epochs() []kafkalog.EpochEntry {
	var out []kafkalog.EpochEntry
	for i, e := range l.recs {
		if i == 0 || e != l.recs[i-1] {
			out = append(out, kafkalog.EpochEntry{Epoch: e, StartOffset: int64(i)})
		}
	}
	return out
}

func (l *simLog) view() LogView {
	return LogView{LEO: int64(len(l.recs)), HW: l.hw, Epochs: l.epochs()}
}

// answer is what this log, leading, answers to OffsetForLeaderEpoch.
func (l *simLog) answer(epoch int32) EpochAnswer {
	e, o := endOffsetFor(l.epochs(), epoch, int64(len(l.recs)))
	return EpochAnswer{Epoch: e, EndOffset: o}
}

func (l *simLog) truncate(to int64) {
	if to < int64(len(l.recs)) {
		l.recs = l.recs[:to]
	}
	l.hw = min(l.hw, int64(len(l.recs)))
}

// appendRecs appends records encoded one byte (its epoch) per record, with
// kafkalog's epoch regression check.
func (l *simLog) appendRecs(b []byte) error {
	for _, e := range b {
		if n := len(l.recs); n > 0 && int32(e) < l.recs[n-1] {
			return kafkalog.ErrEpochRegression
		}
		l.recs = append(l.recs, int32(e))
	}
	return nil
}

func (l *simLog) String() string {
	parts := make([]string, len(l.recs))
	for i, e := range l.recs {
		parts[i] = strconv.Itoa(int(e))
	}
	return fmt.Sprintf("[%s] hw=%d", strings.Join(parts, " "), l.hw)
}

// TestClusterScripts runs testdata/cluster/*: replicas that lead in turn
// and follow with the Follower machine, checking that KIP-101/KIP-279
// truncation makes divergent logs agree after leader changes.
//
//	set broker=B log=(e,e,..) [hw=N]
//	append broker=B epoch=E n=N           B leads at E and appends n records
//	replicate leader=L follower=F epoch=E [max=N]
//	                                      a new Follower of L at E runs until
//	                                      caught up (or max records fetched)
//	print
func TestClusterScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/cluster", func(t *testing.T, path string) {
		logs := map[string]*simLog{}
		get := func(name string) *simLog {
			if logs[name] == nil {
				logs[name] = &simLog{}
			}
			return logs[name]
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var b strings.Builder
			switch d.Cmd {
			case "set":
				var name string
				d.ScanArgs(t, "broker", &name)
				l := get(name)
				l.recs = argIDs(t, d, "log")
				l.hw = argInt(t, d, "hw", 0)
			case "append":
				var name string
				d.ScanArgs(t, "broker", &name)
				l := get(name)
				e := int32(argInt(t, d, "epoch", 0))
				for range argInt(t, d, "n", 1) {
					l.recs = append(l.recs, e)
				}
			case "replicate":
				var ln, fn string
				d.ScanArgs(t, "leader", &ln)
				d.ScanArgs(t, "follower", &fn)
				runFollower(t, &b, get(ln), get(fn), fn, int32(argInt(t, d, "epoch", 0)), argInt(t, d, "max", 1<<30))
			case "print":
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			names := make([]string, 0, len(logs))
			for n := range logs {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(&b, "%s: %s\n", n, logs[n])
			}
			return b.String()
		})
	})
}

// runFollower drives a Follower of leader at epoch against in-memory logs,
// carrying out its actions, until a fetch brings nothing or budget records
// were fetched. Each fetch brings at most 2 records, so appends and HW
// updates interleave.
func runFollower(t *testing.T, b *strings.Builder, leader, fl *simLog, name string, epoch int32, budget int64) {
	f := NewFollower(Classic, epoch, time.Second)
	now := t0
	for range 100 {
		acts := f.Next(now, fl.view())
		if len(acts) == 0 {
			t.Fatalf("follower idle without a request")
		}
		var more []Action
		for _, a := range acts {
			switch a := a.(type) {
			case SendEpochQuery:
				ans := leader.answer(a.Epoch)
				fmt.Fprintf(b, "%s asks epoch %d: leader answers %d@%d\n", name, a.Epoch, ans.Epoch, ans.EndOffset)
				more = append(more, f.EpochAnswered(now, fl.view(), a.Req, nil, ans)...)
			case SendFetch:
				var r FetchPartition
				r.HighWatermark, r.LeaderLEO = leader.hw, -1
				switch {
				case a.Offset > int64(len(leader.recs)):
					r.Err = kerr.OffsetOutOfRange
				default:
					n := min(int64(len(leader.recs))-a.Offset, 2, budget)
					budget -= n
					for _, e := range leader.recs[a.Offset : a.Offset+n] {
						r.Records = append(r.Records, byte(e))
					}
				}
				more = append(more, f.Fetched(now, fl.view(), a.Req, r)...)
				if r.Err == nil && len(r.Records) == 0 {
					carry(t, b, f, fl, name, more)
					return
				}
			case StartRemote:
				t.Fatalf("classic follower started remote")
			}
		}
		carry(t, b, f, fl, name, more)
	}
	t.Fatalf("follower did not converge in 100 rounds")
}

func carry(t *testing.T, b *strings.Builder, f *Follower, fl *simLog, name string, acts []Action) {
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a := a.(type) {
		case Truncate:
			fmt.Fprintf(b, "%s truncates to %d\n", name, a.To)
			fl.truncate(a.To)
		case Append:
			err := fl.appendRecs(a.Records)
			if err != nil {
				fmt.Fprintf(b, "%s append refused: %v\n", name, err)
			}
			acts = append(acts, f.AppendDone(t0, fl.view(), err)...)
		case SetHW:
			fl.hw = a.HW
		case TruncateFully:
			fmt.Fprintf(b, "%s starts over at %d\n", name, a.StartAt)
			fl.recs = nil
		case Backoff:
			t.Fatalf("unexpected %v", a)
		}
	}
}

// TestFollowerScripts runs testdata/follower/*: one Follower machine fed
// events by hand, including duplicated, reordered and stale ones, and a
// remote-WAL follower fenced by a newer epoch. The log view follows the
// actions (truncate, append, set-hw).
//
//	follower mode=classic|remotewal epoch=E backoff=DUR
//	log leo=N [hw=N] [start=N] epochs=(e@s,..)
//	next [t=DUR]
//	epoch-answer [req=N] answer=E@END [err=fenced|unknown]
//	fetched [req=N] [hw=N] [leader-leo=N] [records=N] [err=out-of-range|fenced|unknown] [log-start=N] [t=DUR]
//	append-done [err=overlap|gap|regression|stale|io] [t=DUR]
//	report                                 a remote-WAL reader appended: Report
//	reported [hw=N] [leader-leo=N] [err=...] the leader's answer to the report
//	failed                                 the connection dropped the last request
//	judge epoch=E last=N leader-epoch=E local-epoch=E [answer=E@END]
func TestFollowerScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/follower", func(t *testing.T, path string) {
		var f *Follower
		var v LogView
		var appending int64 // records in the Append in flight
		var lastReq uint64  // the last request sent; answers go to it unless req= says
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var b strings.Builder
			now := argTime(t, d)
			var acts []Action
			switch d.Cmd {
			case "follower":
				var bo time.Duration
				d.ScanArgs(t, "backoff", &bo)
				f = NewFollower(argMode(t, d), int32(argInt(t, d, "epoch", 0)), bo)
				return "ok\n"
			case "log":
				v = LogView{LEO: argInt(t, d, "leo", 0), HW: argInt(t, d, "hw", 0), LogStart: argInt(t, d, "start", 0), Epochs: argEpochs(t, d, "epochs")}
				return "ok\n"
			case "next":
				acts = f.Next(now, v)
			case "epoch-answer":
				ans := argEpochs(t, d, "answer")
				acts = f.EpochAnswered(now, v, uint64(argInt(t, d, "req", int64(lastReq))), argErr(t, d), EpochAnswer{Epoch: ans[0].Epoch, EndOffset: ans[0].StartOffset})
			case "fetched":
				r := FetchPartition{Err: argErr(t, d), HighWatermark: argInt(t, d, "hw", 0), LeaderLEO: argInt(t, d, "leader-leo", -1), LogStart: argInt(t, d, "log-start", 0)}
				r.Records = make([]byte, argInt(t, d, "records", 0))
				acts = f.Fetched(now, v, uint64(argInt(t, d, "req", int64(lastReq))), r)
			case "append-done":
				var err error
				var s string
				d.MaybeScanArgs(t, "err", &s)
				switch s {
				case "":
					v.LEO += appending
				case "overlap":
					err = kafkalog.ErrOffsetOverlap
				case "gap":
					err = kafkalog.ErrOffsetGap
				case "regression":
					err = kafkalog.ErrEpochRegression
				case "stale":
					err = ErrStale
				default:
					err = errors.New(s)
				}
				appending = 0
				acts = f.AppendDone(now, v, err)
			case "report":
				if r, ok := f.Report(v); ok {
					acts = []Action{r}
				}
			case "reported":
				acts = f.Reported(v, FetchPartition{Err: argErr(t, d), HighWatermark: argInt(t, d, "hw", 0), LeaderLEO: argInt(t, d, "leader-leo", -1)})
			case "failed":
				f.RequestFailed(lastReq)
				return "ok\n"
			case "judge":
				ans := argEpochs(t, d, "answer")
				a, known := EpochAnswer{}, len(ans) == 1
				if known {
					a = EpochAnswer{Epoch: ans[0].Epoch, EndOffset: ans[0].StartOffset}
				}
				return JudgeSlice(int32(argInt(t, d, "epoch", 0)), argInt(t, d, "last", 0), int32(argInt(t, d, "leader-epoch", 0)), int32(argInt(t, d, "local-epoch", -1)), a, known).String() + "\n"
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			for _, a := range acts {
				switch a := a.(type) {
				case Truncate:
					v.LEO = min(v.LEO, a.To)
					v.HW = min(v.HW, v.LEO)
					v.Epochs = cutEntries(slices.Clone(v.Epochs), v.LEO)
				case TruncateFully:
					v = LogView{LogStart: a.StartAt, LEO: a.StartAt, HW: a.StartAt}
				case Append:
					appending = int64(len(a.Records))
				case SetHW:
					v.HW = a.HW
				case SendEpochQuery:
					lastReq = a.Req
				case SendFetch:
					lastReq = a.Req
				case Backoff:
					fmt.Fprintf(&b, "backoff until %s: %s\n", a.Until.Sub(t0), a.Reason)
					continue
				}
				fmt.Fprintln(&b, a)
			}
			if len(acts) == 0 {
				b.WriteString("no actions\n")
			}
			fmt.Fprintf(&b, "log: leo=%d hw=%d epochs=%v truncated=%t\n", v.LEO, v.HW, v.Epochs, f.Truncated())
			return b.String()
		})
	})
}

func argErr(t testing.TB, d *datadriven.TestData) *kerr.Error {
	var s string
	d.MaybeScanArgs(t, "err", &s)
	switch s {
	case "":
		return nil
	case "out-of-range":
		return kerr.OffsetOutOfRange
	case "fenced":
		return kerr.FencedLeaderEpoch
	case "unknown":
		return kerr.UnknownLeaderEpoch
	case "not-leader":
		return kerr.NotLeaderForPartition
	}
	d.Fatalf(t, "unknown error %q", s)
	return nil
}

package replica

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// testSlot is a RemoteSlot of a script.
type testSlot struct {
	rs   RemoteSlice
	busy bool
}

func (s *testSlot) RemoteSlice() *RemoteSlice { return &s.rs }
func (s *testSlot) Busy() bool                { return s.busy }

type testSlices []*testSlot

// argSlices reads slices written base-last@epoch:length, a trailing *
// marking a busy one, in chain order.
func argSlices(t *testing.T, d *datadriven.TestData) testSlices {
	t.Helper()
	a, ok := d.Arg("slices")
	if !ok {
		return nil
	}
	var out testSlices
	for _, v := range a.Vals {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		s := &testSlot{}
		if strings.HasSuffix(v, "*") {
			s.busy, v = true, strings.TrimSuffix(v, "*")
		}
		rng, rest, ok1 := strings.Cut(v, "@")
		ep, length, ok2 := strings.Cut(rest, ":")
		b, l, ok3 := strings.Cut(rng, "-")
		bv, e1 := strconv.ParseInt(b, 10, 64)
		lv, e2 := strconv.ParseInt(l, 10, 64)
		epv, e3 := strconv.ParseInt(ep, 10, 32)
		lenv, e4 := strconv.ParseInt(length, 10, 64)
		if !ok1 || !ok2 || !ok3 || e1 != nil || e2 != nil || e3 != nil || e4 != nil {
			d.Fatalf(t, "slice %q is not base-last@epoch:length[*]", v)
		}
		s.rs = RemoteSlice{BaseOffset: bv, LastOffset: lv, LeaderEpoch: int32(epv), Length: lenv}
		out = append(out, s)
	}
	return out
}

// argFence reads the leader's answers written asked:epoch@end.
func argFence(t *testing.T, d *datadriven.TestData) map[int32]EpochAnswer {
	t.Helper()
	out := map[int32]EpochAnswer{}
	a, ok := d.Arg("fence")
	if !ok {
		return out
	}
	for _, v := range a.Vals {
		asked, ans, ok := strings.Cut(strings.TrimSpace(v), ":")
		e, end, ok2 := strings.Cut(ans, "@")
		av, e1 := strconv.ParseInt(asked, 10, 32)
		ev, e2 := strconv.ParseInt(e, 10, 32)
		endv, e3 := strconv.ParseInt(end, 10, 64)
		if !ok || !ok2 || e1 != nil || e2 != nil || e3 != nil {
			d.Fatalf(t, "fence %q is not asked:epoch@end", v)
		}
		out[int32(av)] = EpochAnswer{Epoch: int32(ev), EndOffset: endv}
	}
	return out
}

func argDur(t *testing.T, d *datadriven.TestData, key string) (time.Duration, bool) {
	t.Helper()
	if !d.HasArg(key) {
		return 0, false
	}
	var v time.Duration
	d.ScanArgs(t, key, &v)
	return v, true
}

var gapNames = [...]string{NoGap: "", GapLag: "lag", GapHole: "hole", GapFenced: "fenced", GapFutureEpoch: "future-epoch"}

// TestRemotePlanScripts runs testdata/remote/*: the remote-WAL
// follower's planner (what it reads next, which epochs it asks about,
// when it falls back to the leader) over scripted partition states.
//
//	plan leo=N epoch=E [leader-leo=N] [local-epoch=E] slices=(base-last@epoch:len[*],..)
//	     [fence=(asked:epoch@end,..)] [failures=N] [retry=DUR] [stuck=DUR]
//	     [fallback-until=N] [read-ahead=N] [gap-timeout=DUR] [attempts=N] [t=DUR]
//
// retry and stuck are times (from t0) like t. The summary is computed
// from the same slices, as the driver does. Defaults: read-ahead 1000
// bytes, gap timeout 500ms, 3 attempts, local epoch -1.
func TestRemotePlanScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/remote", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "plan" {
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			sl := argSlices(t, d)
			v := RemoteView{
				LEO: argInt(t, d, "leo", 0), LeaderEpoch: int32(argInt(t, d, "epoch", 0)),
				LeaderLogEnd: argInt(t, d, "leader-leo", 0), LocalEpoch: int32(argInt(t, d, "local-epoch", -1)),
				Fence: argFence(t, d), Failures: int(argInt(t, d, "failures", 0)), FallbackUntil: argInt(t, d, "fallback-until", 0),
			}
			if r, ok := argDur(t, d, "retry"); ok {
				v.RetryAt = t0.Add(r)
			}
			if s, ok := argDur(t, d, "stuck"); ok {
				v.StuckSince = t0.Add(s)
			}
			v.Summary = SummarizeRemote(sl, v.LEO, v.LeaderEpoch, v.LocalEpoch, v.Fence)
			lim := RemoteLimits{ReadAheadBytes: argInt(t, d, "read-ahead", 1000), GapTimeout: 500 * time.Millisecond, MaxReadAttempts: int(argInt(t, d, "attempts", 3))}
			if g, ok := argDur(t, d, "gap-timeout"); ok {
				lim.GapTimeout = g
			}
			p := PlanRemote(argTime(t, d), v, sl, lim, nil)
			var b strings.Builder
			var read []string
			for _, i := range p.Read {
				s := sl[i].rs
				read = append(read, fmt.Sprintf("%d-%d@%d", s.BaseOffset, s.LastOffset, s.LeaderEpoch))
			}
			fmt.Fprintf(&b, "read: %v\n", read)
			fmt.Fprintf(&b, "target=%d fenced=%d ask=%v\n", p.Target, p.Fenced, p.Ask)
			if p.Fallback {
				fmt.Fprintf(&b, "fallback until=%d", p.FallbackUntil)
				if p.GapCause != NoGap {
					fmt.Fprintf(&b, " cause=%s", gapNames[p.GapCause])
				}
				b.WriteString("\n")
			}
			if !p.StuckSince.IsZero() {
				fmt.Fprintf(&b, "stuck since %s\n", p.StuckSince.Sub(t0))
			}
			if !p.WakeAt.IsZero() {
				fmt.Fprintf(&b, "wake at %s\n", p.WakeAt.Sub(t0))
			}
			return b.String()
		})
	})
}

// objectSet keeps every object it was given, past its array too, and no
// other.
func TestObjectSet(t *testing.T) {
	var s objectSet
	for o := uint64(1); o <= 20; o++ {
		if s.has(o) {
			t.Fatalf("%d before it was added", o)
		}
		s.add(o)
		if s.len() != int(o) {
			t.Fatalf("len %d after %d adds", s.len(), o)
		}
		for p := uint64(1); p <= 21; p++ {
			if s.has(p) != (p <= o) {
				t.Fatalf("after adding 1..%d: has(%d) = %v", o, p, s.has(p))
			}
		}
	}
}

package replica

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestFollowerEventsProperty feeds a classic Follower seeded random
// events, answers included duplicated, delayed past later requests and
// reordered, and connection drops. Whatever the order: at most one request
// is outstanding; an answer counts only for the request in flight (a stale
// one changes nothing); Truncate only cuts; SetHW only raises the HW and
// never past the log end; Append comes only from the fetch in flight.
func TestFollowerEventsProperty(t *testing.T) {
	type sent struct {
		req    uint64
		query  bool
		epoch  int32
		answer EpochAnswer
		fetch  FetchPartition
	}
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 7))
		f := NewFollower(Classic, 5, time.Millisecond)
		v := LogView{LEO: 20, HW: 5, Epochs: []kafkalog.EpochEntry{{Epoch: 2, StartOffset: 0}, {Epoch: 4, StartOffset: 12}}}
		now := t0
		var history []sent // every request ever answered or to answer
		live := -1         // index in history of the request in flight
		appending := int64(-1)
		check := func(step int, acts []Action, fromLive bool) {
			for _, a := range acts {
				switch a := a.(type) {
				case Truncate:
					if a.To >= v.LEO || a.To < 0 {
						t.Fatalf("seed %d step %d: truncate to %d with log end %d", seed, step, a.To, v.LEO)
					}
					v.LEO, v.HW = a.To, min(v.HW, a.To)
					v.Epochs = cutEntries(v.Epochs, a.To)
				case SetHW:
					if a.HW <= v.HW || a.HW > v.LEO {
						t.Fatalf("seed %d step %d: set HW %d with HW %d, log end %d", seed, step, a.HW, v.HW, v.LEO)
					}
					v.HW = a.HW
				case Append:
					if !fromLive {
						t.Fatalf("seed %d step %d: append from a stale answer", seed, step)
					}
					appending = int64(len(a.Records))
				case TruncateFully:
					v = LogView{LogStart: a.StartAt, LEO: a.StartAt, HW: a.StartAt}
				}
			}
		}
		for step := range 300 {
			now = now.Add(time.Duration(rng.IntN(3)) * time.Millisecond)
			switch k := rng.IntN(10); {
			case k < 3:
				acts := f.Next(now, v)
				for _, a := range acts {
					switch a := a.(type) {
					case SendEpochQuery:
						if live >= 0 || appending >= 0 {
							t.Fatalf("seed %d step %d: second request in flight", seed, step)
						}
						history = append(history, sent{req: a.Req, query: true, epoch: a.Epoch, answer: EpochAnswer{Epoch: a.Epoch, EndOffset: int64(rng.IntN(int(v.LEO) + 3))}})
						live = len(history) - 1
					case SendFetch:
						if live >= 0 || appending >= 0 {
							t.Fatalf("seed %d step %d: second request in flight", seed, step)
						}
						if a.Offset != v.LEO {
							t.Fatalf("seed %d step %d: fetch at %d, log end %d", seed, step, a.Offset, v.LEO)
						}
						fp := FetchPartition{HighWatermark: v.LEO + int64(rng.IntN(5)), LeaderLEO: -1}
						if rng.IntN(2) == 0 {
							fp.Records = make([]byte, 1+rng.IntN(3))
						}
						if rng.IntN(8) == 0 {
							fp.Err = kerr.NotLeaderForPartition
						}
						history = append(history, sent{req: a.Req, fetch: fp})
						live = len(history) - 1
					}
				}
				check(step, acts, false)
			case k < 7 && len(history) > 0:
				// Deliver the live answer, or a stale or duplicate one.
				i := rng.IntN(len(history))
				if live >= 0 && rng.IntN(2) == 0 {
					i = live
				}
				h := history[i]
				fromLive := i == live
				if fromLive {
					live = -1
				}
				var acts []Action
				if h.query {
					acts = f.EpochAnswered(now, v, h.req, nil, h.answer)
				} else {
					acts = f.Fetched(now, v, h.req, h.fetch)
				}
				if !fromLive && len(acts) > 0 {
					t.Fatalf("seed %d step %d: stale answer acted on: %v", seed, step, acts)
				}
				check(step, acts, fromLive)
			case k < 9 && appending >= 0:
				var err error
				switch rng.IntN(4) {
				case 0:
					err = kafkalog.ErrOffsetOverlap
				case 1:
					err = errors.New("disk")
				default:
					v.LEO += appending
				}
				appending = -1
				check(step, f.AppendDone(now, v, err), true)
				check(step, f.AppendDone(now, v, err), false) // a duplicate does nothing
			default:
				if live >= 0 {
					f.RequestFailed(history[live].req)
					live = -1
				}
			}
			if v.HW > v.LEO {
				t.Fatalf("seed %d step %d: HW %d past log end %d", seed, step, v.HW, v.LEO)
			}
		}
	}
}

// TestRemoteLogEndReportsProperty feeds a remote-WAL Follower seeded
// random events: fetches and their answers (live, stale, duplicated),
// reader appends, reports and their answers in any order, dropped
// connections. Whatever the order: a report goes out only while a fetch
// is in flight, carries the log end, and only once per growth past what
// the fetch and the earlier reports carried; answers to reports never end
// the fetch in flight; SetHW only raises the HW, never past the log end.
func TestRemoteLogEndReportsProperty(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		f := NewFollower(RemoteWAL, 3, time.Millisecond)
		v := LogView{LEO: 10, HW: 4}
		now := t0
		if acts := f.Next(now, v); len(acts) != 2 { // no epochs: start-remote and a fetch
			t.Fatalf("seed %d: first actions %v", seed, acts)
		}
		inflight, req := true, uint64(1)
		carried := v.LEO // the highest log end a fetch or report in flight carried
		var answers []int64
		hws := func(step int, acts []Action) {
			for _, a := range acts {
				if a, ok := a.(SetHW); ok {
					if a.HW <= v.HW || a.HW > v.LEO {
						t.Fatalf("seed %d step %d: set HW %d with HW %d, log end %d", seed, step, a.HW, v.HW, v.LEO)
					}
					v.HW = a.HW
				}
			}
		}
		for step := range 400 {
			now = now.Add(time.Millisecond)
			switch k := rng.IntN(10); {
			case k < 3: // the reader appends
				v.LEO += int64(1 + rng.IntN(3))
			case k < 5:
				r, ok := f.Report(v)
				want := inflight && v.LEO > carried
				if ok != want {
					t.Fatalf("seed %d step %d: report %v (%+v) with fetch in flight %v, log end %d, carried %d", seed, step, ok, r, inflight, v.LEO, carried)
				}
				if ok {
					if r.Offset != v.LEO {
						t.Fatalf("seed %d step %d: report at %d, log end %d", seed, step, r.Offset, v.LEO)
					}
					carried = v.LEO
					answers = append(answers, r.Offset)
				}
			case k < 7 && len(answers) > 0: // a report's answer, maybe stale or repeated
				hw := answers[rng.IntN(len(answers))] - int64(rng.IntN(3))
				var err *kerr.Error
				if rng.IntN(6) == 0 {
					err = kerr.FencedLeaderEpoch
				}
				acts := f.Reported(v, FetchPartition{HighWatermark: hw, Err: err, LeaderLEO: -1})
				hws(step, acts)
				if inflight && len(f.Next(now, v)) > 0 {
					t.Fatalf("seed %d step %d: a report's answer ended the fetch in flight", seed, step)
				}
			case k < 9 && inflight: // the fetch's answer
				acts := f.Fetched(now, v, req, FetchPartition{HighWatermark: v.LEO - int64(rng.IntN(2)), LeaderLEO: v.LEO + 5})
				hws(step, acts)
				inflight = false
			default:
				if inflight && rng.IntN(2) == 0 {
					f.RequestFailed(req)
					inflight = false
				}
				if !inflight {
					for _, a := range f.Next(now, v) {
						if a, ok := a.(SendFetch); ok {
							if a.Offset != v.LEO {
								t.Fatalf("seed %d step %d: fetch at %d, log end %d", seed, step, a.Offset, v.LEO)
							}
							inflight, req, carried = true, a.Req, v.LEO
						}
					}
				}
			}
		}
	}
}

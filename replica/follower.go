package replica

import (
	"errors"
	"fmt"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Mode is how a follower's log grows.
type Mode int

const (
	// Classic: the follower appends the records its fetches bring back.
	Classic Mode = iota
	// RemoteWAL: fetches bring offsets, the HW and the leader's log end
	// but no records; once truncated, a remote-WAL reader feeds the log
	// from object storage (the follower package; see JudgeSlice).
	RemoteWAL
)

func (m Mode) String() string {
	if m == RemoteWAL {
		return "remotewal"
	}
	return "classic"
}

// LogView is what a follower machine needs of its local log, read by the
// driver just before the event.
type LogView struct {
	LogStart, LEO, HW int64
	Epochs            []kafkalog.EpochEntry // the leader-epoch cache
}

func (v LogView) latestEpoch() (int32, bool) {
	if len(v.Epochs) == 0 {
		return kafkalog.UndefinedEpoch, false
	}
	return v.Epochs[len(v.Epochs)-1].Epoch, true
}

// Follower actions.
type (
	// SendEpochQuery: ask the leader OffsetForLeaderEpoch about Epoch,
	// with the followed leader epoch as CurrentLeaderEpoch. Req names the
	// request: the driver gives it back with the answer.
	SendEpochQuery struct {
		Epoch int32
		Req   uint64
	}
	// SendFetch: fetch from the leader at Offset (the log end). The
	// fetch long-polls: the leader answers it when it appends, when its
	// HW moves, or when the wait is up.
	SendFetch struct {
		Req              uint64
		Offset, LogStart int64
	}
	// SendLogEndReport: a remote-WAL follower's log end grew past every
	// offset its fetches reported while one is in flight (its log grows
	// from object storage, not from that fetch). Report Offset to the
	// leader now with a fetch that does not wait, beside the one in
	// flight: the leader advances the HW at once, and the answer (see
	// Reported) brings it back one round trip after the append rather
	// than when the long poll ends.
	SendLogEndReport struct {
		Offset, LogStart int64
	}
	// Truncate: cut the log (and what derives from it) to To.
	Truncate struct{ To int64 }
	// TruncateFully: the log is behind the leader's log start: empty it
	// and start at StartAt.
	TruncateFully struct{ StartAt int64 }
	// Append: append Records as follower, then report AppendDone.
	Append struct{ Records []byte }
	// SetHW: set the follower's high watermark and wake its consumers.
	SetHW struct{ HW int64 }
	// StartRemote: truncation is done; start the remote-WAL reader.
	StartRemote struct{}
	// ObserveLeaderLogEnd: tell the remote-WAL reader the leader's log end.
	ObserveLeaderLogEnd struct{ LEO int64 }
	// Backoff: do not send for this partition before Until.
	Backoff struct {
		Until  time.Time
		Reason string
	}
)

func (SendEpochQuery) action()      {}
func (SendFetch) action()           {}
func (SendLogEndReport) action()    {}
func (Truncate) action()            {}
func (TruncateFully) action()       {}
func (Append) action()              {}
func (SetHW) action()               {}
func (StartRemote) action()         {}
func (ObserveLeaderLogEnd) action() {}
func (Backoff) action()             {}

func (a SendEpochQuery) String() string {
	return fmt.Sprintf("send-epoch-query %d req=%d", a.Epoch, a.Req)
}
func (a SendFetch) String() string {
	return fmt.Sprintf("send-fetch offset=%d log-start=%d req=%d", a.Offset, a.LogStart, a.Req)
}
func (a SendLogEndReport) String() string {
	return fmt.Sprintf("send-log-end-report offset=%d log-start=%d", a.Offset, a.LogStart)
}
func (a Truncate) String() string            { return fmt.Sprintf("truncate %d", a.To) }
func (a TruncateFully) String() string       { return fmt.Sprintf("truncate-fully %d", a.StartAt) }
func (a Append) String() string              { return fmt.Sprintf("append %d bytes", len(a.Records)) }
func (a SetHW) String() string               { return fmt.Sprintf("set-hw %d", a.HW) }
func (StartRemote) String() string           { return "start-remote" }
func (a ObserveLeaderLogEnd) String() string { return fmt.Sprintf("observe-leader-log-end %d", a.LEO) }
func (a Backoff) String() string             { return fmt.Sprintf("backoff %s", a.Reason) }

// Follower is one partition's follower-side replication state for one
// leader epoch: truncate by leader epoch first (KIP-101/KIP-279, see
// Truncation), then fetch at the log end and apply what comes back. A
// leader change is a new Follower. It does no I/O and reads no clock.
type Follower struct {
	mode      Mode
	epoch     int32
	backoff   time.Duration
	truncated bool
	started   bool   // remotewal: StartRemote given
	seq       uint64 // the last request's Req
	inflight  uint64 // Req of the request in flight, 0 none
	asked     int32  // epoch of the query in flight, -1
	fetching  bool   // the request in flight is a fetch
	pendingHW int64  // the leader HW of the fetch whose append is in flight, -1
	reported  int64  // remotewal: the highest log end a fetch or report in flight carried, -1
	leaderLEO int64  // remotewal: the highest leader log end heard (it only grows within an epoch), -1
	retryAt   time.Time
}

// NewFollower follows the leader at leaderEpoch; errors back off for
// backoff.
func NewFollower(mode Mode, leaderEpoch int32, backoff time.Duration) *Follower {
	return &Follower{mode: mode, epoch: leaderEpoch, backoff: backoff, asked: -1, pendingHW: -1, reported: -1, leaderLEO: -1}
}

// LeaderEpoch is the epoch followed.
func (f *Follower) LeaderEpoch() int32 { return f.epoch }

// Truncated reports whether truncation for this epoch is done.
func (f *Follower) Truncated() bool { return f.truncated }

// RetryAt is when a backing-off follower may send again (zero: now).
func (f *Follower) RetryAt() time.Time { return f.retryAt }

// Next says what to send for this partition at now: a SendEpochQuery
// while truncation is not done, else a SendFetch; nil while backing off
// or while a request is in flight. A follower with no epoch in its cache
// has nothing to truncate: Next marks it truncated and may return
// StartRemote before the fetch.
func (f *Follower) Next(now time.Time, v LogView) []Action {
	if now.Before(f.retryAt) || f.inflight != 0 || f.pendingHW >= 0 {
		return nil
	}
	var acts []Action
	f.seq++
	if !f.truncated {
		if e, ok := v.latestEpoch(); ok {
			f.asked, f.inflight = e, f.seq
			return []Action{SendEpochQuery{Epoch: e, Req: f.seq}}
		}
		acts = f.truncationDone(acts)
	}
	f.fetching, f.inflight = true, f.seq
	f.reported = v.LEO // lower after a truncation
	return append(acts, SendFetch{Req: f.seq, Offset: v.LEO, LogStart: v.LogStart})
}

// Report says, for a remote-WAL follower whose log end v.LEO grew while
// a fetch is in flight, to report it now (SendLogEndReport; once per
// growth, whatever the number of calls). Without a fetch in flight the
// next Next sends one at the log end, so nothing is to report.
func (f *Follower) Report(v LogView) (SendLogEndReport, bool) {
	if f.mode != RemoteWAL || !f.truncated || !f.fetching || f.inflight == 0 || v.LEO <= f.reported {
		return SendLogEndReport{}, false
	}
	f.reported = v.LEO
	return SendLogEndReport{Offset: v.LEO, LogStart: v.LogStart}, true
}

// Reported applies the leader's answer to a SendLogEndReport: its high
// watermark, as Fetched would (min(leader HW, log end), never lower), and
// its log end when higher than any heard (answers of the two connections
// may cross: an older one never lowers what the reader was told). It does
// not touch the fetch in flight, and an error is left to that fetch to
// meet: the report only made the news come earlier.
func (f *Follower) Reported(v LogView, r FetchPartition) []Action {
	if f.mode != RemoteWAL || r.Err != nil {
		return nil
	}
	var acts []Action
	if r.LeaderLEO > f.leaderLEO {
		f.leaderLEO = r.LeaderLEO
		acts = append(acts, ObserveLeaderLogEnd{LEO: r.LeaderLEO})
	}
	return append(acts, f.followHW(v, r.HighWatermark)...)
}

func (f *Follower) truncationDone(acts []Action) []Action {
	f.truncated = true
	if f.mode == RemoteWAL && !f.started {
		f.started = true
		acts = append(acts, StartRemote{})
	}
	return acts
}

func (f *Follower) backOff(now time.Time, why string) []Action {
	f.retryAt = now.Add(f.backoff)
	return []Action{Backoff{Until: f.retryAt, Reason: why}}
}

// RequestFailed: request req got no answer (the connection failed, or
// the request was not sent). The partition asks again at the next Next.
func (f *Follower) RequestFailed(req uint64) {
	if req == f.inflight {
		f.inflight, f.asked, f.fetching = 0, -1, false
	}
}

// EpochAnswered is the leader's answer to SendEpochQuery req: err is its
// partition error (nil: ans holds). An answer to any other request (a
// duplicate, a late one, a fetch's) is ignored.
func (f *Follower) EpochAnswered(now time.Time, v LogView, req uint64, err *kerr.Error, ans EpochAnswer) []Action {
	if req == 0 || req != f.inflight || f.fetching {
		return nil
	}
	asked := f.asked
	f.inflight, f.asked = 0, -1
	if err != nil {
		return f.backOff(now, "offset for leader epoch: "+err.Message)
	}
	st := Truncation(v.Epochs, v.LEO, asked, ans)
	var acts []Action
	if st.To < v.LEO {
		acts = append(acts, Truncate{To: st.To})
	}
	if st.Complete {
		acts = f.truncationDone(acts)
	}
	return acts
}

// TruncateFailed: the Truncate action failed; truncation is tried again
// after the backoff.
func (f *Follower) TruncateFailed(now time.Time) []Action {
	f.truncated = false
	return f.backOff(now, "truncate failed")
}

// FetchPartition is the leader's answer for this partition.
type FetchPartition struct {
	Err           *kerr.Error
	HighWatermark int64
	LogStart      int64
	LeaderLEO     int64 // remotewal: the leader's log end, -1 when absent
	Records       []byte
}

// Fetched applies the answer to SendFetch req; an answer to any other
// request is ignored. Classic records become an Append (the HW follows in
// AppendDone); otherwise the HW is min(leader HW, log end).
func (f *Follower) Fetched(now time.Time, v LogView, req uint64, r FetchPartition) []Action {
	if req == 0 || req != f.inflight || !f.fetching {
		return nil
	}
	f.inflight, f.fetching = 0, false
	switch {
	case r.Err == nil:
	case errors.Is(r.Err, kerr.OffsetOutOfRange):
		if r.LogStart > v.LEO {
			return []Action{TruncateFully{StartAt: r.LogStart}}
		}
		// Our log end is past the leader's: we diverged. Truncate again.
		f.truncated = false
		return nil
	default:
		return f.backOff(now, "fetch: "+r.Err.Message)
	}
	var acts []Action
	if f.mode == RemoteWAL && r.LeaderLEO >= 0 {
		// A report's answer may have brought a later one first.
		f.leaderLEO = max(f.leaderLEO, r.LeaderLEO)
		acts = append(acts, ObserveLeaderLogEnd{LEO: f.leaderLEO})
	}
	if f.mode == Classic && len(r.Records) > 0 {
		f.pendingHW = r.HighWatermark
		return append(acts, Append{Records: r.Records})
	}
	return append(acts, f.followHW(v, r.HighWatermark)...)
}

func (f *Follower) followHW(v LogView, leaderHW int64) []Action {
	if hw := min(leaderHW, v.LEO); hw > v.HW {
		return []Action{SetHW{HW: hw}}
	}
	return nil
}

// ErrStale is what a driver's append returns when the partition changed
// role or epoch under it: the answer is dropped.
var ErrStale = errors.New("replica: partition state changed during fetch")

// AppendDone is the outcome of the Append in flight; v is the log after
// it. An append that does not continue the log (overlap, gap, epoch
// regression) means divergence: truncate again. Other errors back off.
func (f *Follower) AppendDone(now time.Time, v LogView, err error) []Action {
	if f.pendingHW < 0 {
		return nil
	}
	hw := f.pendingHW
	f.pendingHW = -1
	switch {
	case err == nil:
		return f.followHW(v, hw)
	case errors.Is(err, ErrStale):
		return nil
	case errors.Is(err, kafkalog.ErrOffsetOverlap), errors.Is(err, kafkalog.ErrOffsetGap), errors.Is(err, kafkalog.ErrEpochRegression):
		f.truncated = false
		return nil
	}
	return f.backOff(now, "append: "+err.Error())
}

// Verdict is what epoch fencing says about a slice a remote-WAL follower
// found in the metadata index.
type Verdict int

const (
	Usable Verdict = iota // may be appended
	Wait                  // from an epoch newer than the known leader epoch
	Fenced                // from a cut-off part of an older epoch: never appended
	Ask                   // the leader's end for the slice's epoch is not known yet
)

func (v Verdict) String() string {
	return [...]string{"usable", "wait", "fenced", "ask"}[v]
}

// JudgeSlice fences a slice written at leader epoch epoch whose last
// offset is last, for a remote-WAL follower of leaderEpoch whose local log
// is at localEpoch. ans is the leader's answer for epoch, when known.
// Slices of the current leader epoch are usable; an older epoch's only
// when the leader's history has that very epoch ending after last (the
// rest is what a deposed leader wrote past the new leader's log end:
// invariant 5); a newer epoch waits for the leader change to reach us; one
// older than the local log's latest epoch is fenced (the log refuses the
// regression).
func JudgeSlice(epoch int32, last int64, leaderEpoch, localEpoch int32, ans EpochAnswer, known bool) Verdict {
	switch {
	case epoch > leaderEpoch:
		return Wait
	case epoch < localEpoch:
		return Fenced
	case epoch == leaderEpoch:
		return Usable
	case !known:
		return Ask
	case ans.Epoch == epoch && last < ans.EndOffset:
		return Usable
	}
	return Fenced
}

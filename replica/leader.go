package replica

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Action is something a state machine asks its driver to carry out.
type Action interface {
	fmt.Stringer
	action()
}

// AdvanceHW: the high watermark advanced to HW. The driver sets it on the
// log, then completes the waiting acks=all produces and fetches of the
// partition (purgatory CheckAndComplete).
type AdvanceHW struct{ HW int64 }

// ProposeISR: ask the controller for this ISR (AlterPartition). Until the
// driver calls ISRCommitted or ISRRefused no other proposal is made.
type ProposeISR struct {
	ISR    []int32
	Expand bool // a follower caught up; else lagging followers leave
	// LeaderEpoch and PartitionEpoch are the machine's when it decided:
	// the controller must judge the proposal at these epochs, never at
	// ones the driver reads later (by then the partition may have a new
	// leader, which the proposal would take out of its own ISR).
	LeaderEpoch, PartitionEpoch int32
}

func (AdvanceHW) action()  {}
func (ProposeISR) action() {}

func (a AdvanceHW) String() string { return fmt.Sprintf("advance-hw %d", a.HW) }
func (a ProposeISR) String() string {
	kind := "shrink"
	if a.Expand {
		kind = "expand"
	}
	return fmt.Sprintf("propose-isr %s %v", kind, a.ISR)
}

// LeaderState is the controller's state of the partition as the leader
// takes it.
type LeaderState struct {
	Self           int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
}

// Progress is what the leader knows of one follower: Kafka's
// ReplicaState.
type Progress struct {
	// LEO is the follower's last fetch offset (its log end); -1 until it
	// fetches from this leader.
	LEO int64
	// LastCaughtUp is the last time the follower was known to have the
	// leader's whole log (lastCaughtUpTimeMs): the latest time t such
	// that the follower's last fetch offset reached the leader's log end
	// as of t (see FollowerFetch).
	LastCaughtUp       time.Time
	LastFetchLeaderLEO int64
	LastFetchTime      time.Time
	lastSentHW         int64
	lastSentLEO        int64
	lastSentLogStart   int64
	// stamp is the newest FetchStamp whose offset became LEO: an older
	// stamp of the same incarnation is a fetch or report read before it
	// that arrived after it (two connections), and changes nothing.
	stamp FetchStamp
	// marks are earlier fetches (time, the leader's log end then), oldest
	// first, at most maxMarks, at least lagMax/maxMarks apart, none at or
	// before LastCaughtUp; the leader's log end only grows within an
	// epoch, so their log ends ascend too.
	marks []fetchMark
}

// fetchMark is the leader's log end at one of a follower's fetches.
type fetchMark struct {
	at  time.Time
	leo int64
}

// maxMarks bounds the fetch history kept per follower: LastCaughtUp is
// then exact to within replica.lag.time.max.ms/maxMarks. It errs early,
// never late: a follower may leave the ISR up to that much sooner than
// the exact rule says, never later.
const maxMarks = 32

// Leader is a partition's leader-side replication state: follower log
// ends, the ISR, the high watermark. It does no I/O and reads no clock;
// the driver passes the leader's log end and the time into each event and
// holds the machine under its own lock.
type Leader struct {
	st         LeaderState
	lagMax     time.Duration
	minISR     int
	epochStart int64 // log end when this leader's epoch began
	hw         int64
	applied    int64 // the HW readers of the log see (HWApplied), <= hw
	followers  map[int32]*Progress
	pending    *ProposeISR // in flight
}

// NewLeader starts a leader at st.LeaderEpoch whose log ends at leo with
// high watermark hw. Every follower counts as caught up at now (Kafka
// resets the followers' state so a new leader does not shrink the ISR at
// once).
func NewLeader(st LeaderState, leo, hw int64, now time.Time, lagMax time.Duration, minISR int) *Leader {
	l := &Leader{st: cloneState(st), lagMax: lagMax, minISR: minISR, epochStart: leo, hw: hw, applied: hw, followers: map[int32]*Progress{}}
	for _, r := range st.Replicas {
		if r != st.Self {
			l.followers[r] = &Progress{LEO: -1, LastCaughtUp: now, LastFetchTime: now, lastSentHW: -1, lastSentLEO: -1}
		}
	}
	return l
}

func cloneState(st LeaderState) LeaderState {
	st.Replicas, st.ISR = slices.Clone(st.Replicas), slices.Clone(st.ISR)
	return st
}

// HighWatermark is the leader's high watermark.
func (l *Leader) HighWatermark() int64 { return l.hw }

// LeaderEpoch is the epoch this leader leads.
func (l *Leader) LeaderEpoch() int32 { return l.st.LeaderEpoch }

// ISR is the committed ISR (a copy).
func (l *Leader) ISR() []int32 { return slices.Clone(l.st.ISR) }

// EpochStart is the leader's log end when its epoch began.
func (l *Leader) EpochStart() int64 { return l.epochStart }

// Follower returns what the leader knows of replica.
func (l *Leader) Follower(replica int32) (Progress, bool) {
	f := l.followers[replica]
	if f == nil {
		return Progress{}, false
	}
	return *f, true
}

// FollowerLEOs returns every follower's log end (-1 unknown).
func (l *Leader) FollowerLEOs() map[int32]int64 {
	out := make(map[int32]int64, len(l.followers))
	for r, f := range l.followers {
		out[r] = f.LEO
	}
	return out
}

// ISRChanged installs a committed ISR change at the same leader epoch
// (a newer partition epoch); stale ones are ignored. Any proposal in
// flight is over. The HW may advance (a slow follower left the ISR).
func (l *Leader) ISRChanged(partitionEpoch int32, replicas, isr []int32, leo int64, now time.Time) []Action {
	if partitionEpoch <= l.st.PartitionEpoch {
		return nil
	}
	l.st.PartitionEpoch = partitionEpoch
	l.st.ISR = slices.Clone(isr)
	l.st.Replicas = slices.Clone(replicas)
	for _, r := range replicas {
		if r != l.st.Self && l.followers[r] == nil {
			l.followers[r] = &Progress{LEO: -1, LastCaughtUp: now, LastFetchTime: now, lastSentHW: -1, lastSentLEO: -1}
		}
	}
	for r := range l.followers {
		if !slices.Contains(replicas, r) {
			delete(l.followers, r)
		}
	}
	l.pending = nil
	return l.MaybeAdvanceHW(leo)
}

// ISRRefused ends the proposal in flight: the controller said no.
func (l *Leader) ISRRefused() { l.pending = nil }

// maximalISR is the ISR plus a follower whose expansion is in flight
// (Kafka's maximalIsr): the HW waits for it as soon as it is proposed, so
// that the ISR the controller commits is never behind the HW.
func (l *Leader) maximalISR() []int32 {
	if l.pending != nil && l.pending.Expand {
		return l.pending.ISR
	}
	return l.st.ISR
}

// MaybeAdvanceHW moves the high watermark to the smallest log end over
// the (maximal) ISR, bounded by the leader's log end leo, never back. It
// waits while an ISR member has not fetched from this leader yet.
func (l *Leader) MaybeAdvanceHW(leo int64) []Action {
	hw := leo
	for _, r := range l.maximalISR() {
		if r == l.st.Self {
			continue
		}
		f := l.followers[r]
		if f == nil || f.LEO < 0 {
			return nil
		}
		hw = min(hw, f.LEO)
	}
	if hw <= l.hw {
		return nil
	}
	l.hw = hw
	return []Action{AdvanceHW{HW: hw}}
}

// FetchStamp orders one follower's fetches and log end reports, which
// reach the leader on two connections (a remote-WAL follower reports each
// append beside its long-poll fetch) and so may arrive in another order
// than the follower read its log end for them. Incarnation names the
// follower's process (a random id per broker start); Seq counts up within
// it, taken when the log end the request carries was read. BrokerEpoch is
// the epoch of the follower's registration with the controller when the
// stamp was taken (Kafka's broker epoch, which its replica fetches carry
// since KIP-903), 0 before the first: registrations are ordered, so it
// orders the stamps of two processes. The zero stamp is an unstamped fetch
// (any client but kwal's replica fetcher): it always counts, as in Kafka.
type FetchStamp struct {
	Incarnation, Seq uint64
	BrokerEpoch      int64
}

// IsZero reports an unstamped fetch.
func (s FetchStamp) IsZero() bool { return s == FetchStamp{} }

// before reports whether s was read no later than t: by the same process
// at or before t's sequence, or by a process that registered before t's
// did. The log end of an earlier process is stale once a later one has
// been heard from: a follower that restarts recovers its log from disk,
// which may end below what the dead process last fetched at (its
// unflushed tail is gone), and a fetch of the dead process still on the
// wire (a retransmission after a partition heals) must not raise the
// leader's view back over what the follower has. Two processes of which
// one has not registered yet are not ordered, and both count.
func (s FetchStamp) before(t FetchStamp) bool {
	if s.IsZero() || t.IsZero() {
		return false
	}
	if s.Incarnation == t.Incarnation {
		return s.Seq <= t.Seq
	}
	return s.BrokerEpoch > 0 && t.BrokerEpoch > 0 && s.BrokerEpoch < t.BrokerEpoch
}

// FollowerFetch is FollowerFetchStamped with an unstamped fetch.
func (l *Leader) FollowerFetch(now time.Time, replica int32, epoch int32, fetchOffset, leo int64) (*kerr.Error, []Action) {
	return l.FollowerFetchStamped(now, replica, epoch, fetchOffset, leo, FetchStamp{})
}

// FollowerFetchStamped is a follower's fetch at fetchOffset (its log end) with
// its current leader epoch (-1: not given), the leader's log end being
// leo: Kafka's updateFollowerFetchState, then maybeExpandIsr. It returns
// the partition error for the response and, when the follower reached
// both the HW and the start offset of this leader's epoch while out of the
// ISR, the expansion to propose. As Kafka does next, the driver then calls
// MaybeAdvanceHW (so that it knows to wake the waiting operations).
//
// A fetch whose stamp is older than the one the follower's LEO came from
// (see FetchStamp) is answered but changes nothing: its offset is a log
// end the follower had before the one already recorded. Taking the
// larger offset instead would be wrong, since a follower's log end goes
// down when it truncates (a divergence, also within one leader epoch),
// and its first fetch after that carries a newer stamp and a lower
// offset, which must lower the LEO: the HW never passes what the
// follower has.
func (l *Leader) FollowerFetchStamped(now time.Time, replica int32, epoch int32, fetchOffset, leo int64, stamp FetchStamp) (*kerr.Error, []Action) {
	if err := CheckEpoch(epoch, l.st.LeaderEpoch); err != nil {
		return err, nil
	}
	f := l.followers[replica]
	if f == nil {
		return kerr.NotLeaderForPartition, nil
	}
	if fetchOffset > leo || fetchOffset < 0 {
		return kerr.OffsetOutOfRange, nil
	}
	if stamp.before(f.stamp) {
		return nil, nil
	}
	if !stamp.IsZero() {
		f.stamp = stamp
	}
	l.caughtUp(f, now, fetchOffset, leo)
	f.LEO, f.LastFetchLeaderLEO, f.LastFetchTime = fetchOffset, leo, later(f.LastFetchTime, now)
	var acts []Action
	if l.pending == nil && !slices.Contains(l.st.ISR, replica) && fetchOffset >= l.hw && fetchOffset >= l.epochStart {
		isr := append(slices.Clone(l.st.ISR), replica)
		slices.Sort(isr)
		l.pending = &ProposeISR{ISR: isr, Expand: true, LeaderEpoch: l.st.LeaderEpoch, PartitionEpoch: l.st.PartitionEpoch}
		acts = append(acts, *l.pending)
	}
	return nil, acts
}

// caughtUp moves f.LastCaughtUp for a fetch at fetchOffset at now, the
// leader's log end being leo. Kafka's Replica.updateFetchState takes this
// fetch's time if the offset reaches leo, else the previous fetch's time
// if it reaches the leader's log end as of that fetch. That is exact for
// a classic follower, whose fetch returns everything up to the leader's
// log end, so that its next offset is at worst the previous fetch's log
// end. A remote-WAL follower's fetch returns no records: its log end
// trails the leader's by an upload and a read-back, many 2 ms fetches,
// and under steady produce it would not reach the previous fetch's log
// end, leaving the ISR while it keeps up. So the leader also keeps a
// short history of earlier fetches (marks) and takes the latest one whose
// log end the offset reaches: Kafka's own definition of
// lastCaughtUpTimeMs (the largest time t such that the offset of the most
// recent fetch is at least the leader's log end at t), of which its two
// cases are the first two steps.
func (l *Leader) caughtUp(f *Progress, now time.Time, fetchOffset, leo int64) {
	switch {
	case fetchOffset >= leo:
		f.LastCaughtUp = later(f.LastCaughtUp, now)
	case fetchOffset >= f.LastFetchLeaderLEO:
		f.LastCaughtUp = later(f.LastCaughtUp, f.LastFetchTime)
	default:
		for i := len(f.marks) - 1; i >= 0; i-- {
			if fetchOffset >= f.marks[i].leo {
				f.LastCaughtUp = later(f.LastCaughtUp, f.marks[i].at)
				break
			}
		}
	}
	// The previous fetch becomes a mark (this one is the next previous).
	if f.LastFetchLeaderLEO >= 0 {
		n := len(f.marks)
		if n == 0 || f.LastFetchTime.Sub(f.marks[n-1].at) >= l.lagMax/maxMarks {
			f.marks = append(f.marks, fetchMark{at: f.LastFetchTime, leo: f.LastFetchLeaderLEO})
		}
	}
	// Marks at or before LastCaughtUp can credit nothing later; past
	// maxMarks the oldest go (crediting them errs early, never late).
	drop := 0
	for drop < len(f.marks) && !f.marks[drop].at.After(f.LastCaughtUp) {
		drop++
	}
	drop = max(drop, len(f.marks)-maxMarks)
	if drop > 0 {
		f.marks = append(f.marks[:0], f.marks[drop:]...)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Tick is the ISR-expiration check (Kafka runs it every half
// replica.lag.time.max.ms), the leader's log end being leo: followers of
// the ISR that are out of sync (see LaggingReplicas) are proposed out.
func (l *Leader) Tick(now time.Time, leo int64) []Action {
	if l.pending != nil {
		return nil
	}
	lag := LaggingReplicas(l.st.ISR, l.st.Self, l.followers, now, l.lagMax, leo)
	if len(lag) == 0 {
		return nil
	}
	var isr []int32
	for _, r := range l.st.ISR {
		if !slices.Contains(lag, r) {
			isr = append(isr, r)
		}
	}
	l.pending = &ProposeISR{ISR: isr, LeaderEpoch: l.st.LeaderEpoch, PartitionEpoch: l.st.PartitionEpoch}
	return []Action{*l.pending}
}

// LaggingReplicas returns the ISR members other than leader that are out
// of sync when the leader's log ends at leo (Kafka's
// getOutOfSyncReplicas with ReplicaState.isCaughtUp): a member is in sync
// while its log end equals the leader's, however long ago it fetched, or
// while it last caught up at most lagMax before now. A member with no
// progress at all is out of sync; one that has not fetched from this
// leader yet (log end -1) has lagMax from the leader's start.
//
// A follower that stops fetching on an idle partition therefore stays in
// the ISR, as in Kafka: the controller removes it when its broker's
// session expires (fenceBroker), and the leader removes it at the first
// tick after the log end moves past it, since its last catch-up is then
// old.
func LaggingReplicas(isr []int32, leader int32, followers map[int32]*Progress, now time.Time, lagMax time.Duration, leo int64) []int32 {
	var out []int32
	for _, r := range isr {
		if r == leader {
			continue
		}
		f := followers[r]
		if f == nil || (f.LEO != leo && now.Sub(f.LastCaughtUp) > lagMax) {
			out = append(out, r)
		}
	}
	return out
}

// CheckProduce is the leader's check before an append with acks: an
// acks=all produce is refused with NOT_ENOUGH_REPLICAS while the ISR is
// smaller than min.insync.replicas.
func (l *Leader) CheckProduce(acks int16) *kerr.Error {
	if acks == -1 && len(l.st.ISR) < l.minISR {
		return kerr.NotEnoughReplicas
	}
	return nil
}

// HWApplied tells the machine that the driver carried out an AdvanceHW:
// the log's readers now see the high watermark hw (clamped to the
// machine's). AckDone waits for it, so that a produce is never answered
// before a fetch can return its records.
func (l *Leader) HWApplied(hw int64) { l.applied = max(l.applied, min(hw, l.hw)) }

// AckDone is the acks=all completion rule, the only one: it says whether
// a produce that needs the HW at required is answered, and with which
// error. It is done once the HW is there and applied to the log
// (HWApplied); the error is NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR
// shrank below min.insync.replicas meanwhile.
func (l *Leader) AckDone(required int64) (bool, *kerr.Error) {
	if l.applied < required {
		return false, nil
	}
	if len(l.st.ISR) < l.minISR {
		return true, kerr.NotEnoughReplicasAfterAppend
	}
	return true, nil
}

// Answer is what one fetch answer tells a follower: the high watermark,
// the log start and, in remotewal mode, the leader's log end (-1: the
// answer carries none). The driver builds it from the one reading of the
// log the answer carries, never a fresh one.
type Answer struct{ HW, LogStart, LEO int64 }

// News says which of a's values replica has not been told yet: a parked
// fetch of the follower is answered at once for any of them (a new HW
// lets it serve and ack; a new log start, which a DeleteRecords waits
// for; a new leader log end, which tells a remote-WAL follower that bytes
// exist). It records nothing: see Told. A replica that is not a follower
// has no news.
func (l *Leader) News(replica int32, a Answer) (hw, logStart, leo bool) {
	f := l.followers[replica]
	if f == nil {
		return false, false, false
	}
	return f.lastSentHW != a.HW, f.lastSentLogStart != a.LogStart, a.LEO >= 0 && f.lastSentLEO != a.LEO
}

// Told records that replica has been told a: the driver calls it once
// the answer was written to the follower's connection, never when it is
// only built. An answer to a fetch on a connection the follower has
// closed (the fetcher cut its long poll) is never read; counted as told,
// its news would leave the follower's next long poll waiting for a
// change it never got.
func (l *Leader) Told(replica int32, a Answer) {
	f := l.followers[replica]
	if f == nil {
		return
	}
	f.lastSentHW, f.lastSentLogStart = a.HW, a.LogStart
	if a.LEO >= 0 {
		f.lastSentLEO = a.LEO
	}
}

// CheckEpoch fences a client's or follower's current leader epoch against
// ours (-1: not given): FENCED_LEADER_EPOCH for an older one,
// UNKNOWN_LEADER_EPOCH for a newer one.
func CheckEpoch(current, ours int32) *kerr.Error {
	switch {
	case current < 0 || current == ours:
		return nil
	case current < ours:
		return kerr.FencedLeaderEpoch
	default:
		return kerr.UnknownLeaderEpoch
	}
}

// SetMinISR changes min.insync.replicas (AlterConfigs on a running
// partition); CheckProduce and AckDone use it from the next call.
func (l *Leader) SetMinISR(n int) { l.minISR = n }

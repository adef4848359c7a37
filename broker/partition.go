package broker

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kerr"
)

// followerState is what a leader knows of one follower replica.
type followerState struct {
	leo                int64 // -1: not fetched since this broker became leader
	lastCaughtUp       time.Time
	lastFetchLeaderLEO int64
	lastFetchTime      time.Time
	lastSentHW         int64
	lastSentLEO        int64 // remotewal: the leader log end last told
}

// partition is one replica of a partition on this broker.
type partition struct {
	tp      TopicPartition
	topicID TopicID // the topic incarnation this replica belongs to
	self    int32
	log     *kafkalog.Log
	mode    ReplicationMode
	clock   clock.Clock
	logger  *slog.Logger

	// appendMu serialises appends, truncations and role changes; it is
	// taken before mu. The producer table, minISR and configEpoch are
	// guarded by it.
	appendMu      sync.Mutex
	producers     producerTable
	minISR        int
	logAppendTime bool  // stamp batches with the append time (message.timestamp.type)
	configEpoch   int32 // topic epoch whose configs are applied

	mu struct {
		sync.Mutex
		known       bool // state was set at least once
		state       PartitionState
		leader      bool
		epochStart  int64 // log end when this broker became leader
		followers   map[int32]*followerState
		isrInflight bool
	}
}

// roleChange says what applyState did.
type roleChange int

const (
	roleSame roleChange = iota
	roleLeader
	roleFollower
	roleISR // ISR or other non-leadership change
)

// applyState installs a controller state; stale states are ignored.
func (p *partition) applyState(ps PartitionState) roleChange {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.known && (ps.LeaderEpoch < p.mu.state.LeaderEpoch ||
		(ps.LeaderEpoch == p.mu.state.LeaderEpoch && ps.PartitionEpoch <= p.mu.state.PartitionEpoch)) {
		return roleSame
	}
	first := !p.mu.known
	epochChanged := first || ps.LeaderEpoch != p.mu.state.LeaderEpoch
	p.mu.known = true
	p.mu.state = clonePartition(ps)
	p.mu.isrInflight = false
	wasLeader := p.mu.leader
	p.mu.leader = ps.Leader == p.self
	switch {
	case p.mu.leader && (epochChanged || !wasLeader):
		now := p.clock.Now()
		p.mu.epochStart = p.log.LogEndOffset()
		p.mu.followers = map[int32]*followerState{}
		for _, r := range ps.Replicas {
			if r != p.self {
				p.mu.followers[r] = &followerState{leo: -1, lastCaughtUp: now, lastFetchTime: now, lastSentHW: -1, lastSentLEO: -1}
			}
		}
		return roleLeader
	case !p.mu.leader && (epochChanged || wasLeader):
		p.mu.followers = nil
		return roleFollower
	}
	return roleISR
}

func (p *partition) snapshot() (PartitionState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return clonePartition(p.mu.state), p.mu.leader
}

// checkEpoch fences a client's or follower's current leader epoch (-1:
// not given).
func checkEpoch(current, ours int32) *kerr.Error {
	switch {
	case current < 0 || current == ours:
		return nil
	case current < ours:
		return kerr.FencedLeaderEpoch
	default:
		return kerr.UnknownLeaderEpoch
	}
}

// appendResult is a leader append's outcome for the response.
type appendResult struct {
	firstOffset, lastOffset int64
	logAppendTime           int64 // -1: CreateTime
	err                     *kerr.Error
	msg                     string
}

// appendAsLeader appends one produce partition's records, checking
// idempotent sequences.
func (p *partition) appendAsLeader(records []byte, acks int16) appendResult {
	// Kafka: v3+ produce carries exactly one batch per partition;
	// ValidateBatch refuses anything else.
	h, err := kafkalog.ValidateBatch(records)
	if err != nil {
		return appendResult{err: logErrorCode(err), msg: err.Error()}
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.mu.Lock()
	leader, epoch, isr := p.mu.leader, p.mu.state.LeaderEpoch, len(p.mu.state.ISR)
	p.mu.Unlock()
	if !leader {
		return appendResult{err: kerr.NotLeaderForPartition}
	}
	if acks == -1 && isr < p.minISR {
		return appendResult{err: kerr.NotEnoughReplicas, msg: "ISR is smaller than min.insync.replicas"}
	}
	lastSeq := lastSeqOf(h.BaseSequence, h.LastOffsetDelta+1)
	chk := p.producers.check(h.ProducerID, h.ProducerEpoch, h.BaseSequence, lastSeq)
	if chk.err != nil {
		return appendResult{err: chk.err}
	}
	if chk.dup != nil {
		p.logger.Debug("duplicate idempotent batch answered with its original offsets",
			"partition", p.tp, "producer_id", h.ProducerID, "first_seq", h.BaseSequence, "offset", chk.dup.firstOffset)
		return appendResult{firstOffset: chk.dup.firstOffset, lastOffset: chk.dup.lastOffset, logAppendTime: -1}
	}
	appendTime := int64(-1)
	if p.logAppendTime {
		appendTime = p.clock.Now().UnixMilli()
		records = stampLogAppendTime(records, appendTime)
	}
	info, err := p.log.AppendAsLeader(records, epoch)
	if err != nil {
		return appendResult{err: logErrorCode(err), msg: err.Error()}
	}
	p.producers.record(h.ProducerID, h.ProducerEpoch, producerBatch{
		firstSeq: h.BaseSequence, lastSeq: lastSeq, firstOffset: info.FirstOffset, lastOffset: info.LastOffset,
	})
	return appendResult{firstOffset: info.FirstOffset, lastOffset: info.LastOffset, logAppendTime: appendTime}
}

// logErrorCode maps kafkalog errors to Kafka's codes.
func logErrorCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, kafkalog.ErrCorruptBatch):
		return kerr.CorruptMessage
	case errors.Is(err, kafkalog.ErrBatchTooLarge):
		return kerr.MessageTooLarge
	case errors.Is(err, kafkalog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange
	case errors.Is(err, kafkalog.ErrEpochRegression):
		return kerr.FencedLeaderEpoch
	default:
		return kerr.KafkaStorageError
	}
}

// appendAsFollower appends replicated batches and learns their producer
// state, so that this replica can check sequences once it leads.
func (p *partition) appendAsFollower(records []byte, epoch int32) (kafkalog.AppendInfo, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.mu.Lock()
	ok := !p.mu.leader && p.mu.state.LeaderEpoch == epoch
	p.mu.Unlock()
	if !ok {
		return kafkalog.AppendInfo{}, errFetchStale
	}
	info, err := p.log.AppendAsFollower(records)
	if err != nil {
		return info, err
	}
	// The append validated every batch; only the headers are needed here.
	_ = kafkalog.WalkHeaders(records, func(h kafkalog.BatchHeader) error {
		p.producers.record(h.ProducerID, h.ProducerEpoch, producerBatch{
			firstSeq: h.BaseSequence, lastSeq: lastSeqOf(h.BaseSequence, h.LastOffsetDelta+1),
			firstOffset: h.BaseOffset, lastOffset: h.LastOffset(),
		})
		return nil
	})
	return info, nil
}

var errFetchStale = errors.New("broker: partition state changed during fetch")

// truncate cuts the log (follower side, KIP-101) and the producer state.
func (p *partition) truncate(to int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.log.Truncate(to); err != nil {
		return err
	}
	p.producers.truncate(to)
	return nil
}

// maybeAdvanceHW moves the leader's high watermark to the smallest log end
// over the ISR and reports whether it moved.
func (p *partition) maybeAdvanceHW() bool {
	p.mu.Lock()
	if !p.mu.leader {
		p.mu.Unlock()
		return false
	}
	hw := p.log.LogEndOffset()
	for _, r := range p.mu.state.ISR {
		if r == p.self {
			continue
		}
		f := p.mu.followers[r]
		if f == nil || f.leo < 0 {
			p.mu.Unlock()
			return false
		}
		hw = min(hw, f.leo)
	}
	p.mu.Unlock()
	if hw <= p.log.HighWatermark() {
		return false
	}
	if err := p.log.SetHighWatermark(hw); err != nil {
		p.logger.Error("set high watermark", "partition", p.tp, "hw", hw, "err", err)
		return false
	}
	return true
}

// followerFetched records a follower's fetch offset as its log end
// (Kafka's updateFollowerFetchState). It returns an ISR to propose when
// the follower caught up and is not in the ISR (nil otherwise).
func (p *partition) followerFetched(replica int32, fetchOffset int64, now time.Time) (*kerr.Error, []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mu.leader {
		return kerr.NotLeaderForPartition, nil
	}
	f := p.mu.followers[replica]
	if f == nil {
		return kerr.NotLeaderForPartition, nil
	}
	leaderLEO := p.log.LogEndOffset()
	if fetchOffset > leaderLEO {
		return kerr.OffsetOutOfRange, nil
	}
	switch {
	case fetchOffset >= leaderLEO:
		f.lastCaughtUp = now
	case fetchOffset >= f.lastFetchLeaderLEO && f.lastFetchLeaderLEO >= 0:
		if f.lastFetchTime.After(f.lastCaughtUp) {
			f.lastCaughtUp = f.lastFetchTime
		}
	}
	f.leo, f.lastFetchLeaderLEO, f.lastFetchTime = fetchOffset, leaderLEO, now
	if slices.Contains(p.mu.state.ISR, replica) || p.mu.isrInflight {
		return nil, nil
	}
	if fetchOffset >= p.log.HighWatermark() && fetchOffset >= p.mu.epochStart {
		isr := append(slices.Clone(p.mu.state.ISR), replica)
		slices.Sort(isr)
		p.mu.isrInflight = true
		return nil, isr
	}
	return nil, nil
}

// laggingReplicas returns the ISR members (other than the leader) whose
// last caught-up time is more than lagMax before now: Kafka's
// getOutOfSyncReplicas. Pure.
func laggingReplicas(isr []int32, leader int32, followers map[int32]*followerState, now time.Time, lagMax time.Duration) []int32 {
	var out []int32
	for _, r := range isr {
		if r == leader {
			continue
		}
		f := followers[r]
		if f == nil || now.Sub(f.lastCaughtUp) > lagMax {
			out = append(out, r)
		}
	}
	return out
}

// shrinkProposal returns the ISR without lagging followers, or nil.
func (p *partition) shrinkProposal(now time.Time, lagMax time.Duration) []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mu.leader || p.mu.isrInflight {
		return nil
	}
	lag := laggingReplicas(p.mu.state.ISR, p.self, p.mu.followers, now, lagMax)
	if len(lag) == 0 {
		return nil
	}
	var isr []int32
	for _, r := range p.mu.state.ISR {
		if !slices.Contains(lag, r) {
			isr = append(isr, r)
		}
	}
	p.mu.isrInflight = true
	return isr
}

func (p *partition) isrDone() {
	p.mu.Lock()
	p.mu.isrInflight = false
	p.mu.Unlock()
}

// hwChangedFor reports whether the follower has not yet been told the
// current high watermark; sent records that it now has been.
func (p *partition) hwChangedFor(replica int32, sent bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.mu.followers[replica]
	if f == nil {
		return false
	}
	hw := p.log.HighWatermark()
	changed := f.lastSentHW != hw
	if sent {
		f.lastSentHW = hw
	}
	return changed
}

// leoChangedFor reports whether the leader's log end differs from the one
// last told to replica (remotewal FollowerFetch), and records leo as told:
// a caller that sees true answers the fetch at once.
func (p *partition) leoChangedFor(replica int32, leo int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.mu.followers[replica]
	if f == nil {
		return false
	}
	changed := f.lastSentLEO != leo
	f.lastSentLEO = leo
	return changed
}

// PartitionStatus is a replica's view of its partition, for tests and
// tooling.
type PartitionStatus struct {
	State         PartitionState
	IsLeader      bool
	LogStart      int64
	LogEnd        int64
	HighWatermark int64
	// FollowerLEO is, on the leader, each follower's last fetch offset
	// (-1 unknown).
	FollowerLEO map[int32]int64
}

func (p *partition) status() PartitionStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := PartitionStatus{
		State: clonePartition(p.mu.state), IsLeader: p.mu.leader,
		LogStart: p.log.LogStartOffset(), LogEnd: p.log.LogEndOffset(), HighWatermark: p.log.HighWatermark(),
	}
	if p.mu.leader {
		st.FollowerLEO = map[int32]int64{}
		for r, f := range p.mu.followers {
			st.FollowerLEO[r] = f.leo
		}
	}
	return st
}

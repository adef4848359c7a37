package broker

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
)

// partition is one replica of a partition on this broker. The
// replication decisions (HW, ISR, follower progress) are the
// replica.Leader machine's; the partition carries out its actions on the
// log and hands the follower driver (fetcher.go) a small handle
// (followerLog) instead of its locks.
type partition struct {
	tp      TopicPartition
	topicID TopicID // the topic incarnation this replica belongs to
	self    int32
	log     *kafkalog.Log
	// validator checks produced batches (shared by the broker's partitions).
	validator *kafkalog.BatchValidator
	mode      ReplicationMode
	// minISR is min.insync.replicas; AlterConfigs may change it (under
	// appendMu), acks=all completions read it without locks.
	minISR atomic.Int64
	lagMax time.Duration // replica.lag.time.max.ms
	clock  clock.Clock
	logger *slog.Logger
	// storage reports a log operation's error to the broker's log-dir
	// health and says whether the dir is offline (logdir.go); nil in
	// partitions built without a broker.
	storage func(what string, err error) bool

	// appendMu serialises appends, truncations and role changes; it is
	// taken before mu. Holding it, a producer's entry in the log cannot
	// change between the sequence check and the append. logAppendTime and
	// configEpoch are guarded by it.
	appendMu      sync.Mutex
	logAppendTime bool  // stamp batches with the append time (message.timestamp.type)
	compacted     bool  // cleanup.policy has compact: every record needs a key
	configEpoch   int32 // topic epoch whose configs are applied

	// hwMu serialises setting the log's high watermark from the leader
	// machine's AdvanceHW actions. It is taken after mu is released: the
	// log's write lock, which setting the HW takes, is held by appends,
	// and follower fetches must not queue on mu behind them.
	hwMu sync.Mutex

	mu struct {
		sync.Mutex
		known bool // state was set at least once
		state PartitionState
		// leader is the leader-side machine while this broker leads.
		leader *replica.Leader
		// followerLogStart: while leading, each follower's log start
		// offset as its last fetch reported it (DeleteRecords' low
		// watermark; api_delete_records.go).
		followerLogStart map[int32]int64
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
	hw := int64(-1)
	defer func() { p.publishHW(hw) }() // runs after the unlocks below
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
	wasLeader := p.mu.leader != nil
	leader := ps.Leader == p.self
	switch {
	case leader && (epochChanged || !wasLeader):
		p.mu.followerLogStart = nil
		p.mu.leader = replica.NewLeader(replica.LeaderState{
			Self: p.self, LeaderEpoch: ps.LeaderEpoch, PartitionEpoch: ps.PartitionEpoch,
			Replicas: ps.Replicas, ISR: ps.ISR,
		}, p.log.LogEndOffset(), p.log.HighWatermark(), p.clock.Now(), p.lagMax, int(p.minISR.Load()))
		return roleLeader
	case !leader && (epochChanged || wasLeader):
		p.mu.leader = nil
		return roleFollower
	case leader:
		hw, _ = leaderActions(p.mu.leader.ISRChanged(ps.PartitionEpoch, ps.Replicas, ps.ISR, p.log.LogEndOffset(), p.clock.Now()))
	}
	return roleISR
}

// isrProposal is an ISR the leader machine proposed, with the epochs it
// proposed it at.
type isrProposal = replica.ProposeISR

// leaderActions sorts a leader machine's actions: the HW to publish (-1:
// none) and the ISR to propose (nil: none).
func leaderActions(acts []replica.Action) (hw int64, propose *isrProposal) {
	hw = -1
	for _, a := range acts {
		switch a := a.(type) {
		case replica.AdvanceHW:
			hw = max(hw, a.HW)
		case replica.ProposeISR:
			propose = &a
		}
	}
	return hw, propose
}

// publishHW sets the log's high watermark to hw (an AdvanceHW of the
// leader machine; -1: nothing) unless a later advance got there first,
// tells the machine what the log now shows (HWApplied, which acks=all
// completion waits for), and reports whether it moved. Caller does not
// hold mu.
func (p *partition) publishHW(hw int64) bool {
	if hw < 0 {
		return false
	}
	moved := p.setLogHW(hw)
	p.mu.Lock()
	if p.mu.leader != nil {
		p.mu.leader.HWApplied(p.log.HighWatermark())
	}
	p.mu.Unlock()
	return moved
}

func (p *partition) setLogHW(hw int64) bool {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	if hw <= p.log.HighWatermark() {
		return false
	}
	moved, err := p.setHW(hw)
	if err != nil {
		p.logger.Error("set high watermark", "partition", p.tp, "hw", hw, "err", err)
	}
	return moved
}

// setHW sets the log's high watermark and reports whether it moved. An
// error that takes the log dir offline (the checkpoint not written: a
// full or read-only disk), or that comes while it is offline, goes to
// the log-dir health, which logs it once; it is not returned, so callers
// do not log it again at every advance.
func (p *partition) setHW(hw int64) (bool, error) {
	before := p.log.HighWatermark()
	if hw <= before {
		return false, nil
	}
	err := p.log.SetHighWatermark(hw)
	if err != nil && p.storage != nil && p.storage("checkpointing the high watermark", err) {
		err = nil
	}
	return p.log.HighWatermark() > before, err
}

// ackDone is the completion of an acks=all produce appended at leader
// epoch epoch that needs the HW at required: the leader machine's
// AckDone, or NOT_LEADER_OR_FOLLOWER once this replica no longer leads
// that epoch.
func (p *partition) ackDone(epoch int32, required int64) (bool, *kerr.Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.mu.leader
	if l == nil || l.LeaderEpoch() != epoch {
		return true, kerr.NotLeaderForPartition
	}
	return l.AckDone(required)
}

func (p *partition) snapshot() (PartitionState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return clonePartition(p.mu.state), p.mu.leader != nil
}

// checkEpoch fences a client's or follower's current leader epoch (-1:
// not given).
func checkEpoch(current, ours int32) *kerr.Error { return replica.CheckEpoch(current, ours) }

// appendResult is a leader append's outcome for the response.
type appendResult struct {
	firstOffset, lastOffset int64
	logAppendTime           int64 // -1: CreateTime
	duplicate               bool  // already in the log: nothing appended
	err                     *kerr.Error
	msg                     string
}

// appendAsLeader appends one produce partition's records, checking
// idempotent sequences.
func (p *partition) appendAsLeader(records []byte, acks int16) appendResult {
	// Kafka: v3+ produce carries exactly one batch per partition;
	// Validate refuses anything else. The batch is validated once, here:
	// AppendValidatedAsLeader does not look again.
	vb, err := p.validator.Validate(records)
	if err != nil {
		return appendResult{err: logErrorCode(err), msg: err.Error()}
	}
	if p.dirOffline() {
		return appendResult{err: kerr.KafkaStorageError, msg: "this broker's log dir is offline"}
	}
	h := vb.Header()
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.mu.Lock()
	l, epoch := p.mu.leader, p.mu.state.LeaderEpoch
	var refused *kerr.Error
	if l != nil {
		refused = l.CheckProduce(acks)
	}
	p.mu.Unlock()
	if l == nil {
		return appendResult{err: kerr.NotLeaderForPartition}
	}
	if refused != nil {
		return appendResult{err: refused, msg: "ISR is smaller than min.insync.replicas"}
	}
	if p.compacted {
		if res, bad := p.checkKeys(vb); bad {
			return res
		}
	}
	lastSeq := kafkalog.IncrementSequence(h.BaseSequence, h.LastOffsetDelta)
	var chk seqCheck
	if h.ProducerID >= 0 {
		e, known := p.log.ProducerEntry(h.ProducerID)
		chk = checkSequence(e, known, h.ProducerID, h.ProducerEpoch, h.BaseSequence, lastSeq)
	}
	if chk.err != nil {
		return appendResult{err: chk.err}
	}
	if chk.dup != nil {
		p.logger.Debug("duplicate idempotent batch answered with its original offsets",
			"partition", p.tp, "producer_id", h.ProducerID, "first_seq", h.BaseSequence, "offset", chk.dup.FirstOffset)
		return appendResult{firstOffset: chk.dup.FirstOffset, lastOffset: chk.dup.LastOffset, duplicate: true, logAppendTime: -1}
	}
	appendTime := int64(-1)
	if p.logAppendTime {
		appendTime = p.clock.Now().UnixMilli()
		vb = vb.WithLogAppendTime(appendTime)
	}
	info, err := p.log.AppendValidatedAsLeader(vb, epoch)
	if err != nil {
		p.storageErr("appending as leader", err)
		return appendResult{err: logErrorCode(err), msg: err.Error()}
	}
	return appendResult{firstOffset: info.FirstOffset, lastOffset: info.LastOffset, logAppendTime: appendTime}
}

// logErrorCode maps kafkalog errors to Kafka's codes.
func logErrorCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, kafkalog.ErrCorruptBatch):
		return kerr.CorruptMessage
	case errors.Is(err, kafkalog.ErrInvalidRecord):
		return kerr.InvalidRecord
	case errors.Is(err, kafkalog.ErrInvalidTimestamp):
		return kerr.InvalidTimestamp
	case errors.Is(err, kafkalog.ErrBatchTooLarge):
		return kerr.MessageTooLarge
	case errors.Is(err, kafkalog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange
	case errors.Is(err, kafkalog.ErrEpochRegression):
		return kerr.FencedLeaderEpoch
	case errors.Is(err, kafkalog.ErrClosed):
		// The replica was dropped (moved, or its topic deleted) under the
		// request: retriable, and the client's metadata refresh tells why.
		return kerr.NotLeaderForPartition
	default:
		return kerr.KafkaStorageError
	}
}

// appendAsFollower appends replicated batches; the log learns their
// producer state, so that this replica can check sequences once it leads.
func (p *partition) appendAsFollower(records []byte, epoch int32) (kafkalog.AppendInfo, error) {
	return p.appendFollowerBatches(records, epoch, false)
}

// appendFollowerBatches appends as a follower at epoch; verified batches
// were validated by the caller (kafkalog.ValidateBatchesCRC32C).
func (p *partition) appendFollowerBatches(records []byte, epoch int32, verified bool) (kafkalog.AppendInfo, error) {
	return p.appendFollower(epoch, func() (kafkalog.AppendInfo, error) {
		if verified {
			return p.log.AppendVerifiedAsFollower(records)
		}
		return p.log.AppendAsFollower(records)
	})
}

// appendFollower runs one follower append at epoch: refused once this
// replica has moved past the follow or its log dir is offline.
func (p *partition) appendFollower(epoch int32, appendFn func() (kafkalog.AppendInfo, error)) (kafkalog.AppendInfo, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	p.mu.Lock()
	ok := p.mu.leader == nil && p.mu.state.LeaderEpoch == epoch
	p.mu.Unlock()
	if !ok {
		return kafkalog.AppendInfo{}, errFetchStale
	}
	if p.dirOffline() {
		return kafkalog.AppendInfo{}, ErrLogDirOffline
	}
	info, err := appendFn()
	p.storageErr("appending as follower", err)
	return info, err
}

// dirOffline says whether the broker's log dir is offline.
func (p *partition) dirOffline() bool { return p.storage != nil && p.storage("", nil) }

// storageErr hands a log operation's error to the log-dir health.
func (p *partition) storageErr(what string, err error) {
	if err != nil && p.storage != nil {
		p.storage(what, err)
	}
}

var errFetchStale = replica.ErrStale

// truncate cuts the log (follower side, KIP-101); the log rebuilds its
// producer state.
func (p *partition) truncate(to int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.log.Truncate(to)
}

// truncateFully empties the log and starts it at start (a follower behind
// the leader's log start); the log forgets its producers with it.
func (p *partition) truncateFully(start int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.log.TruncateFullyAndStartAt(start)
}

// followerView is the log as the follower machine reads it; the epoch
// cache is copied only when withEpochs (truncation needs it).
func (p *partition) followerView(withEpochs bool) replica.LogView {
	v := replica.LogView{LogStart: p.log.LogStartOffset(), LEO: p.log.LogEndOffset(), HW: p.log.HighWatermark()}
	if withEpochs {
		v.Epochs = p.log.EpochEntries()
	}
	return v
}

// setFollowerHW sets a follower's high watermark (the machine bounded it
// by the log end); it reports whether it moved.
func (p *partition) setFollowerHW(hw int64) (bool, error) { return p.setHW(hw) }

// maybeAdvanceHW feeds the leader machine the log end and carries out the
// HW advance it decides; it reports whether the HW moved.
func (p *partition) maybeAdvanceHW() bool {
	p.mu.Lock()
	if p.mu.leader == nil {
		p.mu.Unlock()
		return false
	}
	hw, _ := leaderActions(p.mu.leader.MaybeAdvanceHW(p.log.LogEndOffset()))
	p.mu.Unlock()
	return p.publishHW(hw)
}

// followerFetched feeds the leader machine a follower's fetch offset (its
// log end), ordered by its stamp (replica.FetchStamp). It returns the error for the response and the ISR to propose
// when the follower caught up outside the ISR (nil otherwise); the caller
// then calls maybeAdvanceHW.
func (p *partition) followerFetched(replicaID int32, fetchOffset int64, now time.Time, stamp replica.FetchStamp) (*kerr.Error, *isrProposal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.leader == nil {
		return kerr.NotLeaderForPartition, nil
	}
	err, acts := p.mu.leader.FollowerFetchStamped(now, replicaID, -1, fetchOffset, p.log.LogEndOffset(), stamp)
	if err != nil {
		return err, nil
	}
	_, isr := leaderActions(acts)
	return nil, isr
}

// shrinkProposal ticks the leader machine's ISR expiration: it returns
// the ISR without lagging followers, or nil.
func (p *partition) shrinkProposal(now time.Time) *isrProposal {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.leader == nil {
		return nil
	}
	_, isr := leaderActions(p.mu.leader.Tick(now, p.log.LogEndOffset()))
	return isr
}

// isrDone ends an ISR proposal the controller refused.
func (p *partition) isrDone() {
	p.mu.Lock()
	if p.mu.leader != nil {
		p.mu.leader.ISRRefused()
	}
	p.mu.Unlock()
}

// newsFor says which of what answer a tells replica (one reading of the
// log, the answer's own) it has not been told yet; it records nothing.
func (p *partition) newsFor(replicaID int32, a replica.Answer) (hw, logStart, leo bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.leader == nil {
		return false, false, false
	}
	return p.mu.leader.News(replicaID, a)
}

// toldFollower records that an answer carrying a was written to replica.
// a is that answer's reading, not a fresh one: a high watermark that moved
// between the two readings would be recorded as told while the answer
// carried the older one, and the follower's next long poll would wait for
// a change it had already been counted as having seen (on a manual clock,
// for ever: TestCompactedTopicOnEveryReplica timed out once so).
func (p *partition) toldFollower(replicaID int32, a replica.Answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.leader != nil {
		p.mu.leader.Told(replicaID, a)
	}
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
		State: clonePartition(p.mu.state), IsLeader: p.mu.leader != nil,
		LogStart: p.log.LogStartOffset(), LogEnd: p.log.LogEndOffset(), HighWatermark: p.log.HighWatermark(),
	}
	if p.mu.leader != nil {
		st.FollowerLEO = p.mu.leader.FollowerLEOs()
	}
	return st
}

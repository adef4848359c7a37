package broker

import (
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/purgatory"
)

// DeleteRecords: v0-2.
//
// As Kafka: the leader moves its log start offset to the given offset (-1:
// the high watermark; past the high watermark: OFFSET_OUT_OF_RANGE), then
// answers once every in-sync replica's log start offset reached it (its
// low watermark; REQUEST_TIMED_OUT after the request's timeout): each
// follower moves its own to the leader's, as its fetch responses carry it
// (up to its high watermark), and reports it in its next fetch. A topic
// whose cleanup.policy lacks delete gets POLICY_VIOLATION; only the leader
// answers (NOT_LEADER_FOR_PARTITION).
// Where it differs from Kafka: the low watermark is the minimum over the
// ISR (Kafka takes every live replica).

func (b *Broker) handleDeleteRecords(cs *connState, req *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	var waits []deleteWait
	for ti, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			tp := TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			p, offset, e := b.deleteRecords(tp, rp.Offset)
			if e != nil {
				sp.ErrorCode = e.Code
				b.logger.Info("delete records refused", "partition", tp, "offset", rp.Offset, "err", e.Message)
			} else {
				waits = append(waits, deleteWait{p: p, tp: tp, offset: offset, ti: ti, pi: pi})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(waits) == 0 {
		return resp
	}
	op := &deleteRecordsOp{waits: waits, resp: resp, ch: make(chan struct{})}
	op.Timeout = time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond
	if cs.noWait {
		op.Timeout = 0
	}
	keys := make([]TopicPartition, len(waits))
	for i, w := range waits {
		keys[i] = w.tp
	}
	b.produceWait.TryCompleteElseWatch(op, keys)
	<-op.ch
	return resp
}

// deleteRecords moves tp's log start on the leader and returns the offset
// the replicas must reach.
func (b *Broker) deleteRecords(tp TopicPartition, offset int64) (*partition, int64, *kerr.Error) {
	p := b.partition(tp)
	if p == nil {
		return nil, 0, b.notHere(tp)
	}
	if _, leader := p.snapshot(); !leader {
		return nil, 0, kerr.NotLeaderForPartition
	}
	if ts, ok := b.ctrl.Topic(tp.Topic); ok && !deletesByRetention(ts.Configs) {
		return nil, 0, kerr.PolicyViolation
	}
	hw := p.log.HighWatermark()
	switch {
	case offset == -1:
		offset = hw
	case offset < 0 || offset > hw:
		return nil, 0, kerr.OffsetOutOfRange
	}
	if _, err := p.log.IncrementLogStartOffset(offset); err != nil {
		if errors.Is(err, kafkalog.ErrOffsetOutOfRange) {
			return nil, 0, kerr.OffsetOutOfRange
		}
		b.logger.Error("delete records", "partition", tp, "offset", offset, "err", err)
		return nil, 0, kerr.KafkaStorageError
	}
	b.logger.Info("deleted records", "partition", tp, "log_start", p.log.LogStartOffset())
	b.fetchWait.CheckAndComplete(tp) // followers learn the new log start at once
	return p, offset, nil
}

type deleteWait struct {
	p      *partition
	tp     TopicPartition
	offset int64
	ti, pi int
	done   bool
}

// deleteRecordsOp waits until every partition's low watermark reached its
// offset.
type deleteRecordsOp struct {
	purgatory.Op
	waits []deleteWait
	resp  *kmsg.DeleteRecordsResponse
	ch    chan struct{}
}

func (o *deleteRecordsOp) TryComplete() bool {
	all := true
	for i := range o.waits {
		w := &o.waits[i]
		if w.done {
			continue
		}
		rp := &o.resp.Topics[w.ti].Partitions[w.pi]
		low, leader := w.p.lowWatermark()
		switch {
		case !leader:
			rp.ErrorCode, w.done = kerr.NotLeaderForPartition.Code, true
		case low >= w.offset:
			rp.LowWatermark, w.done = low, true
		default:
			all = false
		}
	}
	return all
}

func (o *deleteRecordsOp) OnComplete() {
	for i := range o.waits {
		if w := &o.waits[i]; !w.done {
			rp := &o.resp.Topics[w.ti].Partitions[w.pi]
			rp.ErrorCode = kerr.RequestTimedOut.Code
			rp.LowWatermark, _ = w.p.lowWatermark()
		}
	}
	close(o.ch)
}

func (o *deleteRecordsOp) OnExpiration() {}

// lowWatermark is the smallest log start offset over the ISR, while this
// broker leads (-1 while a follower has not reported one).
func (p *partition) lowWatermark() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.leader == nil {
		return -1, false
	}
	low := p.log.LogStartOffset()
	for _, r := range p.mu.state.ISR {
		if r == p.self {
			continue
		}
		v, ok := p.mu.followerLogStart[r]
		if !ok {
			return -1, true
		}
		low = min(low, v)
	}
	return low, true
}

// followerLogStartFetched records a follower's log start offset from its
// fetch and reports whether it moved.
func (p *partition) followerLogStartFetched(replica int32, logStart int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.leader == nil || !slices.Contains(p.mu.state.Replicas, replica) {
		return false
	}
	if p.mu.followerLogStart == nil {
		p.mu.followerLogStart = map[int32]int64{}
	}
	old, ok := p.mu.followerLogStart[replica]
	p.mu.followerLogStart[replica] = logStart
	return !ok || old != logStart
}

// followLeaderLogStart moves a follower's log start to the leader's (as
// far as its own high watermark), as Kafka's fetcher does.
func (p *partition) followLeaderLogStart(leaderLogStart int64) {
	to := min(leaderLogStart, p.log.HighWatermark())
	if to <= p.log.LogStartOffset() {
		return
	}
	if _, err := p.log.IncrementLogStartOffset(to); err != nil && !errors.Is(err, kafkalog.ErrClosed) {
		p.logger.Warn("following the leader's log start", "partition", p.tp, "log_start", to, "err", err)
	}
}

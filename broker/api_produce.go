package broker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/purgatory"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce: v0-11 (Kafka 3.9's range).
//
// As Kafka 3.x: v0-2 carry legacy message sets (magic 0/1), which the
// leader up-converts to one RecordBatch v2 (kafkalog.UpConvert: the
// producer's codec kept, v1 timestamps kept) before validating it as any
// other batch; a message set that does not decode gets CORRUPT_MESSAGE.
// v0-2 carrying a v2 batch are accepted as they are (Kafka does not check
// the magic below v3); v3+ carrying magic 0/1 gets INVALID_RECORD, as
// Kafka's ProduceRequest.validateRecords. v10-11 change nothing kwal
// sends (KIP-951 leader hints are optional tagged fields; KIP-890's
// TRANSACTION_ABORTABLE needs transactions).
//
// Where it differs from Kafka: no transactions (a transactional id gets
// INVALID_REQUEST). As Kafka: producer state is rebuilt
// from the log (snapshots and batch headers) when a partition opens, so a
// batch resent to a restarted leader is still recognised; exactly one
// batch per partition; idempotent duplicates among
// the last 5 batches of a producer are answered with their original
// offsets; out-of-order sequences get OUT_OF_ORDER_SEQUENCE_NUMBER; acks=0
// gets no response and an error closes the connection; acks=all waits in
// the purgatory until the high watermark passes the batch (REQUEST_TIMED_OUT
// after the request's timeout) and is refused with NOT_ENOUGH_REPLICAS when
// the ISR is below min.insync.replicas. Each batch is validated once, as
// Kafka's leader validates a client's batch (kafkalog.BatchValidator:
// compressed records decompressed and walked): Kafka's batch rules
// (record count against the offset range, control batches, sequences)
// get INVALID_RECORD as in Kafka, except a compressed batch whose offset
// range disagrees with its count, which is CORRUPT_MESSAGE with every
// other corrupt compressed batch; a batch claiming LogAppendTime gets
// INVALID_TIMESTAMP, as in Kafka; bytes that do not decode (CRC, a
// compressed stream that does not decompress, record framing, fewer or
// more records than claimed) get CORRUPT_MESSAGE, as issue 15 asks, where
// Kafka 3.x answers INVALID_RECORD for record-structure errors; nothing of
// a refused batch is appended. A partition number the topic does not have
// is UNKNOWN_TOPIC_OR_PARTITION. A topic with
// message.timestamp.type=LogAppendTime has the leader stamp its clock's
// time as the batch's max timestamp with attribute bit 3 set (the
// response carries it), CreateTime keeps the producer's timestamps; a
// batch over max.message.bytes gets MESSAGE_TOO_LARGE.

// produceWait is one partition of an acks=all produce.
type produceWait struct {
	tp       TopicPartition
	p        *partition
	epoch    int32
	required int64 // the high watermark that acknowledges the batch
	ti, pi   int   // where in the response
	done     bool
}

type produceOp struct {
	purgatory.Op
	b     *Broker
	mu    sync.Mutex // guards waits and resp against expiry racing TryComplete
	waits []produceWait
	resp  *kmsg.ProduceResponse
	ch    chan struct{}
	start time.Time // appended, waiting from here (acks_all_wait)
}

func (o *produceOp) TryComplete() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	all := true
	for i := range o.waits {
		w := &o.waits[i]
		if w.done {
			continue
		}
		rp := &o.resp.Topics[w.ti].Partitions[w.pi]
		if o.b.partition(w.tp) != w.p || !o.b.leaseValid() {
			rp.ErrorCode, w.done = kerr.NotLeaderForPartition.Code, true
			continue
		}
		// The HW and min.insync.replicas rule is the leader machine's.
		done, err := w.p.ackDone(w.epoch, w.required)
		if !done {
			all = false
			continue
		}
		if err != nil {
			rp.ErrorCode = err.Code
		}
		w.done = true
	}
	return all
}

func (o *produceOp) OnComplete() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range o.waits {
		if w := &o.waits[i]; !w.done {
			o.resp.Topics[w.ti].Partitions[w.pi].ErrorCode = kerr.RequestTimedOut.Code
		}
	}
	o.b.cfg.Stages.Observe(stagehist.AcksAllWait, o.b.clock.Since(o.start))
	close(o.ch)
}

func (o *produceOp) OnExpiration() {}

func (b *Broker) handleProduce(cs *connState, req *kmsg.ProduceRequest) (kmsg.Response, bool) {
	b.reqs.produce.Add(1)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var (
		waits  []produceWait
		failed bool
		keys   []TopicPartition
	)
	for ti, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = rp.Partition, -1, -1, -1
			tp := TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			code, msg := b.producePartition(req, tp, rp.Records, &sp, ti, pi, &waits)
			if code != nil {
				failed = true
				sp.ErrorCode = code.Code
				if msg != "" {
					m := msg
					sp.ErrorMessage = &m
				}
				level := slog.LevelDebug
				if code == kerr.CorruptMessage || code == kerr.InvalidRecord || code == kerr.InvalidTimestamp || code == kerr.MessageTooLarge {
					// A client sent bytes that cannot be stored: say so.
					level = slog.LevelWarn
				}
				b.logger.Log(context.Background(), level, "produce refused", "remote", cs.remote, "client_id", cs.clientID, "partition", tp, "err", code.Message, "detail", msg)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		// Kafka closes the connection so that an acks=0 producer notices.
		return nil, !failed
	}
	if req.Acks != -1 || len(waits) == 0 {
		return resp, true
	}
	for _, w := range waits {
		keys = append(keys, w.tp)
	}
	op := &produceOp{b: b, waits: waits, resp: resp, ch: make(chan struct{}), start: b.clock.Now()}
	op.Timeout, op.Start = time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond, op.start
	if cs.noWait {
		op.Timeout = 0
	}
	if b.produceWait.TryCompleteElseWatch(op, keys) || !cs.pipelining {
		<-op.ch
		return resp, true
	}
	// Waiting for the followers: let the connection read and append the
	// next request meanwhile (an idempotent producer keeps up to five in
	// flight); the response still goes out in request order.
	cs.deferred = func() kmsg.Response {
		<-op.ch
		return resp
	}
	return nil, true
}

// producePartition appends one partition's records; an acks=all append
// adds a wait.
func (b *Broker) producePartition(req *kmsg.ProduceRequest, tp TopicPartition, records []byte, sp *kmsg.ProduceResponseTopicPartition, ti, pi int, waits *[]produceWait) (*kerr.Error, string) {
	b.ledger.RecordTransfer("produce", unknownRack, b.cfg.Rack, ledger.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, int64(len(records)))
	if req.TransactionID != nil {
		return kerr.InvalidRequest, "transactions are not supported"
	}
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return kerr.InvalidRequiredAcks, ""
	}
	if kafkalog.IsMessageSet(records) {
		if req.Version >= 3 {
			return kerr.InvalidRecord, fmt.Sprintf("Produce v%d takes record batches of magic 2 only", req.Version)
		}
		conv, err := kafkalog.UpConvert(records, b.cfg.MaxUncompressedBatchBytes)
		if err != nil {
			return kerr.CorruptMessage, err.Error()
		}
		records = conv
	}
	p := b.partition(tp)
	if p == nil {
		return b.notHere(tp), ""
	}
	if b.dir.offline() {
		return kerr.KafkaStorageError, b.logDirOfflineErr().Error()
	}
	if !b.leaseValid() {
		return kerr.NotLeaderForPartition, "this broker's lease expired (no heartbeat acknowledged within broker.session.timeout.ms)"
	}
	res := p.appendAsLeader(records, req.Acks)
	if res.err != nil {
		return res.err, res.msg
	}
	// The lease is judged again once the records are in the log: the
	// process may have been paused (SIGSTOP, a long GC or VM stall)
	// between the check above and the append, and an acks=1 answer goes
	// out now. What was appended without a lease is never acknowledged;
	// the new leader's epoch truncates it.
	if !b.leaseValid() {
		return kerr.NotLeaderForPartition, "this broker's lease expired while appending (no heartbeat acknowledged within broker.session.timeout.ms)"
	}
	if res.duplicate {
		b.events.idempotentDuplicates.Add(1)
	}
	sp.BaseOffset, sp.LogStartOffset, sp.LogAppendTime = res.firstOffset, p.log.LogStartOffset(), res.logAppendTime
	b.fetchWait.CheckAndComplete(tp)
	if p.maybeAdvanceHW() {
		b.wake(tp)
	}
	if req.Acks == -1 && !b.cfg.AcksAllOnLeaderAppend {
		st, _ := p.snapshot()
		*waits = append(*waits, produceWait{tp: tp, p: p, epoch: st.LeaderEpoch, required: res.lastOffset + 1, ti: ti, pi: pi})
	}
	return nil, ""
}

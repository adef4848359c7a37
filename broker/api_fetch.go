package broker

import (
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/purgatory"
	"github.com/kwal/kwal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch: v0-17 (Kafka 3.9's range).
//
// As Kafka: v13+ name topics by id, in the request and the response; an
// id the cluster does not know (a deleted or recreated topic) gets
// UNKNOWN_TOPIC_ID, and an id that is not the one of this broker's
// replica (a recreation it has not applied yet) INCONSISTENT_TOPIC_ID.
// v15+ carry the follower's id in ReplicaState (KIP-903). v0-3 get legacy
// message sets, down-converted from the stored batches (kafkalog.
// DownConvert: magic 0 for v0-1, magic 1 for v2-3, control batches and
// headers dropped; uncompressed where Kafka keeps the codec), copied
// rather than sent with sendfile. v16-17 change nothing kwal sends.
//
// Where it differs from Kafka: no fetch sessions (KIP-227): every response
// has session id 0, so clients send full fetches; a request naming a
// session gets FETCH_SESSION_ID_NOT_FOUND. No transactions, so the last
// stable offset is the high watermark and there are no aborted
// transactions. No diverging-epoch answer (followers truncate with
// OffsetForLeaderEpoch first, KIP-101). As Kafka: max.wait.ms/min.bytes
// long polls in the purgatory, woken by appends and high-watermark moves;
// consumers (replica id -1) see up to the high watermark, followers
// (replica id >= 0) up to the log end, and their fetch offset is their log
// end for the ISR and the high watermark; a consumer's rack gets a
// preferred read replica in that rack from the leader (v11+, KIP-392) and
// a follower serves consumers up to its own high watermark. Empty
// partitions carry RecordBatches = []byte{} (nil would encode as null).
// In remotewal mode a follower's fetch gets offsets, the high watermark
// and the epoch only, with no records.

type fetchPart struct {
	tp        TopicPartition
	topicID   TopicID // v13+: the id the request named
	p         *partition
	offset    int64
	maxBytes  int32
	epoch     int32 // the fetcher's current leader epoch, -1 unknown
	err       *kerr.Error
	preferred int32 // preferred read replica, -1 none
	ti, pi    int
	// answer is what the last answer built tells the follower (replica
	// fetches; valid when answered): recorded as told once written.
	answer   replica.Answer
	answered bool
}

type fetchOp struct {
	purgatory.Op
	b       *Broker
	req     *kmsg.FetchRequest
	replica int32
	// fallback: a remotewal follower asking for record bytes (FallbackRack).
	fallback bool
	parts    []fetchPart
	// zeroCopy: record bytes are taken as file sections (splices) that
	// the connection writer sends with sendfile.
	zeroCopy bool
	mu       sync.Mutex
	resp     *kmsg.FetchResponse
	splices  []splice
	ch       chan struct{}
}

func (o *fetchOp) TryComplete() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.resp != nil {
		return true
	}
	resp, sp, n, urgent := o.b.fetchRead(o)
	if n >= int(o.req.MinBytes) || urgent {
		o.resp, o.splices = resp, sp
		return true
	}
	closeSplices(sp)
	return false
}

func (o *fetchOp) OnComplete() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.resp == nil {
		o.resp, o.splices, _, _ = o.b.fetchRead(o)
	}
	close(o.ch)
}

func (o *fetchOp) OnExpiration() {}

// told records, once the response was written to the follower, what each
// of its partitions' answers told it (replica.Leader.Told): an answer that
// never reached it (the fetcher closed the connection, cutting its long
// poll) leaves its news news, for the next fetch.
func (o *fetchOp) told() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range o.parts {
		if part := &o.parts[i]; part.answered {
			part.p.toldFollower(o.replica, part.answer)
		}
	}
}

func (b *Broker) handleFetch(cs *connState, req *kmsg.FetchRequest) kmsg.Response {
	if req.Version >= 7 && req.SessionID > 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp
	}
	replica := req.ReplicaID
	if req.Version >= 15 {
		replica = req.ReplicaState.ID
	}
	// The follower's order of its fetches and reports (TagFetchStamp).
	stamp, err := fetchStampOf(&req.UnknownTags)
	if replica >= 0 {
		if err != nil {
			b.logger.Warn("replica fetch refused: malformed fetch stamp", "remote", cs.remote, "replica", replica, "err", err)
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		}
	}
	now := b.clock.Now()
	op := &fetchOp{b: b, req: req, replica: replica, ch: make(chan struct{}), fallback: replica >= 0 && req.Rack == FallbackRack}
	if cs.sendfile && !cs.noWait && !b.cfg.ZeroCopyFetchDisabled && req.Version >= 4 {
		op.zeroCopy = true
	}
	switch {
	case op.fallback:
		b.reqs.fetchFallback.Add(1)
	case replica >= 0:
		b.reqs.fetchReplica.Add(1)
	default:
		b.reqs.fetchConsumer.Add(1)
	}
	var expand []struct {
		p    *partition
		prop *isrProposal
	}
	for ti, rt := range req.Topics {
		name, idErr := rt.Topic, (*kerr.Error)(nil)
		if req.Version >= 13 {
			name = ""
			if ts, ok := b.topicByID(rt.TopicID); ok {
				name = ts.Name
			} else {
				idErr = kerr.UnknownTopicID
				b.logger.Debug("fetch of an unknown topic id", "remote", cs.remote, "topic_id", TopicID(rt.TopicID))
			}
		}
		for pi, rp := range rt.Partitions {
			part := fetchPart{
				tp: TopicPartition{Topic: name, Partition: rp.Partition}, topicID: rt.TopicID, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes,
				epoch: rp.CurrentLeaderEpoch, preferred: -1, ti: ti, pi: pi,
			}
			if req.Version < 9 {
				part.epoch = -1
			}
			if idErr == nil {
				part.p = b.partition(part.tp)
			}
			switch {
			case idErr != nil:
				part.err = idErr
			case part.p != nil && req.Version >= 13 && !part.p.topicID.IsZero() && part.p.topicID != TopicID(rt.TopicID):
				part.err = kerr.InconsistentTopicID
			case part.p == nil:
				part.err = b.notHere(part.tp)
			case b.dir.offline():
				part.err = kerr.KafkaStorageError
			case replica >= 0:
				st, _ := part.p.snapshot()
				if part.err = checkEpoch(part.epoch, st.LeaderEpoch); part.err != nil {
					break
				}
				var prop *isrProposal
				if part.p.followerLogStartFetched(replica, rp.LogStartOffset) {
					b.produceWait.CheckAndComplete(part.tp) // DeleteRecords waits there
				}
				if part.err, prop = part.p.followerFetched(replica, rp.FetchOffset, now, stamp); prop != nil {
					expand = append(expand, struct {
						p    *partition
						prop *isrProposal
					}{part.p, prop})
				}
			default:
				st, leader := part.p.snapshot()
				switch {
				case !leader && req.Version < 11:
					part.err = kerr.NotLeaderForPartition
				case checkEpoch(part.epoch, st.LeaderEpoch) != nil:
					part.err = checkEpoch(part.epoch, st.LeaderEpoch)
				case leader && req.Version >= 11 && req.Rack != "":
					part.preferred = b.preferredReadReplica(part.p, st, req.Rack, rp.FetchOffset)
				}
			}
			op.parts = append(op.parts, part)
		}
	}
	if replica >= 0 {
		b.changes.Signal() // the leader's view of a follower moved (Changed)
		for _, part := range op.parts {
			if part.err == nil && part.p.maybeAdvanceHW() {
				b.wake(part.tp)
			}
		}
		ineligible := len(expand) > 0 && b.brokerIneligible(replica)
		for _, e := range expand {
			if ineligible {
				// As Kafka's leader (isReplicaIsrEligible): a fenced broker,
				// or one whose log dir is offline, joins no ISR until it
				// has registered again; the controller would refuse it
				// anyway.
				b.logger.Debug("not proposing a fenced or offline replica for the ISR", "partition", e.p.tp, "replica", replica)
				e.p.isrDone()
				continue
			}
			b.logger.Info("expanding ISR", "partition", e.p.tp, "isr", e.prop.ISR)
			b.events.isrExpands.Add(1)
			b.alterISR(e.p, e.prop)
		}
	}
	// The long poll counts from the fetch's arrival, the reading its
	// follower fetch time was recorded at: a manual clock a test moved
	// past that fetch's poll while this handler ran would otherwise park
	// it a whole max.wait.ms more (purgatory.Op.Start).
	op.Timeout, op.Start = time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, now
	if cs.noWait {
		op.Timeout = 0
	}
	keys := make([]TopicPartition, 0, len(op.parts))
	for _, part := range op.parts {
		if !slices.Contains(keys, part.tp) {
			keys = append(keys, part.tp)
		}
	}
	b.fetchWait.TryCompleteElseWatch(op, keys)
	<-op.ch
	b.recordFetch(op)
	cs.splices = op.splices
	if replica >= 0 {
		cs.written = op.told
	}
	return op.resp
}

// recordFetch writes the bytes served into the ledger.
func (b *Broker) recordFetch(op *fetchOp) {
	component, toRack := "consume", op.req.Rack
	switch {
	case op.fallback:
		component, toRack = "fallback", b.rackOf(op.replica)
	case op.replica >= 0:
		component, toRack = "replica-fetch", b.rackOf(op.replica)
	}
	spliced := map[[2]int]int64{}
	for _, s := range op.splices {
		spliced[[2]int{s.ti, s.pi}] = s.sec.Len
	}
	for ti, rt := range op.resp.Topics {
		for pi, rp := range rt.Partitions {
			n := int64(len(rp.RecordBatches))
			if l, ok := spliced[[2]int{ti, pi}]; ok {
				n = l
			}
			if n > 0 {
				b.ledger.RecordTransfer(component, b.cfg.Rack, toRack, ledger.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}, n)
			}
		}
	}
}

func (b *Broker) rackOf(id int32) string {
	for _, bi := range b.ctrl.Brokers() {
		if bi.ID == id {
			return bi.Rack
		}
	}
	return unknownRack
}

// preferredReadReplica picks, on the leader, an in-sync replica in the
// consumer's rack that has the fetch offset (lowest id first); -1 keeps
// the consumer on the leader (no rack match, or the leader's own rack).
func (b *Broker) preferredReadReplica(p *partition, st PartitionState, rack string, offset int64) int32 {
	if rack == b.cfg.Rack {
		return -1
	}
	racks := map[int32]string{}
	for _, bi := range b.ctrl.Brokers() {
		racks[bi.ID] = bi.Rack
	}
	status := p.status()
	best := int32(-1)
	for _, r := range st.ISR {
		if r == b.cfg.BrokerID || racks[r] != rack {
			continue
		}
		if leo, ok := status.FollowerLEO[r]; !ok || leo < offset {
			continue
		}
		if best == -1 || r < best {
			best = r
		}
	}
	return best
}

// fetchRead builds a fetch response from the logs as they are now. n is
// the record bytes in it; urgent says it should be sent at once (an
// error, a redirect, or a high watermark the follower has not seen). With
// o.zeroCopy, partitions whose bytes are file sections carry
// recordsMarker and are listed in sp (the caller owns them).
func (b *Broker) fetchRead(o *fetchOp) (resp *kmsg.FetchResponse, sp []splice, n int, urgent bool) {
	req := o.req
	resp = req.ResponseKind().(*kmsg.FetchResponse)
	budget := int(req.MaxBytes)
	if req.Version < 3 || budget <= 0 {
		budget = 1 << 30
	}
	ti := -1
	for i := range o.parts {
		part := &o.parts[i]
		if part.ti != ti {
			ti = part.ti
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = part.tp.Topic, part.topicID
			resp.Topics = append(resp.Topics, rt)
		}
		rp, sec, got, u := b.readPart(o, part, budget, n == 0)
		n += got
		budget -= got
		urgent = urgent || u
		t := &resp.Topics[len(resp.Topics)-1]
		if sec != nil {
			sp = append(sp, splice{ti: len(resp.Topics) - 1, pi: len(t.Partitions), sec: sec})
		}
		t.Partitions = append(t.Partitions, rp)
	}
	return resp, sp, n, urgent
}

// readPart reads one partition. first: no record bytes in the response
// yet, so one batch is returned even if larger than the budget (KIP-74).
// With o.zeroCopy the bytes may come back as a section (RecordBatches is
// then recordsMarker).
func (b *Broker) readPart(o *fetchOp, part *fetchPart, budget int, first bool) (kmsg.FetchResponseTopicPartition, *kafkalog.Section, int, bool) {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition = part.tp.Partition
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
	rp.PreferredReadReplica = -1
	rp.RecordBatches = []byte{}
	part.answered = false
	fail := func(e *kerr.Error) (kmsg.FetchResponseTopicPartition, *kafkalog.Section, int, bool) {
		rp.ErrorCode = e.Code
		return rp, nil, 0, true
	}
	if part.err != nil {
		return fail(part.err)
	}
	p := part.p
	if b.partition(part.tp) != p {
		return fail(kerr.NotLeaderForPartition)
	}
	st, leader := p.snapshot()
	if o.replica >= 0 && !leader {
		return fail(kerr.NotLeaderForPartition)
	}
	if e := checkEpoch(part.epoch, st.LeaderEpoch); e != nil {
		return fail(e)
	}
	hw, leo, start := p.log.HighWatermark(), p.log.LogEndOffset(), p.log.LogStartOffset()
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw, hw, start
	if part.preferred >= 0 {
		rp.PreferredReadReplica = part.preferred
		return rp, nil, 0, true
	}
	if part.offset < start || part.offset > leo {
		return fail(kerr.OffsetOutOfRange)
	}
	urgent := false
	bound := hw
	if o.replica >= 0 {
		bound = leo
		// What this answer tells the follower: this reading of the log.
		part.answer, part.answered = replica.Answer{HW: hw, LogStart: start, LEO: -1}, true
		remote := p.mode == RemoteWAL && !o.fallback
		if remote {
			part.answer.LEO = leo
		}
		hwNews, startNews, leoNews := p.newsFor(o.replica, part.answer)
		urgent = hwNews || startNews
		if p.mode == RemoteWAL {
			rp.UnknownTags.Set(TagLeaderLogEnd, binary.AppendUvarint(nil, uint64(leo)))
		}
		if remote {
			// New bytes past the follower's log end: answer now, so it
			// learns our log end (its own appends reach us in log end
			// reports, see fetcher.go).
			return rp, nil, 0, urgent || leo > part.offset && leoNews
		}
	}
	limit := min(int(part.maxBytes), budget)
	if part.offset >= bound || limit <= 0 && !first {
		return rp, nil, 0, urgent
	}
	if o.zeroCopy {
		// The same batches as the copying path below: at least one
		// when first, whole batches within limit, none at or past bound.
		sec, err := p.log.ReadSection(part.offset, max(limit, 1), bound, first)
		switch {
		case err == nil && sec == nil:
			return rp, nil, 0, urgent
		case err == nil:
			rp.RecordBatches = recordsMarker
			return rp, sec, int(sec.Len), urgent
		case !errors.Is(err, kafkalog.ErrNoSection):
			b.logger.Warn("fetch read", "partition", part.tp, "offset", part.offset, "err", err)
			return fail(logErrorCode(err))
		}
	}
	data, err := p.log.Read(part.offset, max(limit, 1))
	if err != nil {
		b.logger.Warn("fetch read", "partition", part.tp, "offset", part.offset, "err", err)
		return fail(logErrorCode(err))
	}
	data = trimToBound(data, bound)
	if !first && len(data) > limit {
		data = trimToBytes(data, limit)
	}
	if o.req.Version < 4 {
		magic := int8(1)
		if o.req.Version < 2 {
			magic = 0
		}
		if data, err = kafkalog.DownConvert(data, magic); err != nil {
			b.logger.Warn("fetch down-conversion", "partition", part.tp, "offset", part.offset, "err", err)
			return fail(kerr.CorruptMessage)
		}
	}
	rp.RecordBatches = data
	return rp, nil, len(data), urgent
}

// trimToBound drops the batches whose last offset is at or past bound.
func trimToBound(data []byte, bound int64) []byte {
	pos := 0
	for pos < len(data) {
		h, err := kafkalog.ParseBatchHeader(data[pos:])
		if err != nil || h.LastOffset() >= bound || pos+h.Size() > len(data) {
			break
		}
		pos += h.Size()
	}
	return data[:pos]
}

// trimToBytes keeps the whole batches that fit in limit bytes.
func trimToBytes(data []byte, limit int) []byte {
	pos := 0
	for pos < len(data) {
		h, err := kafkalog.ParseBatchHeader(data[pos:])
		if err != nil || pos+h.Size() > limit {
			break
		}
		pos += h.Size()
	}
	return data[:pos]
}

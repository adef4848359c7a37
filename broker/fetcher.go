package broker

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Versions the replica fetcher speaks (within what brokers serve).
const (
	replicaFetchVersion       = 12
	replicaOffsetForEpochVers = 4
	replicaFetchResponseMax   = 64 << 20
)

// fetcherManager owns one replicaFetcher per leader broker.
type fetcherManager struct {
	b  *Broker
	mu struct {
		sync.Mutex
		fetchers map[int32]*replicaFetcher
		closed   bool
	}
}

func newFetcherManager(b *Broker) *fetcherManager {
	m := &fetcherManager{b: b}
	m.mu.fetchers = map[int32]*replicaFetcher{}
	return m
}

// add makes tp follow leader at epoch (removing it from another leader's
// fetcher); it will be truncated by leader epoch before it fetches.
func (m *fetcherManager) add(p *partition, leader, epoch int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return
	}
	for id, f := range m.mu.fetchers {
		if id != leader {
			f.remove(p.tp)
		}
	}
	f := m.mu.fetchers[leader]
	if f == nil {
		f = newReplicaFetcher(m.b, leader)
		m.mu.fetchers[leader] = f
		go f.run()
	}
	f.add(p, epoch)
}

func (m *fetcherManager) remove(tp TopicPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.mu.fetchers {
		f.remove(tp)
	}
}

func (m *fetcherManager) close() {
	m.mu.Lock()
	m.mu.closed = true
	fs := m.mu.fetchers
	m.mu.fetchers = nil
	m.mu.Unlock()
	for _, f := range fs {
		f.close()
	}
}

// followState is one partition a fetcher replicates.
type followState struct {
	p         *partition
	epoch     int32
	truncated bool      // KIP-101 truncation done for this epoch
	started   bool      // remotewal: Replicator.StartFollower called
	leaderLEO int64     // remotewal: the leader's log end, last reported
	retryAt   time.Time // back off until then after an error
}

// replicaFetcher replicates partitions led by one broker: it truncates
// them by leader epoch, then fetches them (Fetch v12 with its replica id)
// and appends what comes back as follower.
type replicaFetcher struct {
	b      *Broker
	leader int32
	wakeCh chan struct{}
	stop   chan struct{}
	done   chan struct{}
	mu     struct {
		sync.Mutex
		parts map[TopicPartition]*followState
		conn  *wireClient
	}
}

func newReplicaFetcher(b *Broker, leader int32) *replicaFetcher {
	f := &replicaFetcher{b: b, leader: leader, wakeCh: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	f.mu.parts = map[TopicPartition]*followState{}
	return f
}

func (f *replicaFetcher) add(p *partition, epoch int32) {
	f.mu.Lock()
	f.mu.parts[p.tp] = &followState{p: p, epoch: epoch}
	f.mu.Unlock()
	f.poke()
}

func (f *replicaFetcher) remove(tp TopicPartition) {
	f.mu.Lock()
	_, ok := f.mu.parts[tp]
	delete(f.mu.parts, tp)
	f.mu.Unlock()
	if ok {
		f.poke()
	}
}

func (f *replicaFetcher) poke() {
	select {
	case f.wakeCh <- struct{}{}:
	default:
	}
}

func (f *replicaFetcher) close() {
	close(f.stop)
	f.mu.Lock()
	if f.mu.conn != nil {
		f.mu.conn.close() // interrupts a long poll
	}
	f.mu.Unlock()
	<-f.done
}

// sleep waits d, a poke or stop; it reports false on stop.
func (f *replicaFetcher) sleep(d time.Duration) bool {
	t := f.b.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.stop:
		return false
	case <-f.wakeCh:
	case <-t.C():
	}
	return true
}

func (f *replicaFetcher) stopped() bool {
	select {
	case <-f.stop:
		return true
	default:
		return false
	}
}

func (f *replicaFetcher) run() {
	defer close(f.done)
	defer func() {
		f.mu.Lock()
		if f.mu.conn != nil {
			f.mu.conn.close()
			f.mu.conn = nil
		}
		for tp, st := range f.mu.parts {
			if st.started && f.b.cfg.Replicator != nil {
				f.b.cfg.Replicator.StopFollower(tp)
			}
		}
		f.mu.Unlock()
	}()
	backoff := f.b.cfg.ReplicaFetchBackoff
	for !f.stopped() {
		ready, idle := f.ready()
		if len(ready) == 0 {
			if !f.sleep(idle) {
				return
			}
			continue
		}
		conn, err := f.connect()
		if err != nil {
			f.b.logger.Debug("replica fetcher cannot reach leader", "leader", f.leader, "err", err)
			if !f.sleep(backoff) {
				return
			}
			continue
		}
		if err := f.step(conn, ready); err != nil {
			if f.stopped() {
				return
			}
			f.b.logger.Info("replica fetcher connection failed", "leader", f.leader, "err", err)
			f.mu.Lock()
			if f.mu.conn == conn {
				f.mu.conn = nil
			}
			f.mu.Unlock()
			conn.close()
			if !f.sleep(backoff) {
				return
			}
		}
	}
}

// ready returns the partitions not backing off, and how long until the
// next one is due (or a long idle).
func (f *replicaFetcher) ready() (map[TopicPartition]followState, time.Duration) {
	now := f.b.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[TopicPartition]followState{}
	idle := time.Minute
	for tp, st := range f.mu.parts {
		if wait := st.retryAt.Sub(now); wait > 0 {
			idle = min(idle, wait)
			continue
		}
		out[tp] = *st
	}
	return out, idle
}

func (f *replicaFetcher) connect() (*wireClient, error) {
	f.mu.Lock()
	if c := f.mu.conn; c != nil {
		f.mu.Unlock()
		return c, nil
	}
	f.mu.Unlock()
	c, _, err := f.b.dialBroker(f.leader, replicaFetcherClientIDPrefix+strconv.Itoa(int(f.b.cfg.BrokerID)), 10*time.Second, replicaFetchResponseMax)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped() {
		c.close()
		return nil, errors.New("fetcher stopped")
	}
	f.mu.conn = c
	return c, nil
}

// update applies fn to tp's state if it is still the one the request was
// built from.
func (f *replicaFetcher) update(tp TopicPartition, was followState, fn func(st *followState)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.mu.parts[tp]
	if st == nil || st.p != was.p || st.epoch != was.epoch {
		return false
	}
	fn(st)
	return true
}

func (f *replicaFetcher) backoff(tp TopicPartition, was followState) {
	at := f.b.clock.Now().Add(f.b.cfg.ReplicaFetchBackoff)
	f.update(tp, was, func(st *followState) { st.retryAt = at })
}

// step truncates what needs it, then fetches once. Errors are
// connection errors.
func (f *replicaFetcher) step(conn *wireClient, ready map[TopicPartition]followState) error {
	var need []TopicPartition
	for tp, st := range ready {
		if !st.truncated {
			need = append(need, tp)
		}
	}
	if len(need) > 0 {
		return f.truncate(conn, ready, need)
	}
	return f.fetch(conn, ready)
}

// truncate is KIP-101: ask the leader where our latest epoch ends and cut
// the log there (Kafka's AbstractFetcherThread.getOffsetTruncationState).
func (f *replicaFetcher) truncate(conn *wireClient, ready map[TopicPartition]followState, need []TopicPartition) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = replicaOffsetForEpochVers
	req.ReplicaID = f.b.cfg.BrokerID
	asked := map[TopicPartition]int32{}
	for _, tp := range need {
		st := ready[tp]
		latest, ok := st.p.log.LatestEpoch()
		if !ok {
			f.truncated(tp, st)
			continue
		}
		asked[tp] = latest
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = tp.Topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = tp.Partition, st.epoch, latest
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	if len(req.Topics) == 0 {
		return nil
	}
	r, err := conn.roundTrip(req, f.b.clock.Now().Add(30*time.Second))
	if err != nil {
		return err
	}
	resp := r.(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			tp := TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			st, ok := ready[tp]
			if _, wasAsked := asked[tp]; !ok || !wasAsked {
				continue
			}
			if rp.ErrorCode != 0 {
				f.b.logger.Info("offset for leader epoch refused", "partition", tp, "leader", f.leader, "err", kerr.ErrorForCode(rp.ErrorCode))
				f.backoff(tp, st)
				continue
			}
			f.applyTruncation(tp, st, rp.LeaderEpoch, rp.EndOffset)
		}
	}
	return nil
}

func (f *replicaFetcher) applyTruncation(tp TopicPartition, st followState, leaderEpoch int32, leaderEnd int64) {
	l := st.p.log
	leo := l.LogEndOffset()
	to, complete := leo, true
	switch {
	case leaderEpoch < 0:
		to = leaderEnd
		if to < 0 {
			to = l.HighWatermark()
		}
	default:
		fe, fo := l.EndOffsetForEpoch(leaderEpoch)
		switch {
		case fe < 0:
			to = leaderEnd
		case fe != leaderEpoch:
			to, complete = fo, false
		default:
			to = min(fo, leaderEnd)
		}
	}
	to = min(to, leo)
	if to < leo {
		f.b.logger.Info("truncating follower by leader epoch", "partition", tp, "from", leo, "to", to, "leader_epoch", leaderEpoch)
		if err := st.p.truncate(to); err != nil {
			f.b.logger.Warn("truncate by leader epoch failed; truncating to the high watermark", "partition", tp, "to", to, "err", err)
			if err := st.p.truncate(l.HighWatermark()); err != nil {
				f.b.logger.Error("truncate to high watermark failed", "partition", tp, "err", err)
				f.backoff(tp, st)
				return
			}
		}
	}
	if complete {
		f.truncated(tp, st)
	}
}

// truncated marks truncation done and, for remotewal, starts the
// Replicator feeding the log.
func (f *replicaFetcher) truncated(tp TopicPartition, st followState) {
	start := false
	f.update(tp, st, func(s *followState) {
		s.truncated = true
		start = st.p.mode == RemoteWAL && !s.started && f.b.cfg.Replicator != nil
		s.started = s.started || start
	})
	if start {
		notify := func() {
			f.poke()
			f.b.fetchWait.CheckAndComplete(tp)
		}
		if err := f.b.cfg.Replicator.StartFollower(newReplicaHandle(f.b, st.p, f.leader, st.epoch, notify)); err != nil {
			f.b.logger.Error("remote WAL follower start", "partition", tp, "err", err)
		}
	}
}

func (f *replicaFetcher) fetch(conn *wireClient, ready map[TopicPartition]followState) error {
	req := kmsg.NewPtrFetchRequest()
	req.Version = replicaFetchVersion
	req.ReplicaID = f.b.cfg.BrokerID
	req.MaxWaitMillis = int32(f.b.cfg.ReplicaFetchWaitMax.Milliseconds())
	for _, st := range ready {
		// A remotewal follower's log grows from object storage, not from
		// this fetch, and the leader's high watermark waits for the log
		// end this fetch reports. While the leader holds bytes this
		// follower lacks, keep the poll short so each report goes out soon
		// after an append; a caught-up follower long-polls, and the leader
		// answers it early once it appends (see fetchPartition).
		if st.p.mode == RemoteWAL && st.leaderLEO > st.p.log.LogEndOffset() &&
			f.b.cfg.RemoteWALFetchWaitMax < f.b.cfg.ReplicaFetchWaitMax {
			req.MaxWaitMillis = int32(f.b.cfg.RemoteWALFetchWaitMax.Milliseconds())
			break
		}
	}
	req.MinBytes = 1
	req.MaxBytes = DefaultReplicaFetchResponseMax
	req.SessionEpoch = -1 // no fetch session
	byTopic := map[string]int{}
	for tp, st := range ready {
		i, ok := byTopic[tp.Topic]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			byTopic[tp.Topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch = tp.Partition, st.epoch
		rp.FetchOffset, rp.LogStartOffset = st.p.log.LogEndOffset(), st.p.log.LogStartOffset()
		rp.LastFetchedEpoch = -1
		rp.PartitionMaxBytes = f.b.cfg.ReplicaFetchMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	r, err := conn.roundTrip(req, f.b.clock.Now().Add(f.b.cfg.ReplicaFetchWaitMax+30*time.Second))
	if err != nil {
		return err
	}
	resp := r.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		f.b.logger.Warn("replica fetch refused", "leader", f.leader, "err", kerr.ErrorForCode(resp.ErrorCode))
		for tp, st := range ready {
			f.backoff(tp, st)
		}
		return nil
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			tp := TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			if st, ok := ready[tp]; ok {
				f.handlePartition(tp, st, &rp)
			}
		}
	}
	return nil
}

func (f *replicaFetcher) handlePartition(tp TopicPartition, st followState, rp *kmsg.FetchResponseTopicPartition) {
	p := st.p
	switch err := kerr.ErrorForCode(rp.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.OffsetOutOfRange):
		if rp.LogStartOffset > p.log.LogEndOffset() {
			f.b.logger.Warn("follower behind the leader's log start; starting over", "partition", tp, "log_start", rp.LogStartOffset)
			p.appendMu.Lock()
			err := p.log.TruncateFullyAndStartAt(rp.LogStartOffset)
			p.producers = producerTable{}
			p.appendMu.Unlock()
			if err != nil {
				f.b.logger.Error("truncate fully", "partition", tp, "err", err)
				f.backoff(tp, st)
			}
			return
		}
		f.update(tp, st, func(s *followState) { s.truncated = false })
		return
	default:
		f.b.logger.Debug("replica fetch partition error", "partition", tp, "leader", f.leader, "err", err)
		f.backoff(tp, st)
		return
	}
	if p.mode == RemoteWAL {
		if leo, ok := leaderLogEndTag(rp); ok {
			f.update(tp, st, func(s *followState) { s.leaderLEO = leo })
			if o, ok := f.b.cfg.Replicator.(LeaderLogEndObserver); ok {
				o.ObserveLeaderLogEnd(tp, leo)
			}
		}
	}
	changed := false
	if len(rp.RecordBatches) > 0 && p.mode == Classic {
		if _, err := p.appendAsFollower(rp.RecordBatches, st.epoch); err != nil {
			if errors.Is(err, errFetchStale) {
				return
			}
			f.b.logger.Warn("follower append failed", "partition", tp, "err", err)
			if errors.Is(err, kafkalog.ErrOffsetOverlap) || errors.Is(err, kafkalog.ErrOffsetGap) || errors.Is(err, kafkalog.ErrEpochRegression) {
				f.update(tp, st, func(s *followState) { s.truncated = false })
			} else {
				f.backoff(tp, st)
			}
			return
		}
		changed = true
	}
	if hw := min(rp.HighWatermark, p.log.LogEndOffset()); hw > p.log.HighWatermark() {
		if err := p.log.SetHighWatermark(hw); err != nil {
			f.b.logger.Error("follower high watermark", "partition", tp, "err", err)
		}
		changed = true
	}
	if changed {
		f.b.fetchWait.CheckAndComplete(tp)
	}
}

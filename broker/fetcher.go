package broker

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Versions the replica fetcher speaks (within what brokers serve).
const (
	replicaFetchVersion       = 12
	replicaOffsetForEpochVers = 4
	replicaFetchResponseMax   = 64 << 20
)

// fetcherManager owns one replicaFetcher per leader broker, and a
// goroutine that tells them of the controller's changes (watchCluster).
type fetcherManager struct {
	b       *Broker
	stop    chan struct{}
	watched chan struct{} // closed when watchCluster returns
	// changes counts the controller's changes watchCluster saw: a fetcher
	// whose round spanned one ends the back-offs its answers started.
	changes atomic.Uint64
	mu      struct {
		sync.Mutex
		fetchers map[int32]*replicaFetcher
		closed   bool
	}
}

func newFetcherManager(b *Broker) *fetcherManager {
	m := &fetcherManager{b: b, stop: make(chan struct{}), watched: make(chan struct{})}
	m.mu.fetchers = map[int32]*replicaFetcher{}
	go m.watchCluster()
	return m
}

// watchCluster waits on the controller's change feed and, after each
// change, ends the back-offs of every fetcher's machines. What a fetcher
// backs off from (NOT_LEADER or FENCED_LEADER_EPOCH from a leader that had
// not applied the new state yet, a leader not reachable until it
// registers again) is resolved by such a change, so the fetcher retries
// then rather than when the back-off has passed, as Kafka's fetcher
// retries a partition when a LeaderAndIsr update reaches it. The back-off
// stays the fallback for what no change reports (a controller whose view
// lags the leader's, a disk error).
func (m *fetcherManager) watchCluster() {
	defer close(m.watched)
	for {
		ch := m.b.clusterChanged() // taken before acting: no change is missed
		if ch == nil {
			return // a controller without a change feed: back-offs only
		}
		select {
		case <-m.stop:
			return
		case <-ch:
		}
		m.changes.Add(1) // before the fetchers look: see run
		m.mu.Lock()
		fs := make([]*replicaFetcher, 0, len(m.mu.fetchers))
		for _, f := range m.mu.fetchers {
			fs = append(fs, f)
		}
		m.mu.Unlock()
		for _, f := range fs {
			f.clusterChanged()
		}
	}
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
		go f.reportLoop()
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
	close(m.stop)
	<-m.watched
	for _, f := range fs {
		f.close()
	}
}

// followerLog is what a follower driver needs of its partition: the
// log as the machine reads it, and the changes its actions make. The
// partition implements it under its own locks.
type followerLog interface {
	followerView(withEpochs bool) replica.LogView
	appendAsFollower(records []byte, epoch int32) (kafkalog.AppendInfo, error)
	truncate(to int64) error
	truncateFully(start int64) error
	setFollowerHW(hw int64) (bool, error)
}

var _ followerLog = (*partition)(nil)

// followState is one partition a fetcher replicates: the follower
// machine for one leader epoch and the handle its actions go to. A new
// epoch is a new followState; an answer to a request built from an older
// one is dropped.
type followState struct {
	tp      TopicPartition
	p       *partition // for the Replicator (StartFollower takes the log)
	h       followerLog
	fsm     *replica.Follower
	started bool // remotewal: Replicator.StartFollower called
}

// replicaFetcher replicates partitions led by one broker: a thin driver
// of replica.Follower machines that sends their requests (OffsetForLeaderEpoch,
// Fetch v12 with its replica id) and carries out their actions.
//
// For remotewal partitions a second goroutine (reportLoop) sends log end
// reports (replica.SendLogEndReport) on a connection of its own: their
// logs grow from object storage while the fetch long-polls, so the report
// of each append cannot wait for that fetch to end.
type replicaFetcher struct {
	b        *Broker
	leader   int32
	wakeCh   chan struct{}
	reportCh chan struct{}
	stop     chan struct{}
	done     chan struct{}
	reported chan struct{} // reportLoop's end
	mu       struct {
		sync.Mutex
		parts      map[TopicPartition]*followState // machines are driven under mu
		conn       *wireClient
		reportConn *wireClient
		// appended: remotewal partitions whose Replicator appended since
		// reportLoop last looked (only they may have a log end to report).
		appended map[TopicPartition]struct{}
		// added counts add calls: a round built before the latest add
		// lacks a partition, so it is not sent as a long poll.
		added uint64
		// polling is the connection of the long-poll fetch in flight;
		// add closes it (and sets interrupted) so that a partition taken
		// up, or a new leader epoch, does not wait for the poll to end.
		polling     *wireClient
		interrupted bool
		// expired: the long poll in flight got no answer within its
		// max wait plus replicaRequestTimeout on the broker's clock, and
		// its connection was reset (fetch).
		expired bool
		// seq numbers the fetch rounds and report requests, taken when
		// their log ends are read (both under mu): the leader orders
		// them by it (replica.FetchStamp).
		seq uint64
	}
}

// stampLocked is the FetchStamp of a request whose log ends are being
// read now, under f.mu, with this broker's current registration epoch.
func (f *replicaFetcher) stampLocked() replica.FetchStamp {
	f.mu.seq++
	return replica.FetchStamp{Incarnation: f.b.incarnation, Seq: f.mu.seq, BrokerEpoch: f.b.BrokerEpoch()}
}

func newReplicaFetcher(b *Broker, leader int32) *replicaFetcher {
	f := &replicaFetcher{b: b, leader: leader, wakeCh: make(chan struct{}, 1), reportCh: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), reported: make(chan struct{})}
	f.mu.parts = map[TopicPartition]*followState{}
	f.mu.appended = map[TopicPartition]struct{}{}
	return f
}

func (f *replicaFetcher) add(p *partition, epoch int32) {
	mode := replica.Classic
	if p.mode == RemoteWAL {
		mode = replica.RemoteWAL
	}
	f.mu.Lock()
	f.mu.parts[p.tp] = &followState{tp: p.tp, p: p, h: p, fsm: replica.NewFollower(mode, epoch, f.b.cfg.ReplicaFetchBackoff)}
	f.mu.added++
	// The fetch in flight does not name p at this epoch, and its long
	// poll may last ReplicaFetchWaitMax (for ever, if the leader has
	// nothing to send and the clock is a test's manual one): cut it, so
	// that p is truncated and fetched now. Kafka's fetcher waits the poll
	// out; one redial per burst of adds is the price of not doing so.
	f.cutPollLocked()
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

// wakeReport has reportLoop look for a log end of tp to report. It never
// blocks.
func (f *replicaFetcher) wakeReport(tp TopicPartition) {
	f.mu.Lock()
	f.mu.appended[tp] = struct{}{}
	f.mu.Unlock()
	select {
	case f.reportCh <- struct{}{}:
	default:
	}
}

func (f *replicaFetcher) close() {
	close(f.stop)
	f.mu.Lock()
	for _, c := range []*wireClient{f.mu.conn, f.mu.reportConn} {
		if c != nil {
			c.close() // interrupts a long poll or a report
		}
	}
	f.mu.Unlock()
	<-f.done
	<-f.reported
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

// clusterChanged ends every machine's back-off (the controller applied a
// change, see fetcherManager.watchCluster), cuts the long poll in flight
// if one was backing off (the poll does not name it), and wakes the
// fetcher, so that the partition is sent now.
func (f *replicaFetcher) clusterChanged() {
	now := f.b.clock.Now()
	f.mu.Lock()
	waiting := false
	for _, st := range f.mu.parts {
		if st.fsm.RetryAt().After(now) {
			waiting = true
			st.fsm.ClusterChanged()
		}
	}
	if waiting {
		f.cutPollLocked()
	}
	f.mu.Unlock()
	f.poke() // also ends the wait after a failed dial: the leader may have registered
}

// cutPollLocked closes the connection of the long poll in flight, if
// any, so that the fetcher sends a new round at once (see add). It
// resets the connection (wireClient.abort), so that the leader's answer
// to the cut poll fails to be written and its news stay news for the
// next round (replica.Leader.Told).
func (f *replicaFetcher) cutPollLocked() {
	if c := f.mu.polling; c != nil {
		f.mu.polling, f.mu.interrupted = nil, true
		c.abort()
	}
}

// replicaRequestTimeout is how long a replica request may go unanswered
// beyond the wait it asks the leader for: Kafka's replica.socket.timeout.ms
// default.
const replicaRequestTimeout = 30 * time.Second

// netDeadline is a socket deadline d from now. Sockets time out on the
// wall clock, whatever cfg.Clock is (a manual clock in a test stands
// still, so a deadline taken from it would be in the past or never come),
// for requests the leader answers at once; a long poll's deadline is on
// cfg.Clock instead (fetch), since the leader's answer waits on it.
func netDeadline(d time.Duration) time.Time { return time.Now().Add(d) }

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
		var started []TopicPartition
		for tp, st := range f.mu.parts {
			if st.started && f.b.cfg.Replicator != nil {
				started = append(started, tp)
			}
		}
		f.mu.Unlock()
		// Not under f.mu: StopFollower waits for the remote-WAL
		// follower's loop, which may be appending, and an append's
		// Notify takes f.mu (wakeReport): chaos seeds 121 and 277 hung
		// there in Broker.Close for minutes.
		for _, tp := range started {
			f.b.cfg.Replicator.StopFollower(tp)
		}
	}()
	backoff := f.b.cfg.ReplicaFetchBackoff
	for !f.stopped() {
		// A change while this round is in flight may resolve the error an
		// answer to it then backs off from (a leader that had not applied
		// the new state yet); watchCluster saw the change before that back-off
		// began, so the round ends it itself.
		seen := f.b.fetchers.changes.Load()
		r, idle := f.next()
		if len(r.queries) == 0 && len(r.fetches) == 0 {
			if !f.sleep(idle) {
				return
			}
			continue
		}
		conn, err := f.connect()
		if err != nil {
			f.b.logger.Debug("replica fetcher cannot reach leader", "leader", f.leader, "err", err)
			f.unsent(r)
			if !f.sleep(backoff) {
				return
			}
			continue
		}
		if err := f.step(conn, r); err != nil {
			f.unsent(r)
			if f.stopped() {
				return
			}
			if errors.Is(err, errRoundStale) {
				continue // a partition was added: build the round again
			}
			f.mu.Lock()
			if f.mu.conn == conn {
				f.mu.conn = nil
			}
			interrupted, expired := f.mu.interrupted, f.mu.expired
			f.mu.interrupted, f.mu.expired = false, false
			f.mu.Unlock()
			conn.close()
			if interrupted {
				f.b.logger.Debug("replica fetcher cut its long poll for an added partition", "leader", f.leader)
				continue
			}
			if expired {
				// At most one line per max wait plus 30 s: no flood. The
				// next round goes at once, on a new connection, as after
				// a cut poll: the deadline was the wait itself.
				f.b.logger.Info("replica fetch got no answer in time; fetching again on a new connection", "leader", f.leader,
					"deadline", f.b.cfg.ReplicaFetchWaitMax+replicaRequestTimeout)
				continue
			}
			f.b.logger.Info("replica fetcher connection failed", "leader", f.leader, "err", err)
			if f.b.fetchers.changes.Load() != seen {
				continue // the leader may have registered again meanwhile
			}
			if !f.sleep(backoff) {
				return
			}
			continue
		}
		if f.b.fetchers.changes.Load() != seen {
			f.clusterChanged()
		}
	}
}

// round is what the machines asked to send in one iteration; added is
// the fetcher's add count when it was built.
type round struct {
	queries map[TopicPartition]queryReq
	fetches map[TopicPartition]fetchReq
	added   uint64
	stamp   replica.FetchStamp // when the fetches' log ends were read
}

// errRoundStale: a partition was added after the round was built; the
// round is built again rather than sent as a long poll without it.
var errRoundStale = errors.New("replica fetcher: partitions added since the round was built")

type queryReq struct {
	st *followState
	replica.SendEpochQuery
}

type fetchReq struct {
	st *followState
	replica.SendFetch
}

// next asks every machine what to send now. Truncation goes first, as in
// Kafka: while any partition has an epoch query to send, this round sends
// only queries, and the fetches the others asked for are handed back
// unsent. idle is how long to sleep when nothing is to be sent.
func (f *replicaFetcher) next() (round, time.Duration) {
	now := f.b.clock.Now()
	r := round{queries: map[TopicPartition]queryReq{}, fetches: map[TopicPartition]fetchReq{}}
	idle := time.Minute
	var starts []*followState
	f.mu.Lock()
	r.added, r.stamp = f.mu.added, f.stampLocked()
	for tp, st := range f.mu.parts {
		acts := st.fsm.Next(now, st.h.followerView(!st.fsm.Truncated()))
		if len(acts) == 0 {
			if at := st.fsm.RetryAt(); at.After(now) {
				idle = min(idle, at.Sub(now))
			}
			continue
		}
		for _, a := range acts {
			switch a := a.(type) {
			case replica.SendEpochQuery:
				r.queries[tp] = queryReq{st: st, SendEpochQuery: a}
			case replica.SendFetch:
				r.fetches[tp] = fetchReq{st: st, SendFetch: a}
			case replica.StartRemote:
				starts = append(starts, st)
			}
		}
	}
	if len(r.queries) > 0 {
		for _, q := range r.fetches {
			q.st.fsm.RequestFailed(q.Req)
		}
		clear(r.fetches)
	}
	f.mu.Unlock()
	for _, st := range starts {
		f.startRemote(st)
	}
	return r, idle
}

// unsent hands a round's requests back to their machines: they got no
// answer.
func (f *replicaFetcher) unsent(r round) {
	handBack(f, r.queries, nil, func(q queryReq) (*followState, uint64) { return q.st, q.Req })
	handBack(f, r.fetches, nil, func(q fetchReq) (*followState, uint64) { return q.st, q.Req })
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

// event feeds st's machine an event, if st is still the partition's
// state, and carries out the actions that come back.
func (f *replicaFetcher) event(st *followState, fn func(now time.Time) []replica.Action) {
	now := f.b.clock.Now()
	f.mu.Lock()
	if f.mu.parts[st.tp] != st {
		f.mu.Unlock()
		return
	}
	acts := fn(now)
	f.mu.Unlock()
	f.carryOut(st, acts)
}

// carryOut does what a follower machine asked, reporting the outcomes of
// appends and truncations back to it.
func (f *replicaFetcher) carryOut(st *followState, acts []replica.Action) {
	tp, changed := st.tp, false
	for _, a := range acts {
		switch a := a.(type) {
		case replica.Truncate:
			leo := st.h.followerView(false).LEO
			f.b.logger.Info("truncating follower by leader epoch", "partition", tp, "from", leo, "to", a.To, "leader_epoch", st.fsm.LeaderEpoch())
			if err := st.h.truncate(a.To); err != nil {
				f.b.logger.Error("truncate by leader epoch failed", "partition", tp, "to", a.To, "err", err)
				f.event(st, func(now time.Time) []replica.Action { return st.fsm.TruncateFailed(now) })
				return
			}
		case replica.TruncateFully:
			f.b.logger.Warn("follower behind the leader's log start; starting over", "partition", tp, "log_start", a.StartAt)
			if err := st.h.truncateFully(a.StartAt); err != nil {
				f.b.logger.Error("truncate fully", "partition", tp, "err", err)
				f.event(st, func(now time.Time) []replica.Action { return st.fsm.TruncateFailed(now) })
				return
			}
		case replica.Append:
			_, err := st.h.appendAsFollower(a.Records, st.fsm.LeaderEpoch())
			if err != nil && !errors.Is(err, replica.ErrStale) && !errors.Is(err, ErrLogDirOffline) {
				f.b.logger.Warn("follower append failed", "partition", tp, "err", err)
			}
			changed = changed || err == nil
			f.event(st, func(now time.Time) []replica.Action {
				return st.fsm.AppendDone(now, st.h.followerView(false), err)
			})
		case replica.SetHW:
			moved, err := st.h.setFollowerHW(a.HW)
			if err != nil {
				f.b.logger.Error("follower high watermark", "partition", tp, "err", err)
			}
			changed = changed || moved
		case replica.StartRemote:
			f.startRemote(st)
		case replica.ObserveLeaderLogEnd:
			if o, ok := f.b.cfg.Replicator.(LeaderLogEndObserver); ok {
				o.ObserveLeaderLogEnd(tp, a.LEO)
			}
		case replica.Backoff:
			f.b.logger.Debug("replica fetcher backing off", "partition", tp, "leader", f.leader, "until", a.Until, "reason", a.Reason)
		}
	}
	if changed {
		f.b.fetchWait.CheckAndComplete(tp)
	}
}

// startRemote starts the Replicator feeding a remotewal follower's log,
// once truncation is done.
func (f *replicaFetcher) startRemote(st *followState) {
	if f.b.cfg.Replicator == nil || st.p.mode != RemoteWAL {
		return
	}
	f.mu.Lock()
	ok := f.mu.parts[st.tp] == st && !st.started
	st.started = st.started || ok
	f.mu.Unlock()
	if !ok {
		return
	}
	tp := st.tp
	notify := func() {
		f.poke()
		f.wakeReport(tp)
		f.b.fetchWait.CheckAndComplete(tp)
	}
	if err := f.b.cfg.Replicator.StartFollower(newReplicaHandle(f.b, st.p, f.leader, st.fsm.LeaderEpoch(), notify)); err != nil {
		f.b.logger.Error("remote WAL follower start", "partition", tp, "err", err)
	}
}

// reportLoop sends the log end reports the remotewal machines ask for
// (replica.Follower.Report) each time a Replicator appended, one request
// for all of them, and hands the answers' high watermarks back
// (Follower.Reported). A failed report is not retried: the fetch in
// flight carries the log end when it ends. It stops with the fetcher.
func (f *replicaFetcher) reportLoop() {
	defer close(f.reported)
	defer func() {
		f.mu.Lock()
		if f.mu.reportConn != nil {
			f.mu.reportConn.close()
			f.mu.reportConn = nil
		}
		f.mu.Unlock()
	}()
	for {
		select {
		case <-f.stop:
			return
		case <-f.reportCh:
		}
		reports, stamp := f.reports()
		if len(reports) == 0 {
			continue
		}
		if err := f.sendReports(reports, stamp); err != nil && !f.stopped() {
			f.b.logger.Debug("log end report to the leader failed", "leader", f.leader, "err", err)
			f.mu.Lock()
			if c := f.mu.reportConn; c != nil {
				c.close()
				f.mu.reportConn = nil
			}
			f.mu.Unlock()
			if !f.sleepStop(f.b.cfg.ReplicaFetchBackoff) {
				return
			}
		}
	}
}

type reportReq struct {
	st *followState
	replica.SendLogEndReport
}

// reports asks the machines of the partitions appended to since the last
// call whether they have a log end to report, and stamps them: a report
// may reach the leader before the long poll sent ahead of it, which then
// carries an older stamp and does not lower the leader's view.
func (f *replicaFetcher) reports() (map[TopicPartition]reportReq, replica.FetchStamp) {
	out := map[TopicPartition]reportReq{}
	f.mu.Lock()
	defer f.mu.Unlock()
	stamp := f.stampLocked()
	for tp := range f.mu.appended {
		st := f.mu.parts[tp]
		if st == nil || !st.started {
			continue
		}
		if r, ok := st.fsm.Report(st.h.followerView(false)); ok {
			out[tp] = reportReq{st: st, SendLogEndReport: r}
		}
	}
	clear(f.mu.appended)
	return out, stamp
}

// sendReports sends one Fetch that does not wait, on the report
// connection, and feeds each partition's answer to its machine.
func (f *replicaFetcher) sendReports(reports map[TopicPartition]reportReq, stamp replica.FetchStamp) error {
	f.mu.Lock()
	conn := f.mu.reportConn
	f.mu.Unlock()
	if conn == nil {
		c, _, err := f.b.dialBroker(f.leader, replicaFetcherClientIDPrefix+strconv.Itoa(int(f.b.cfg.BrokerID))+"-reports", 10*time.Second, replicaFetchResponseMax)
		if err != nil {
			return err
		}
		f.mu.Lock()
		if f.stopped() {
			f.mu.Unlock()
			c.close()
			return errors.New("fetcher stopped")
		}
		f.mu.reportConn, conn = c, c
		f.mu.Unlock()
	}
	fr := f.newFetchRequest(0)
	setFetchStamp(fr.req, stamp)
	for tp, r := range reports {
		fr.add(tp, r.st.fsm.LeaderEpoch(), r.Offset, r.LogStart)
	}
	r, err := conn.roundTrip(fr.req, netDeadline(30*time.Second))
	if err != nil {
		return err
	}
	resp := r.(*kmsg.FetchResponse)
	if topErr := kerrOf(resp.ErrorCode); topErr != nil {
		f.b.logger.Debug("log end report refused", "leader", f.leader, "err", topErr)
		return nil
	}
	for _, rt := range resp.Topics {
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			q, ok := reports[TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]
			if !ok {
				continue
			}
			ans := replica.FetchPartition{Err: kerrOf(rp.ErrorCode), HighWatermark: rp.HighWatermark, LogStart: rp.LogStartOffset, LeaderLEO: -1}
			if leo, ok := leaderLogEndTag(rp); ok {
				ans.LeaderLEO = leo
			}
			f.event(q.st, func(time.Time) []replica.Action { return q.st.fsm.Reported(q.st.h.followerView(false), ans) })
		}
	}
	return nil
}

// sleepStop waits d or stop; it reports false on stop.
func (f *replicaFetcher) sleepStop(d time.Duration) bool {
	t := f.b.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.stop:
		return false
	case <-t.C():
		return true
	}
}

// step sends the round's epoch queries or its fetch. Errors are
// connection errors; the caller hands the requests back unsent.
func (f *replicaFetcher) step(conn *wireClient, r round) error {
	if len(r.queries) > 0 {
		return f.truncate(conn, r.queries)
	}
	return f.fetch(conn, r.fetches, r.added, r.stamp)
}

// kerrOf is the typed error of a response code (nil for none).
func kerrOf(code int16) *kerr.Error {
	if code == 0 {
		return nil
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e
	}
	return kerr.UnknownServerError
}

// truncate is KIP-101: ask the leader where our latest epochs end; the
// machines decide where to cut (replica.Truncation).
func (f *replicaFetcher) truncate(conn *wireClient, queries map[TopicPartition]queryReq) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = replicaOffsetForEpochVers
	req.ReplicaID = f.b.cfg.BrokerID
	byTopic := map[string]int{}
	for tp, q := range queries {
		i, ok := byTopic[tp.Topic]
		if !ok {
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			byTopic[tp.Topic] = i
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = tp.Partition, q.st.fsm.LeaderEpoch(), q.Epoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	r, err := conn.roundTrip(req, netDeadline(30*time.Second))
	if err != nil {
		return err
	}
	resp := r.(*kmsg.OffsetForLeaderEpochResponse)
	answered := map[TopicPartition]bool{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			tp := TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			q, ok := queries[tp]
			if !ok || answered[tp] {
				continue
			}
			answered[tp] = true
			perr := kerrOf(rp.ErrorCode)
			if perr != nil {
				f.b.logger.Info("offset for leader epoch refused", "partition", tp, "leader", f.leader, "err", perr)
			}
			ans := replica.EpochAnswer{Epoch: rp.LeaderEpoch, EndOffset: rp.EndOffset}
			f.event(q.st, func(now time.Time) []replica.Action {
				return q.st.fsm.EpochAnswered(now, q.st.h.followerView(true), q.Req, perr, ans)
			})
		}
	}
	handBack(f, queries, answered, func(q queryReq) (*followState, uint64) { return q.st, q.Req })
	return nil
}

// handBack returns the requests the leader did not answer to their
// machines, so they are asked again.
func handBack[R any](f *replicaFetcher, reqs map[TopicPartition]R, answered map[TopicPartition]bool, of func(R) (*followState, uint64)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for tp, q := range reqs {
		if st, req := of(q); !answered[tp] && f.mu.parts[tp] == st {
			st.fsm.RequestFailed(req)
		}
	}
}

// fetchRequest builds one replica Fetch v12 (no fetch session).
type fetchRequest struct {
	req      *kmsg.FetchRequest
	byTopic  map[string]int
	maxBytes int32
}

// newFetchRequest starts a replica fetch that waits up to maxWait for a
// byte (0: answered at once, min bytes 0).
func (f *replicaFetcher) newFetchRequest(maxWait time.Duration) fetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = replicaFetchVersion
	req.ReplicaID = f.b.cfg.BrokerID
	req.MaxWaitMillis = int32(maxWait.Milliseconds())
	if maxWait > 0 {
		req.MinBytes = 1
	}
	req.MaxBytes = DefaultReplicaFetchResponseMax
	req.SessionEpoch = -1 // no fetch session
	return fetchRequest{req: req, byTopic: map[string]int{}, maxBytes: f.b.cfg.ReplicaFetchMaxBytes}
}

// add asks for tp at offset, as of leader epoch epoch.
func (b fetchRequest) add(tp TopicPartition, epoch int32, offset, logStart int64) {
	i, ok := b.byTopic[tp.Topic]
	if !ok {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = tp.Topic
		b.req.Topics = append(b.req.Topics, rt)
		i = len(b.req.Topics) - 1
		b.byTopic[tp.Topic] = i
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch = tp.Partition, epoch
	rp.FetchOffset, rp.LogStartOffset = offset, logStart
	rp.LastFetchedEpoch = -1
	rp.PartitionMaxBytes = b.maxBytes
	b.req.Topics[i].Partitions = append(b.req.Topics[i].Partitions, rp)
}

func (f *replicaFetcher) fetch(conn *wireClient, fetches map[TopicPartition]fetchReq, added uint64, stamp replica.FetchStamp) error {
	// A remotewal partition's fetch long-polls too: the leader answers
	// it when it appends (readPart) or its HW moves, and the log end of
	// each append goes out in a report (reportLoop), not in this fetch.
	fr := f.newFetchRequest(f.b.cfg.ReplicaFetchWaitMax)
	setFetchStamp(fr.req, stamp)
	for tp, q := range fetches {
		fr.add(tp, q.st.fsm.LeaderEpoch(), q.Offset, q.LogStart)
	}
	f.mu.Lock()
	if f.mu.added != added {
		f.mu.Unlock()
		return errRoundStale
	}
	f.mu.polling = conn
	f.mu.Unlock()
	// The poll's deadline is its max wait plus the request timeout on
	// the broker's clock, the one the leader's long poll waits on: a
	// wall-clock socket deadline cut a poll that a test's manual clock
	// kept parked (30 s of wall time later), and the fetcher then backed
	// off on that clock. The socket itself has no deadline meanwhile.
	expire := f.b.clock.NewTimer(f.b.cfg.ReplicaFetchWaitMax + replicaRequestTimeout)
	replied := make(chan struct{})
	go func() {
		select {
		case <-expire.C():
			f.mu.Lock()
			if f.mu.polling == conn { // still waiting for the answer
				f.mu.polling, f.mu.expired = nil, true
				conn.abort()
			}
			f.mu.Unlock()
		case <-replied:
		}
	}()
	// The answer's record batches point into the connection's reused
	// response buffer: every append below is done (carryOut runs each
	// partition's actions in turn) before this connection's next fetch.
	r, err := conn.roundTripReused(fr.req, time.Time{})
	f.mu.Lock()
	if f.mu.polling == conn {
		f.mu.polling = nil
	}
	f.mu.Unlock()
	close(replied)
	expire.Stop()
	if err != nil {
		return err
	}
	resp := r.(*kmsg.FetchResponse)
	answered := map[TopicPartition]bool{}
	if topErr := kerrOf(resp.ErrorCode); topErr != nil {
		f.b.logger.Warn("replica fetch refused", "leader", f.leader, "err", topErr)
		for tp, q := range fetches {
			answered[tp] = true
			f.event(q.st, func(now time.Time) []replica.Action {
				return q.st.fsm.Fetched(now, q.st.h.followerView(false), q.Req, replica.FetchPartition{Err: topErr, LeaderLEO: -1})
			})
		}
		return nil
	}
	for _, rt := range resp.Topics {
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			tp := TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			q, ok := fetches[tp]
			if !ok || answered[tp] {
				continue
			}
			answered[tp] = true
			f.handlePartition(q, rp)
		}
	}
	handBack(f, fetches, answered, func(q fetchReq) (*followState, uint64) { return q.st, q.Req })
	return nil
}

// handlePartition feeds one partition's fetch answer to its machine.
func (f *replicaFetcher) handlePartition(q fetchReq, rp *kmsg.FetchResponseTopicPartition) {
	st := q.st
	ans := replica.FetchPartition{
		Err: kerrOf(rp.ErrorCode), HighWatermark: rp.HighWatermark, LogStart: rp.LogStartOffset,
		LeaderLEO: -1, Records: rp.RecordBatches,
	}
	if ans.Err != nil && !errors.Is(ans.Err, kerr.OffsetOutOfRange) {
		f.b.logger.Debug("replica fetch partition error", "partition", st.tp, "leader", f.leader, "err", ans.Err)
	}
	if st.p.mode == RemoteWAL {
		if leo, ok := leaderLogEndTag(rp); ok {
			ans.LeaderLEO = leo
		}
	}
	f.event(st, func(now time.Time) []replica.Action {
		return st.fsm.Fetched(now, st.h.followerView(false), q.Req, ans)
	})
	if ans.Err == nil {
		st.p.followLeaderLogStart(rp.LogStartOffset)
	}
}

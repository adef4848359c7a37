package broker

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/changefeed"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/purgatory"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Broker is one Kafka-compatible broker. Make it with New; Close stops it.
type Broker struct {
	cfg    Config
	logger *slog.Logger
	clock  clock.Clock
	ctrl   Controller
	ledger *ledger.Ledger
	ln     net.Listener // every listener, under the connection limits
	// limits is the connection caps, under any TLS (the handshake runs in
	// the connection's goroutine); conns counts what the connection layer
	// refused.
	limits *connQuota
	conns  connCounters
	// validator checks every produced batch once (BatchValidator).
	validator *kafkalog.BatchValidator
	info      BrokerInfo
	// topicIDs caches topic id -> name for requests by id (topicids.go).
	topicIDs sync.Map
	// listeners are bound in New and closed by Close.
	listeners []*listener
	// saslFakeKey derives stand-in SCRAM credentials for unknown users.
	saslFakeKey []byte
	// incarnation is this broker process's id in the FetchStamps of its
	// replica fetches (random per start, never 0).
	incarnation uint64

	produceWait *purgatory.Purgatory[TopicPartition]
	fetchWait   *purgatory.Purgatory[TopicPartition]
	fetchers    *fetcherManager
	groups      *groups
	unsubscribe func()
	reqs        requestCounters
	events      eventCounters
	dir         logDirHealth    // log.dirs online or offline (logdir.go)
	changes     changefeed.Feed // see Changed
	stop        chan struct{}
	wg          sync.WaitGroup

	lease struct { // heartbeat.go
		sync.Mutex
		st leaseState
	}
	// roles serialises the Replicator's leader starts and stops of
	// applyTopic with the parking of remote-WAL leaders while the lease
	// has run out (heartbeat.go); taken before lease.
	roles sync.Mutex

	mu struct {
		sync.Mutex
		partitions map[TopicPartition]*partition
		conns      map[net.Conn]*connState
		closed     bool
	}
}

// New validates cfg, listens, registers the broker with the controller,
// takes up its replicas of existing topics and starts serving.
func New(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckLogDir(cfg.LogDir); err != nil {
		return nil, err
	}
	if err := checkPartitionDirs(cfg.LogDir, cfg.logFS()); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, clock: cfg.Clock, ctrl: cfg.Controller, ledger: cfg.Ledger, stop: make(chan struct{})}
	b.dir.failed = make(chan struct{}, 1)
	// A batch is bounded here only by the request frame; each topic's
	// max.message.bytes is the log's MaxBatchBytes (MESSAGE_TOO_LARGE).
	b.validator = kafkalog.NewBatchValidator(int(cfg.SocketRequestMaxBytes), cfg.MaxUncompressedBatchBytes)
	b.logger = cfg.Logger.With("broker", cfg.BrokerID)
	b.mu.partitions = map[TopicPartition]*partition{}
	b.mu.conns = map[net.Conn]*connState{}
	b.saslFakeKey = make([]byte, 32)
	if _, err := rand.Read(b.saslFakeKey); err != nil {
		return nil, err
	}
	var inc [8]byte
	if _, err := rand.Read(inc[:]); err != nil {
		return nil, err
	}
	b.incarnation = binary.BigEndian.Uint64(inc[:]) | 1
	lns, err := listen(cfg.Listeners)
	if err != nil {
		return nil, err
	}
	b.listeners = lns
	b.limits = newConnQuota(ConnLimits{Max: cfg.MaxConnections, PerIP: cfg.MaxConnectionsPerIP, PerIPOverrides: cfg.MaxConnectionsPerIPOverrides}, b.logger, b.clock)
	b.ln = newMultiListener(lns, cfg.InterBrokerListenerName, b.limits)
	closeListeners := func() { b.ln.Close() }
	b.info = BrokerInfo{ID: cfg.BrokerID, Rack: cfg.Rack}
	for _, l := range lns {
		b.info.Endpoints = append(b.info.Endpoints, l.advertised)
		if l.cfg.Name == cfg.InterBrokerListenerName {
			b.info.Host, b.info.Port = l.advertised.Host, l.advertised.Port
		}
	}
	if err := b.register(false); err != nil {
		closeListeners()
		return nil, err
	}
	for _, bi := range b.ctrl.Brokers() {
		if bi.ID == b.info.ID {
			b.info = bi // a static list decides the advertised address
		}
	}
	// Both purgatories run on cfg.Clock: acks=all timeouts and fetch long
	// polls expire when that clock says so (a clock.Manual in a test).
	purgClock := purgatory.Of(cfg.Clock)
	newPurg := func() (*purgatory.Purgatory[TopicPartition], error) {
		return purgatory.New[TopicPartition](purgatory.Config{Timer: purgatory.TimerConfig{Clock: purgClock}})
	}
	if b.produceWait, err = newPurg(); err != nil {
		closeListeners()
		return nil, err
	}
	if b.fetchWait, err = newPurg(); err != nil {
		closeListeners()
		b.produceWait.Shutdown()
		return nil, err
	}
	b.fetchers = newFetcherManager(b)
	b.removeDeletedDirs()
	if err := b.startGroups(); err != nil {
		closeListeners()
		b.produceWait.Shutdown()
		b.fetchWait.Shutdown()
		return nil, err
	}
	b.unsubscribe = b.ctrl.Subscribe(b.applyTopic)
	for _, ts := range b.ctrl.Topics() {
		b.applyTopic(ts)
	}
	b.removeStrayReplicas()
	b.heartbeat() // learns whether a lease is enforced
	// Every periodic loop's timer is made here, not in its goroutine, so
	// that a test on the manual clock may advance it as soon as New
	// returns: a deadline is then counted from New, not from whenever the
	// goroutine got to run.
	interval := reapInterval(cfg.ConnectionsMaxIdle, cfg.RequestReadTimeout)
	reapTimer := b.clock.NewTimer(interval)
	heartbeatTimer := b.clock.NewTimer(cfg.BrokerHeartbeatInterval)
	b.wg.Add(6)
	go b.acceptLoop()
	go b.isrLoop(b.clock.Now().Add(b.isrCheckInterval()), b.clock.NewTimer(b.isrCheckInterval()))
	go b.retentionLoop(b.clock.NewTimer(cfg.RetentionCheckInterval))
	go b.producerExpirationLoop(b.clock.NewTimer(cfg.ProducerIDExpirationCheckInterval))
	go b.heartbeatLoop(heartbeatTimer)
	go b.everyOn(reapTimer, interval, func() { b.reapConns(b.clock.Now()) }, cfg.afterReapArmed)
	if !cfg.DisableAutoLeaderRebalance {
		b.wg.Add(1)
		go b.rebalanceLoop(b.clock.NewTimer(cfg.LeaderImbalanceCheckInterval))
	}
	if !cfg.LogCleanerDisable {
		b.wg.Add(1)
		go b.cleanerLoop(b.clock.NewTimer(cfg.LogCleanerBackoff))
	}
	if cfg.MetricsListener != "" {
		addr, err := b.ServeMetrics(cfg.MetricsListener)
		if err != nil {
			b.Close()
			return nil, err
		}
		b.logger.Info("serving Prometheus metrics", "url", "http://"+addr+"/metrics")
	}
	for _, l := range lns {
		b.logger.Info("listening", "listener", l.cfg.Name, "protocol", l.cfg.Protocol, "addr", l.ln.Addr().String(), "advertised", l.advertised.Addr())
	}
	b.logger.Info("broker started", "addr", b.ln.Addr().String(), "rack", cfg.Rack, "log_dir", cfg.LogDir, "inter_broker_listener", cfg.InterBrokerListenerName)
	return b, nil
}

// LogDir is the broker's log.dirs.
func (b *Broker) LogDir() string { return b.cfg.LogDir }

// Addr is the address the inter-broker listener is bound to.
func (b *Broker) Addr() string { return b.ln.Addr().String() }

// ListenerAddr is the address the named listener is bound to.
func (b *Broker) ListenerAddr(name string) (string, bool) {
	for _, l := range b.listeners {
		if l.cfg.Name == name {
			return l.ln.Addr().String(), true
		}
	}
	return "", false
}

// Info is the broker as the controller knows it.
func (b *Broker) Info() BrokerInfo { return b.info }

// Ledger is where the broker records bytes between racks.
func (b *Broker) Ledger() *ledger.Ledger { return b.ledger }

// PartitionLog returns this broker's log of tp, if it is a replica.
func (b *Broker) PartitionLog(tp TopicPartition) (*kafkalog.Log, bool) {
	p := b.partition(tp)
	if p == nil {
		return nil, false
	}
	return p.log, true
}

// PartitionStatus returns this broker's view of tp, if it is a replica.
func (b *Broker) PartitionStatus(tp TopicPartition) (PartitionStatus, bool) {
	p := b.partition(tp)
	if p == nil {
		return PartitionStatus{}, false
	}
	return p.status(), true
}

// Close stops serving, stops the replica fetchers, completes waiting
// requests and closes the logs.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return nil
	}
	b.mu.closed = true
	for _, cs := range b.mu.conns {
		cs.close()
	}
	b.mu.Unlock()
	close(b.stop)
	b.unsubscribe()
	b.ln.Close() // the limits, the listeners under them
	b.fetchers.close()
	b.produceWait.Shutdown()
	b.fetchWait.Shutdown()
	b.closeGroups()
	b.wg.Wait()
	b.mu.Lock()
	parts := b.mu.partitions
	b.mu.partitions = map[TopicPartition]*partition{}
	b.mu.Unlock()
	var errs []error
	for tp, p := range parts {
		if b.cfg.Replicator != nil && p.mode == RemoteWAL {
			b.cfg.Replicator.StopLeader(tp)
			b.cfg.Replicator.StopFollower(tp)
		}
		if err := p.log.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	b.logger.Info("broker stopped")
	return errors.Join(errs...)
}

// notHere is the error for a partition this broker holds no replica of:
// UNKNOWN_TOPIC_OR_PARTITION if the controller knows no such partition
// (an unknown topic, or a partition number past the topic's), else
// NOT_LEADER_OR_FOLLOWER (the client's metadata is stale; it retries).
func (b *Broker) notHere(tp TopicPartition) *kerr.Error {
	ts, ok := b.ctrl.Topic(tp.Topic)
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(ts.Partitions) {
		return kerr.UnknownTopicOrPartition
	}
	return kerr.NotLeaderForPartition
}

func (b *Broker) partition(tp TopicPartition) *partition {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.partitions[tp]
}

// partitionsSnapshot returns the replicas, sorted.
func (b *Broker) partitionsSnapshot() []*partition {
	b.mu.Lock()
	out := make([]*partition, 0, len(b.mu.partitions))
	for _, p := range b.mu.partitions {
		out = append(out, p)
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].tp.Topic != out[j].tp.Topic {
			return out[i].tp.Topic < out[j].tp.Topic
		}
		return out[i].tp.Partition < out[j].tp.Partition
	})
	return out
}

// wake retries the delayed produces and fetches watching tp.
func (b *Broker) wake(tp TopicPartition) {
	b.fetchWait.CheckAndComplete(tp)
	b.produceWait.CheckAndComplete(tp)
}

// Changed returns a channel closed at the next change of what this
// broker serves: a partition log's end, high watermark, start offset or
// segments (appends, truncation, retention, DeleteRecords, compaction), a
// topic state applied, a follower's fetch recorded on the leader (its log
// end and the time it was last caught up), or a group coordinator change
// (a group stepped, an offset commit applied, a coordinator partition
// loaded or unloaded).
// Take the channel, check the state, then wait: a change in between is
// not missed. Tests wait on it instead of polling.
func (b *Broker) Changed() <-chan struct{} { return b.changes.Changed() }

// applyTopic is the controller subscription: it takes up, changes the
// role of, or drops this broker's replicas of ts.
func (b *Broker) applyTopic(ts TopicState) {
	defer b.changes.Signal()
	b.mu.Lock()
	closed := b.mu.closed
	b.mu.Unlock()
	if closed {
		return
	}
	if ts.Deleted {
		b.deleteReplicas(ts)
		return
	}
	mode, err := replicationModeOf(ts.Configs)
	if err != nil {
		b.logger.Error("topic config", "topic", ts.Name, "err", err)
		return
	}
	b.offsetsTopicSeen(ts)
	for _, ps := range ts.Partitions {
		tp := TopicPartition{Topic: ts.Name, Partition: ps.Partition}
		if !slices.Contains(ps.Replicas, b.cfg.BrokerID) {
			b.offsetsRoleChanged(tp, roleFollower, ps)
			b.dropPartition(tp)
			continue
		}
		p, err := b.openPartition(tp, mode, ts)
		if err != nil {
			b.logger.Error("open partition", "partition", tp, "err", err)
			continue
		}
		b.retunePartition(p, ts)
		b.roles.Lock() // against parking (heartbeat.go)
		role := p.applyState(ps)
		b.offsetsRoleChanged(tp, role, ps)
		switch role {
		case roleLeader:
			b.fetchers.remove(tp)
			if b.cfg.Replicator != nil && mode == RemoteWAL {
				b.cfg.Replicator.StopFollower(tp)
				b.startRemoteLeader(p, ps.LeaderEpoch)
			}
			b.logger.Info("became leader", "partition", tp, "leader_epoch", ps.LeaderEpoch, "isr", ps.ISR, "log_end", p.log.LogEndOffset())
			p.maybeAdvanceHW()
			b.wake(tp)
		case roleFollower:
			if b.cfg.Replicator != nil && mode == RemoteWAL {
				b.cfg.Replicator.StopLeader(tp)
				b.cfg.Replicator.StopFollower(tp)
				b.unpark(tp)
			}
			if ps.Leader == NoLeader {
				// No live in-sync replica (liveness.go): nothing to follow
				// until the controller elects one.
				b.fetchers.remove(tp)
				b.logger.Warn("partition has no leader", "partition", tp, "leader_epoch", ps.LeaderEpoch, "isr", ps.ISR)
				b.wake(tp)
				break
			}
			b.logger.Info("became follower", "partition", tp, "leader", ps.Leader, "leader_epoch", ps.LeaderEpoch)
			b.fetchers.add(p, ps.Leader, ps.LeaderEpoch)
			b.wake(tp)
		case roleISR:
			p.maybeAdvanceHW()
			b.wake(tp)
		}
		b.roles.Unlock()
	}
}

func (b *Broker) openPartition(tp TopicPartition, mode ReplicationMode, ts TopicState) (*partition, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.mu.partitions[tp]; p != nil {
		return p, nil
	}
	if err := checkTopicName(tp.Topic); err != nil {
		return nil, err
	}
	dir := b.partitionDir(tp)
	if err := b.claimPartitionDir(dir, ts.ID); err != nil {
		return nil, err
	}
	lc := kafkalog.Config{
		FS:                           b.cfg.logFS(),
		FlushMessages:                b.cfg.FlushMessages,
		ProducerStateRebuildDisabled: b.cfg.ProducerStateRebuildDisabled,
		ProducerIDExpirationMs:       b.cfg.ProducerIDExpiration.Milliseconds(),
		Clock:                        b.clock,
		Logger:                       b.logger,
		OnChange:                     b.changes.Signal,
	}
	// Values were checked at creation (checkTopicConfigs).
	set := b.partitionSettings(ts.Configs)
	applyTunables(&lc, set.log)
	_, lc.Compacted = compactConfigOf(ts.Configs)
	l, err := kafkalog.Open(dir, lc)
	if err != nil {
		b.storageFailed("opening the log", tp, err)
		return nil, err
	}
	p := &partition{tp: tp, topicID: ts.ID, configEpoch: ts.Epoch, self: b.cfg.BrokerID, log: l, validator: b.validator, mode: mode,
		logAppendTime: set.logAppendTime, compacted: set.compacted, lagMax: b.cfg.ReplicaLagTimeMax, clock: b.clock, logger: b.logger,
		storage: func(what string, err error) bool { return b.storageFailed(what, tp, err) }}
	p.minISR.Store(int64(set.minISR))
	b.mu.partitions[tp] = p
	return p, nil
}

func (b *Broker) partitionDir(tp TopicPartition) string {
	return filepath.Join(b.cfg.LogDir, tp.Topic+"-"+strconv.Itoa(int(tp.Partition)))
}

// nonZero maps 0 to 1 and keeps any other value.
func nonZero(v int64) int64 {
	if v == 0 {
		return 1
	}
	return v
}

// dropPartition forgets a replica moved away; its directory stays.
func (b *Broker) dropPartition(tp TopicPartition) {
	b.mu.Lock()
	p := b.mu.partitions[tp]
	delete(b.mu.partitions, tp)
	b.mu.Unlock()
	if p == nil {
		return
	}
	b.fetchers.remove(tp)
	if b.cfg.Replicator != nil && p.mode == RemoteWAL {
		b.cfg.Replicator.StopLeader(tp)
		b.cfg.Replicator.StopFollower(tp)
	}
	b.wake(tp)
	if err := p.log.Close(); err != nil {
		b.logger.Warn("close dropped partition", "partition", tp, "err", err)
	}
}

// isrLoop shrinks ISRs of lagging followers every half
// replica.lag.time.max.ms at a fixed rate, as Kafka's isr-expiration task
// (scheduleAtFixedRate): the checks are due at first + k·interval (t is
// armed for first by New), and each pass reads the clock before it runs,
// so every due instant is followed by a pass that reads at least it,
// however late this goroutine ran. A follower that lags past
// replica.lag.time.max.ms is therefore out of the ISR by the first due
// instant after that, at most one interval later: a bound from the
// configuration alone (the broker tests on the manual clock use it),
// where re-arming from the pass's own time would add each pass's
// scheduling delay.
func (b *Broker) isrLoop(first time.Time, t clock.Timer) {
	defer b.wg.Done()
	defer t.Stop()
	interval, due := b.isrCheckInterval(), first
	for {
		select {
		case <-b.stop:
			return
		case <-t.C():
		}
		at := b.clock.Now()
		b.shrinkISRs() // decides at a reading no earlier than at
		due = nextFixedRate(due, at, interval)
		t.Reset(due.Sub(b.clock.Now())) // not after: fires at once
	}
}

// nextFixedRate is the first instant of the grid due + k·period (k ≥ 0)
// strictly after at: the next run of a fixed-rate task whose run at a
// reading of at covered every instant up to it (one run however many
// were skipped: only the latest reading matters).
func nextFixedRate(due, at time.Time, period time.Duration) time.Time {
	if due.After(at) {
		return due
	}
	return due.Add((at.Sub(due)/period + 1) * period)
}

// isrCheckInterval is how often the leader looks for lagging followers:
// half replica.lag.time.max.ms, as Kafka.
func (b *Broker) isrCheckInterval() time.Duration {
	return max(b.cfg.ReplicaLagTimeMax/2, 10*time.Millisecond)
}

// everyOn runs fn every period on the broker's clock until Close (it owns
// one b.wg count), first when t (made and armed by New, so that a test on
// the manual clock may advance it as soon as New returns) fires; armed,
// if set, runs after each fn once the next run is scheduled (a test hook).
func (b *Broker) everyOn(t clock.Timer, period time.Duration, fn, armed func()) {
	b.everyOrWhen(t, period, fn, armed, nil, nil)
}

// everyOrWhen is everyOn that also runs now whenever kick fires, between
// the periodic runs (a nil kick never fires).
func (b *Broker) everyOrWhen(t clock.Timer, period time.Duration, fn, armed func(), kick <-chan struct{}, now func()) {
	defer b.wg.Done()
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-kick:
			now()
			continue
		case <-t.C():
		}
		fn()
		t.Reset(period)
		if armed != nil {
			armed()
		}
	}
}

// ISRProposals counts the ISR shrinks and expands this broker proposed
// as leader since it started (kwal_isr_proposals_total).
func (b *Broker) ISRProposals() (shrinks, expands int64) {
	return b.events.isrShrinks.Load(), b.events.isrExpands.Load()
}

// shrinkISRs proposes smaller ISRs for partitions with lagging followers.
func (b *Broker) shrinkISRs() {
	if !b.leaseValid() {
		// A self-fenced leader leads nothing: its followers look lagging
		// only because it stopped (or was paused), and an ISR of itself
		// alone, if the controller took it before the fence, would leave
		// the partition without an electable replica.
		return
	}
	now := b.clock.Now()
	for _, p := range b.partitionsSnapshot() {
		if prop := p.shrinkProposal(now); prop != nil {
			b.logger.Info("shrinking ISR", "partition", p.tp, "isr", prop.ISR)
			b.events.isrShrinks.Add(1)
			b.alterISR(p, prop)
		}
	}
}

// brokerIneligible reports whether the controller's current registration
// of broker id is fenced or has its log dir offline (a broker that never
// registered is neither).
func (b *Broker) brokerIneligible(id int32) bool {
	for _, r := range b.ctrl.Registrations() {
		if r.ID == id {
			return !r.eligible()
		}
	}
	return false
}

// alterISR asks the controller for the ISR the leader machine proposed,
// at the epochs it proposed it in (a stale proposal is refused); the
// subscription applies the answer.
func (b *Broker) alterISR(p *partition, prop *isrProposal) {
	if _, err := b.ctrl.AlterISR(p.tp, prop.LeaderEpoch, prop.PartitionEpoch, prop.ISR); err != nil {
		b.logger.Warn("alter ISR refused", "partition", p.tp, "isr", prop.ISR, "err", err)
		p.isrDone()
	}
}

// acceptLoop accepts until the broker closes. When accept fails (EMFILE,
// ENFILE, ENOBUFS and the like) it logs once, backs off (5 ms doubling to
// 1 s, on the broker's clock) and tries again, serving the connections it
// has meanwhile; it logs again, with the count of failed accepts, once
// accepting works again.
func (b *Broker) acceptLoop() {
	defer b.wg.Done()
	var (
		failures int64
		backoff  time.Duration
	)
	for {
		c, err := b.ln.Accept()
		if err != nil {
			select {
			case <-b.stop:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			failures++
			b.conns.acceptErrors.Add(1)
			if failures == 1 {
				b.logger.Error("accept failing: backing off, still serving open connections", "err", err, "open_connections", b.limits.open())
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := b.clock.NewTimer(backoff)
			select {
			case <-b.stop:
				t.Stop()
				return
			case <-t.C():
			}
			continue
		}
		if failures > 0 {
			b.logger.Warn("accepting connections again", "failed_accepts", failures, "open_connections", b.limits.open())
			failures, backoff = 0, 0
		}
		b.mu.Lock()
		if b.mu.closed {
			b.mu.Unlock()
			c.Close()
			return
		}
		cs := newConnState(c)
		cs.listener = b.listenerOf(c)
		cs.state.Store(packPhase(phaseIdle, b.clock.Now()))
		b.mu.conns[c] = cs
		b.wg.Add(1)
		b.mu.Unlock()
		go b.serveConn(cs)
		if cs.listener != nil && cs.listener.protected {
			b.makeRoom()
		}
	}
}

// makeRoom closes, while an inter-broker connection let in at
// max.connections keeps the broker over it, the least recently used
// connection of another listener, as Kafka's processors do
// (Selector.lowestPriorityChannel): the one whose last request started or
// ended the longest ago.
func (b *Broker) makeRoom() {
	for b.limits.exceeded() {
		var lru *connState
		var lruAt time.Time
		b.mu.Lock()
		for _, cs := range b.mu.conns {
			if cs.closed.Load() || cs.listener == nil || cs.listener.protected {
				continue
			}
			if _, at := unpackPhase(cs.state.Load()); lru == nil || at.Before(lruAt) {
				lru, lruAt = cs, at
			}
		}
		b.mu.Unlock()
		if lru == nil {
			return // only inter-broker connections: over the cap they stay
		}
		b.limits.evicted.Add(1)
		b.logger.Warn("closing connection: max.connections reached, making room for an inter-broker connection", "remote", lru.remote, "listener", lru.listener.cfg.Name, "last_active", lruAt, "limit", b.cfg.MaxConnections)
		lru.close()
	}
}

// checkTopicName applies Kafka's rules: 1..249 of [a-zA-Z0-9._-], not "."
// or "..".
func checkTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > maxTopicNameLength {
		return fmt.Errorf("broker: illegal topic name %q", name)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("broker: illegal character %q in topic name %q", c, name)
		}
	}
	return nil
}

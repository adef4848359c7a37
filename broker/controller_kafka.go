package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kwal/kwal/metadata"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaController is a Controller that keeps the cluster state in a
// one-partition compacted topic of the metadata Kafka cluster
// (__kwal_cluster_state by default). The log order is the consensus: every
// controller consumes the topic from the beginning and applies its records
// in offset order to the same pure state machine (clusterState), so every
// broker of a multi-process cluster sees the same topics, leaders, ISRs and
// epochs, and a restarted broker rebuilds them from the topic.
//
// A change is a proposal: the controller produces a record, then waits
// until its own consumer has applied it and returns what applying it
// decided (read-your-writes). Conflicts are decided at apply time, alike
// everywhere:
//
//   - topic: the first record for a name creates the topic; later ones for
//     that name are ignored and their proposers get ErrTopicExists (the
//     winner's state is visible by then).
//   - alter-isr, elect-leader: carry the partition epoch (and, for
//     alter-isr, the leader epoch) they expect; a record whose epochs do
//     not match the state when it is applied is ignored and its proposer
//     gets ErrStaleEpoch (ElectLeader re-reads and retries a few times,
//     since its caller gave no epoch).
//   - delete-topic, create-partitions, alter-configs (topicadmin.go): carry
//     the topic id (incarnation) and, but for delete-topic, the topic epoch
//     they were asked against; one that does not match when applied is
//     ignored and its proposer gets ErrStaleEpoch and retries from the new
//     state.
//   - pid-block: claims the next block of pidBlockSize producer ids; the
//     first claim of a block wins, a loser claims the next one.
//   - broker: a registration; with a static cluster list the list decides
//     addresses and the set is fixed, as in MemController. Its offset is
//     the new broker epoch; with liveness on ("fence_previous"), a live
//     earlier registration is fenced first.
//   - fence: fences (broker, broker epoch) if that registration is live,
//     else is refused (ErrBrokerFenced); elections follow (liveness.go).
//   - log-dir-offline: the broker (id, broker epoch) reports its log dir
//     offline; applied if that registration is live (else ErrBrokerFenced):
//     it leaves every ISR and elections follow, as for a fence, but it
//     stays registered (liveness.go, logDirOffline).
//   - elect-preferred: epoch-checked like elect-leader; refused unless the
//     first replica is in the ISR and live.
//   - heartbeat: changes no state; the controller's session tracker notes
//     it (see doc.go, "Liveness and election").
//
// # Records
//
//	key                                     value (JSON, "v":1)
//	broker/<id>/<proposal>                  {"v","kind":"broker","proposal","broker":{id,host,port,rack},"unclean","fence_previous"}
//	topic/<name>/<proposal>                 {"v","kind":"topic","proposal","topic":{name,configs,partitions}}
//	partition/<topic>/<p>/<proposal>        {"v","kind":"alter-isr"|"elect-leader"|"elect-preferred","proposal",
//	                                         "topic","partition","leader_epoch","partition_epoch",
//	                                         "isr"|"leader"}
//	pid-block/<n>                           {"v","kind":"pid-block","proposal","block":n}
//	topic/<name>/<proposal>                 {"v","kind":"delete-topic"|"create-partitions"|"alter-configs",
//	                                         "proposal","topic_name","topic_id","topic_epoch",
//	                                         "topic" (create-partitions: the grown list)|"configs"}
//	fence/<id>/<proposal>                   {"v","kind":"fence","proposal","broker_id","broker_epoch","unclean"}
//	log-dir/<id>/<proposal>                 {"v","kind":"log-dir-offline","proposal","broker_id","broker_epoch","unclean"}
//	heartbeat/<id>                          {"v","kind":"heartbeat","broker_id","broker_epoch"}
//
// Competing proposals never share a key: compaction keeps the latest record
// of a key, so a shared key could keep a losing proposal and drop the
// winner, and a restarted controller would rebuild a different state.
// Hence topic, partition, broker, fence and log-dir keys end in the proposal id and
// are never compacted away (registrations decide broker epochs and
// leaders, so they must replay exactly; logs written before broker keys
// had a proposal suffix still read); compaction only drops superseded
// heartbeats, which decide nothing on replay,
// and duplicate pid-block claims (any surviving claim of block n says that
// block n is taken, which is all a restarted controller needs, as it never
// resumes handing out ids from an old block). Tombstones and records that
// do not decode are logged and skipped, alike by every controller.
//
// # Concurrency
//
// One applier goroutine owns the consumer and applies records; mu guards
// the state, the applied offset, waiting proposals and subscribers.
// Subscribers are called by the applier, in log order, with mu released
// (they may read the controller but must not wait on a proposal: the
// applier would be waiting for itself). Close stops the applier and fails
// waiting proposals with ErrControllerClosed.
type KafkaController struct {
	cfg    KafkaControllerConfig
	logger *slog.Logger
	cl     *kgo.Client
	seq    atomic.Uint64
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup // liveness loop
	// loadedEnd is the end offset at start: records before it are a
	// replay, applied without logging their decisions again.
	loadedEnd int64

	pidMu struct { // serialises block claims, taken before mu
		sync.Mutex
		next, end int64
	}
	notifyMu sync.Mutex // held by the applier while notifying, taken before mu
	mu       struct {
		sync.Mutex
		st      *clusterState
		applied int64         // offset of the next record to apply
		advance chan struct{} // closed and replaced when applied moves
		// changed: closed and replaced when an applied record changed the
		// cluster state (not a heartbeat, a producer-id block or a
		// refused record): ClusterChanged.
		changed chan struct{}
		pending map[string]chan applyResult
		subs    map[int]func(TopicState)
		nextSub int
		closed  bool
		// sessions tracks heartbeats (SessionTimeout > 0 only).
		sessions *sessionTracker
	}
}

var _ Controller = (*KafkaController)(nil)

// ErrControllerClosed is returned by a KafkaController's methods after
// Close, and to proposals still waiting when it closes.
var ErrControllerClosed = errors.New("broker: controller closed")

// DefaultClusterStateTopic is the topic a KafkaController keeps its state in.
const DefaultClusterStateTopic = "__kwal_cluster_state"

// pidBlockSize is how many producer ids one pid-block claim hands out.
const pidBlockSize = 1 << 10

const clusterStateVersion = 1

// KafkaControllerConfig configures NewKafkaController.
type KafkaControllerConfig struct {
	// Bootstrap is the metadata Kafka cluster. Required.
	Bootstrap []string
	// Topic holds the state; default DefaultClusterStateTopic. It is
	// created with one partition and cleanup.policy=compact if missing;
	// an existing topic must have exactly one partition.
	Topic string
	// ReplicationFactor of the topic when created; default -1 (the
	// cluster's default).
	ReplicationFactor int16
	// Brokers is the static cluster list (cluster.brokers). When given,
	// the broker set is fixed and the list decides addresses, so every
	// process assigns alike even before the others have registered.
	Brokers []BrokerInfo
	// RequestTimeout bounds one proposal (produce, then apply); default 30 s.
	RequestTimeout time.Duration
	// InstanceID names this controller's proposals; default random. Two
	// live controllers must not share one.
	InstanceID string
	// ClientID is the Kafka client id; default "kwal-controller".
	ClientID string
	// Security is TLS and SASL to the metadata Kafka; zero: plaintext.
	Security metadata.ClientSecurity
	// Logger; default slog.Default().
	Logger *slog.Logger

	// SessionTimeout is broker.session.timeout.ms; > 0 turns on liveness:
	// heartbeats are tracked and silent brokers fenced. 0: off.
	SessionTimeout time.Duration
	// UncleanLeaderElection is unclean.leader.election.enable for topics
	// that do not set it.
	UncleanLeaderElection bool
	// Clock times sessions; default clock.Real.
	Clock clock.Clock

	// applyHook, in tests, gets every record consumed, in order, instead
	// of the applier; it must pass each to apply, in order (it may hold
	// some back first, as a controller that lags behind the log).
	applyHook func(r *kgo.Record, apply func(*kgo.Record))
}

// Validate fills defaults and rejects nonsense.
func (c *KafkaControllerConfig) Validate() error {
	if len(c.Bootstrap) == 0 {
		return fmt.Errorf("%w: controller: no bootstrap servers", ErrConfig)
	}
	if c.Topic == "" {
		c.Topic = DefaultClusterStateTopic
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.InstanceID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		c.InstanceID = hex.EncodeToString(b[:])
	}
	if c.ClientID == "" {
		c.ClientID = "kwal-controller"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.SessionTimeout < 0 {
		return fmt.Errorf("%w: controller: negative session timeout", ErrConfig)
	}
	seen := map[int32]bool{}
	for _, b := range c.Brokers {
		if seen[b.ID] {
			return fmt.Errorf("%w: controller: broker %d listed twice", ErrConfig, b.ID)
		}
		seen[b.ID] = true
	}
	return nil
}

// NewKafkaController creates the state topic if needed, consumes it from
// the beginning and returns once it has applied every record that was in
// the topic when it started (so Topics is the durable state), or ctx ends.
func NewKafkaController(ctx context.Context, cfg KafkaControllerConfig) (*KafkaController, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(cfg.Security.Opts(),
		kgo.SeedBrokers(cfg.Bootstrap...),
		kgo.ClientID(cfg.ClientID),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
	if err != nil {
		return nil, fmt.Errorf("controller: kafka client: %w", err)
	}
	end, err := prepareStateTopic(ctx, cl, &cfg)
	if err != nil {
		cl.Close()
		return nil, err
	}
	c := &KafkaController{cfg: cfg, logger: cfg.Logger.With("controller", cfg.InstanceID), cl: cl, done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.st = newClusterState(cfg.Brokers)
	c.mu.advance = make(chan struct{})
	c.mu.changed = make(chan struct{})
	c.mu.pending = map[string]chan applyResult{}
	c.mu.subs = map[int]func(TopicState){}
	c.loadedEnd = end
	if cfg.SessionTimeout > 0 {
		// Every registration replayed gets a fresh session from now: a
		// restarted controller heard nobody before it started.
		c.mu.sessions = newSessionTracker(cfg.SessionTimeout)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: {0: kgo.NewOffset().AtStart()}})
	go c.applyLoop()
	start := time.Now()
	if err := c.waitApplied(ctx, end); err != nil {
		c.Close()
		return nil, fmt.Errorf("controller: catching up to offset %d of %s: %w", end, cfg.Topic, err)
	}
	c.logger.Info("controller state loaded", "topic", cfg.Topic, "records", end, "took", time.Since(start).Round(time.Millisecond))
	if cfg.SessionTimeout > 0 {
		c.wg.Add(1)
		go c.livenessLoop()
	}
	return c, nil
}

// prepareStateTopic creates the topic if missing, checks it has one
// partition and returns its end offset.
func prepareStateTopic(ctx context.Context, cl *kgo.Client, cfg *KafkaControllerConfig) (int64, error) {
	adm := kadm.NewClient(cl)
	compact := "compact"
	_, err := adm.CreateTopic(ctx, 1, cfg.ReplicationFactor, map[string]*string{"cleanup.policy": &compact}, cfg.Topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("controller: create topic %s: %w", cfg.Topic, err)
	}
	// A topic just created may take a moment to show in metadata.
	for {
		ends, err := adm.ListEndOffsets(ctx, cfg.Topic)
		if err == nil {
			if err = ends.Error(); err == nil {
				n := 0
				var end int64
				ends.Each(func(o kadm.ListedOffset) { n++; end = o.Offset })
				if n != 1 {
					return 0, fmt.Errorf("controller: topic %s has %d partitions, want 1 (one total order)", cfg.Topic, n)
				}
				return end, nil
			}
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) {
			return 0, fmt.Errorf("controller: end offset of %s: %w", cfg.Topic, err)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("controller: end offset of %s: %w", cfg.Topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops the applier and the client. Waiting proposals fail with
// ErrControllerClosed.
func (c *KafkaController) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	for id, ch := range c.mu.pending {
		ch <- applyResult{err: ErrControllerClosed}
		delete(c.mu.pending, id)
	}
	c.mu.Unlock()
	c.cancel()
	<-c.done
	c.wg.Wait()
	c.cl.Close()
	return nil
}

func (c *KafkaController) applyLoop() {
	defer close(c.done)
	for {
		fs := c.cl.PollFetches(c.ctx)
		if c.ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			c.logger.Warn("consuming cluster state", "topic", topic, "partition", p, "err", err)
		})
		if h := c.cfg.applyHook; h != nil {
			fs.EachRecord(func(r *kgo.Record) { h(r, c.applyRecord) })
			continue
		}
		fs.EachRecord(c.applyRecord)
	}
}

func (c *KafkaController) applyRecord(r *kgo.Record) {
	var rec stateRecord
	var err error
	switch {
	case r.Value == nil:
		err = errors.New("tombstone")
	default:
		err = json.Unmarshal(r.Value, &rec)
		if err == nil && rec.V != clusterStateVersion {
			err = fmt.Errorf("version %d, this controller reads %d", rec.V, clusterStateVersion)
		}
	}
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.mu.Lock()
	var (
		done applied
		res  applyResult
	)
	if err != nil {
		c.logger.Error("skipping cluster state record", "offset", r.Offset, "key", string(r.Key), "err", err)
	} else {
		done, res = c.mu.st.apply(rec, r.Offset)
		if res.err != nil {
			c.logger.Debug("cluster state record refused", "offset", r.Offset, "key", string(r.Key), "err", res.err)
		} else if c.mu.sessions != nil {
			now := c.cfg.Clock.Now()
			switch rec.Kind {
			case kindBroker:
				c.mu.sessions.registered(res.registration.ID, res.registration.Epoch, now)
			case kindHeartbeat:
				c.mu.sessions.heard(rec.BrokerID, rec.BrokerEpoch, now)
			}
		}
	}
	c.mu.applied = r.Offset + 1
	close(c.mu.advance)
	c.mu.advance = make(chan struct{})
	if err == nil && res.err == nil && changesCluster(rec.Kind, done) {
		close(c.mu.changed)
		c.mu.changed = make(chan struct{})
	}
	waiter := c.mu.pending[rec.Proposal]
	delete(c.mu.pending, rec.Proposal)
	subs := subscribers(c.mu.subs)
	snaps := make([]TopicState, len(done.topics))
	for i, ts := range done.topics {
		snaps[i] = cloneTopic(ts)
	}
	replaying := r.Offset < c.loadedEnd
	c.mu.Unlock()
	if err == nil && res.err == nil && !replaying {
		logChanges(c.logger, rec, done.changes)
	}
	for _, snap := range snaps {
		for _, fn := range subs {
			fn(cloneTopic(&snap))
		}
	}
	if waiter != nil && err == nil {
		waiter <- res
	}
}

// Changed returns a channel closed once the next record of the cluster
// state log is applied (before its subscribers are notified).
func (c *KafkaController) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.advance
}

// ClusterChanged returns a channel closed once a record that changes the
// cluster state is applied: a topic's or partition's state, or a broker's
// registration (its address and epoch, its fencing). Heartbeats, which
// most records are, and producer-id blocks change nothing a follower's
// fetcher waits on, and do not close it (fetcherManager.watchCluster
// wakes every fetcher on it).
func (c *KafkaController) ClusterChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.changed
}

// changesCluster reports whether an applied record of kind, which did
// done, changed the cluster state that ClusterChanged watchers see.
func changesCluster(kind string, done applied) bool {
	switch kind {
	case kindHeartbeat, kindPIDBlock:
		return len(done.topics) > 0 || len(done.changes) > 0 // neither does today
	case kindBroker, kindFence, kindLogDirOffline:
		return true // a registration moves even with no partition changed
	}
	return len(done.topics) > 0 || len(done.changes) > 0
}

// waitApplied returns once every record before offset has been applied.
func (c *KafkaController) waitApplied(ctx context.Context, offset int64) error {
	for {
		c.mu.Lock()
		applied, adv, closed := c.mu.applied, c.mu.advance, c.mu.closed
		c.mu.Unlock()
		switch {
		case closed:
			return ErrControllerClosed
		case applied >= offset:
			return nil
		}
		select {
		case <-adv:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return ErrControllerClosed
		}
	}
}

// propose produces rec under key and returns what applying it decided,
// within the request timeout.
func (c *KafkaController) propose(key func(proposal string) string, rec stateRecord) (applyResult, error) {
	return c.proposeWithin(c.cfg.RequestTimeout, key, rec)
}

// proposeWithin is propose bounded by timeout (produce, then apply).
func (c *KafkaController) proposeWithin(timeout time.Duration, key func(proposal string) string, rec stateRecord) (applyResult, error) {
	rec.V = clusterStateVersion
	rec.Proposal = c.cfg.InstanceID + "-" + strconv.FormatUint(c.seq.Add(1), 10)
	val, err := json.Marshal(rec)
	if err != nil {
		return applyResult{}, err
	}
	ch := make(chan applyResult, 1)
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return applyResult{}, ErrControllerClosed
	}
	c.mu.pending[rec.Proposal] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.mu.pending, rec.Proposal)
		c.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	kr := &kgo.Record{Key: []byte(key(rec.Proposal)), Value: val, Partition: 0}
	// Not ProduceSync: an idempotent producer does not give up a record
	// it has tried to send while its Kafka is unreachable, whatever the
	// context says, and a controlled shutdown with the Kafka gone waited
	// on it for minutes. The proposal is bounded here instead; a record
	// that lands later is applied and answers nobody.
	produced := make(chan error, 1)
	c.cl.Produce(ctx, kr, func(_ *kgo.Record, err error) { produced <- err })
	select {
	case err := <-produced:
		if err != nil {
			return applyResult{}, fmt.Errorf("controller: %s: produce %s: %w", rec.Kind, key(rec.Proposal), err)
		}
	case <-ctx.Done():
		if c.ctx.Err() != nil {
			return applyResult{}, ErrControllerClosed
		}
		return applyResult{}, fmt.Errorf("controller: %s: produce %s: %w", rec.Kind, key(rec.Proposal), ctx.Err())
	}
	select {
	case res := <-ch:
		return res, nil
	case <-ctx.Done():
		if c.ctx.Err() != nil {
			return applyResult{}, ErrControllerClosed
		}
		return applyResult{}, fmt.Errorf("controller: %s: waiting to apply offset %d: %w", rec.Kind, kr.Offset, ctx.Err())
	}
}

func (c *KafkaController) RegisterBroker(b BrokerInfo) (BrokerRegistration, error) {
	c.mu.Lock()
	err := c.mu.st.checkBroker(b)
	c.mu.Unlock()
	if err != nil {
		return BrokerRegistration{}, err
	}
	// Registrations decide broker epochs and leaders, so, like partition
	// records, they are never compacted away: the key ends in the proposal.
	res, err := c.propose(func(p string) string { return "broker/" + strconv.Itoa(int(b.ID)) + "/" + p },
		stateRecord{Kind: kindBroker, Broker: brokerToWire(b), Unclean: c.cfg.UncleanLeaderElection, FencePrevious: c.cfg.SessionTimeout > 0})
	if err != nil {
		return BrokerRegistration{}, err
	}
	return res.registration, res.err
}

// Heartbeat writes a heartbeat record for the registration (key
// heartbeat/<id>: compaction keeps the last one; no state depends on it)
// and answers once this controller has applied it: the record is judged
// at its place in the log (checkHeartbeat), not against this
// controller's view when it was sent. A broker resumed after a pause
// longer than its session has a fence of its registration in the log
// that its own controller has not applied yet; its first heartbeat lands
// after that fence, so it is refused (ErrBrokerFenced) and the broker
// registers again instead of renewing its lease on a leadership it lost.
func (c *KafkaController) Heartbeat(id int32, brokerEpoch int64) (bool, error) {
	enforced := c.cfg.SessionTimeout > 0
	c.mu.Lock()
	err := checkHeartbeat(c.mu.st.regs, id, brokerEpoch)
	c.mu.Unlock()
	if err != nil {
		// Fenced in this view already: the log cannot undo a fence.
		return enforced, err
	}
	timeout := c.cfg.RequestTimeout
	if enforced {
		timeout = c.cfg.SessionTimeout
	}
	res, err := c.proposeWithin(timeout, func(string) string { return "heartbeat/" + strconv.Itoa(int(id)) },
		stateRecord{Kind: kindHeartbeat, BrokerID: id, BrokerEpoch: brokerEpoch})
	if err != nil {
		return enforced, fmt.Errorf("controller: heartbeat of broker %d: %w", id, err)
	}
	return enforced, res.err
}

func (c *KafkaController) Registrations() []BrokerRegistration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.registrations()
}

// livenessLoop fences silent brokers: every quarter session timeout it
// asks the session tracker who expired; if anyone did, it first catches up
// with the log's end (a controller that was paused or cut off has heard
// nobody, and the heartbeats it missed are there) and asks again, then
// proposes a fence for each. Every broker's controller runs it; the first
// fence applied wins and the others are refused by the broker epoch, so a
// restart of any one of them changes nothing.
func (c *KafkaController) livenessLoop() {
	defer c.wg.Done()
	period := max(c.cfg.SessionTimeout/4, 10*time.Millisecond)
	t := c.cfg.Clock.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C():
		}
		if c.expired() != nil {
			if err := c.syncToEnd(); err != nil {
				c.logger.Warn("liveness: cannot catch up with the cluster state; fencing nobody", "err", err)
			} else {
				for _, r := range c.expired() {
					c.proposeFence(r)
				}
			}
		}
		t.Reset(period)
	}
}

func (c *KafkaController) expired() []BrokerRegistration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.sessions.expired(c.cfg.Clock.Now(), c.mu.st.regs)
}

func (c *KafkaController) proposeFence(r BrokerRegistration) {
	c.logger.Warn("liveness: broker session expired, fencing it", "fenced_broker", r.ID, "broker_epoch", r.Epoch, "session_timeout", c.cfg.SessionTimeout)
	res, err := c.fence(r.ID, r.Epoch)
	switch {
	case err != nil:
		c.logger.Warn("liveness: fence proposal failed", "fenced_broker", r.ID, "err", err)
	case res.err != nil:
		c.logger.Debug("liveness: fence refused (another controller came first, or the broker re-registered)", "fenced_broker", r.ID, "err", res.err)
	}
}

func (c *KafkaController) fence(id int32, epoch int64) (applyResult, error) {
	return c.propose(func(p string) string { return "fence/" + strconv.Itoa(int(id)) + "/" + p },
		stateRecord{Kind: kindFence, BrokerID: id, BrokerEpoch: epoch, Unclean: c.cfg.UncleanLeaderElection})
}

// ReportLogDirOffline proposes a log-dir-offline record. Its key ends in
// the proposal, like a fence's: it changes ISRs and leaders, so it must
// replay exactly, and a heartbeat (compacted by key) cannot carry it.
// Judged first against this controller's view, so that a repeat or a
// report of a fenced registration writes nothing. It is bounded like a
// heartbeat (the broker's heartbeat loop sends it), by
// the session timeout when sessions are watched.
func (c *KafkaController) ReportLogDirOffline(id int32, brokerEpoch int64) error {
	c.mu.Lock()
	err := checkHeartbeat(c.mu.st.regs, id, brokerEpoch)
	done := err == nil && c.mu.st.regs[id].LogDirOffline
	c.mu.Unlock()
	switch {
	case err != nil:
		// Fenced or superseded in this view already: the log cannot undo
		// that, and a record would only be refused.
		return err
	case done:
		return nil // applied already: no second record
	}
	timeout := c.cfg.RequestTimeout
	if c.cfg.SessionTimeout > 0 {
		timeout = c.cfg.SessionTimeout
	}
	res, err := c.proposeWithin(timeout, func(p string) string { return "log-dir/" + strconv.Itoa(int(id)) + "/" + p },
		stateRecord{Kind: kindLogDirOffline, BrokerID: id, BrokerEpoch: brokerEpoch, Unclean: c.cfg.UncleanLeaderElection})
	if err != nil {
		return err
	}
	return res.err
}

func (c *KafkaController) ShutdownBroker(id int32, brokerEpoch int64) error {
	res, err := c.fence(id, brokerEpoch)
	if err != nil {
		return err
	}
	return res.err
}

// syncToEnd waits until every record now in the state topic is applied.
func (c *KafkaController) syncToEnd() error {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SessionTimeout)
	defer cancel()
	ends, err := kadm.NewClient(c.cl).ListEndOffsets(ctx, c.cfg.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return err
	}
	o, ok := ends.Lookup(c.cfg.Topic, 0)
	if !ok {
		return fmt.Errorf("no end offset for %s", c.cfg.Topic)
	}
	return c.waitApplied(ctx, o.Offset)
}

func (c *KafkaController) Brokers() []BrokerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.brokerList()
}

func (c *KafkaController) CreateTopic(spec TopicSpec) (TopicState, error) {
	c.mu.Lock()
	_, exists := c.mu.st.topics[spec.Name]
	brokers := c.mu.st.brokerList()
	c.mu.Unlock()
	if exists {
		return TopicState{}, fmt.Errorf("%w: %s", ErrTopicExists, spec.Name)
	}
	parts, err := AssignReplicas(spec.Name, spec.Partitions, spec.ReplicationFactor, brokers)
	if err != nil {
		return TopicState{}, err
	}
	ts := TopicState{Name: spec.Name, ID: newTopicID(), Configs: cloneMap(spec.Configs), Partitions: parts}
	res, err := c.propose(func(p string) string { return "topic/" + spec.Name + "/" + p },
		stateRecord{Kind: kindTopic, Topic: topicToWire(ts)})
	if err != nil {
		return TopicState{}, err
	}
	return res.topic, res.err
}

func (c *KafkaController) Topic(name string) (TopicState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts, ok := c.mu.st.topics[name]
	if !ok {
		return TopicState{}, false
	}
	return cloneTopic(ts), true
}

func (c *KafkaController) Topics() []TopicState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TopicState, 0, len(c.mu.st.topics))
	for _, ts := range c.mu.st.topics {
		out = append(out, cloneTopic(ts))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func partitionKey(tp TopicPartition) func(string) string {
	return func(p string) string {
		return "partition/" + tp.Topic + "/" + strconv.Itoa(int(tp.Partition)) + "/" + p
	}
}

func (c *KafkaController) AlterISR(tp TopicPartition, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error) {
	res, err := c.propose(partitionKey(tp), stateRecord{
		Kind: kindAlterISR, TopicName: tp.Topic, Partition: tp.Partition,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: slices.Clone(isr),
	})
	if err != nil {
		return PartitionState{}, err
	}
	return res.partition, res.err
}

func (c *KafkaController) ElectLeader(tp TopicPartition, leader int32) (PartitionState, error) {
	return electRetrying(c, tp, func(le, pe int32) (PartitionState, error) {
		res, err := c.propose(partitionKey(tp), stateRecord{
			Kind: kindElectLeader, TopicName: tp.Topic, Partition: tp.Partition,
			LeaderEpoch: le, PartitionEpoch: pe, Leader: leader,
		})
		if err != nil {
			return PartitionState{}, err
		}
		return res.partition, res.err
	})
}

func (c *KafkaController) ElectPreferred(tp TopicPartition, leaderEpoch, partitionEpoch int32) (PartitionState, error) {
	res, err := c.propose(partitionKey(tp), stateRecord{
		Kind: kindElectPreferred, TopicName: tp.Topic, Partition: tp.Partition,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch,
	})
	if err != nil {
		return PartitionState{}, err
	}
	return res.partition, res.err
}

func (c *KafkaController) NextProducerID() (int64, error) {
	c.pidMu.Lock()
	defer c.pidMu.Unlock()
	for range 10 {
		if c.pidMu.next < c.pidMu.end {
			id := c.pidMu.next
			c.pidMu.next++
			return id, nil
		}
		c.mu.Lock()
		block := c.mu.st.nextPIDBlock
		c.mu.Unlock()
		res, err := c.propose(func(string) string { return "pid-block/" + strconv.FormatInt(block, 10) },
			stateRecord{Kind: kindPIDBlock, Block: block})
		if err != nil {
			return 0, err
		}
		if res.err == nil {
			c.pidMu.next, c.pidMu.end = block*pidBlockSize, (block+1)*pidBlockSize
		}
	}
	return 0, errors.New("controller: could not claim a producer id block (too much contention)")
}

func (c *KafkaController) Subscribe(fn func(TopicState)) func() {
	return subscribe(&c.notifyMu, &c.mu.Mutex, &c.mu.nextSub, c.mu.subs, fn)
}

func subscribers(m map[int]func(TopicState)) []func(TopicState) {
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	out := make([]func(TopicState), len(ids))
	for i, id := range ids {
		out[i] = m[id]
	}
	return out
}

// Record kinds.
const (
	kindBroker      = "broker"
	kindTopic       = "topic"
	kindAlterISR    = "alter-isr"
	kindElectLeader = "elect-leader"
	kindPIDBlock    = "pid-block"
	// Topic administration (topicadmin.go), keyed topic/<name>/<proposal>.
	kindDeleteTopic      = "delete-topic"
	kindCreatePartitions = "create-partitions"
	kindAlterConfigs     = "alter-configs"
	// Liveness (see doc.go).
	kindFence          = "fence"
	kindLogDirOffline  = "log-dir-offline"
	kindHeartbeat      = "heartbeat"
	kindElectPreferred = "elect-preferred"
)

// stateRecord is the value of a cluster-state record (see KafkaController).
type stateRecord struct {
	V              int         `json:"v"`
	Kind           string      `json:"kind"`
	Proposal       string      `json:"proposal"`
	Broker         *wireBroker `json:"broker,omitempty"`
	Topic          *wireTopic  `json:"topic,omitempty"`
	TopicName      string      `json:"topic_name,omitempty"`
	Partition      int32       `json:"partition,omitempty"`
	LeaderEpoch    int32       `json:"leader_epoch,omitempty"`
	PartitionEpoch int32       `json:"partition_epoch,omitempty"`
	ISR            []int32     `json:"isr,omitempty"`
	Leader         int32       `json:"leader,omitempty"`
	Block          int64       `json:"block,omitempty"`
	// Topic administration: the incarnation and topic epoch the change
	// was asked against, and the new configs (alter-configs).
	TopicID     string            `json:"topic_id,omitempty"`
	TopicEpoch  int32             `json:"topic_epoch,omitempty"`
	Configs     map[string]string `json:"configs,omitempty"`
	BrokerID    int32             `json:"broker_id,omitempty"`
	BrokerEpoch int64             `json:"broker_epoch,omitempty"`
	// Unclean is the proposer's unclean.leader.election.enable, for
	// topics that do not set it (broker, fence).
	Unclean bool `json:"unclean,omitempty"`
	// FencePrevious (broker): the proposer watches liveness, so a live
	// earlier registration of the broker is fenced first.
	FencePrevious bool `json:"fence_previous,omitempty"`
}

type wireBroker struct {
	ID        int32          `json:"id"`
	Host      string         `json:"host"`
	Port      int32          `json:"port"`
	Rack      string         `json:"rack,omitempty"`
	Endpoints []wireEndpoint `json:"endpoints,omitempty"`
}

type wireEndpoint struct {
	Listener string `json:"listener"`
	Host     string `json:"host"`
	Port     int32  `json:"port"`
}

type wireTopic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id,omitempty"`
	Epoch      int32             `json:"epoch,omitempty"`
	Configs    map[string]string `json:"configs,omitempty"`
	Partitions []wirePartition   `json:"partitions"`
}

type wirePartition struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
}

func brokerToWire(b BrokerInfo) *wireBroker {
	w := &wireBroker{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack}
	for _, e := range b.Endpoints {
		w.Endpoints = append(w.Endpoints, wireEndpoint(e))
	}
	return w
}

func brokerFromWire(w *wireBroker) BrokerInfo {
	b := BrokerInfo{ID: w.ID, Host: w.Host, Port: w.Port, Rack: w.Rack}
	for _, e := range w.Endpoints {
		b.Endpoints = append(b.Endpoints, Endpoint(e))
	}
	return b
}

func topicToWire(ts TopicState) *wireTopic {
	w := &wireTopic{Name: ts.Name, Configs: ts.Configs, Epoch: ts.Epoch}
	if !ts.ID.IsZero() {
		w.ID = ts.ID.String()
	}
	for _, ps := range ts.Partitions {
		w.Partitions = append(w.Partitions, wirePartition{
			Partition: ps.Partition, Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch,
			PartitionEpoch: ps.PartitionEpoch, Replicas: ps.Replicas, ISR: ps.ISR,
		})
	}
	return w
}

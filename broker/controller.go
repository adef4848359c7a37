package broker

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/changefeed"
	"github.com/kwal/kwal/topicpart"
)

// TopicPartition names one partition.
// TopicPartition is the module's one topic-partition type (package topicpart).
type TopicPartition = topicpart.TopicPartition

// PartitionState is what the controller decides for one partition.
type PartitionState struct {
	Partition int32
	// Leader is NoLeader (-1) while no live in-sync replica can lead.
	Leader int32
	// LeaderEpoch is bumped on every leadership change.
	LeaderEpoch int32
	// PartitionEpoch is bumped on every change (leader or ISR), so a
	// broker can drop stale notifications.
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
}

// TopicState is one topic and its partitions.
type TopicState struct {
	Name string
	// ID is the topic id, given at creation (zero for topics older than
	// ids); a topic created again under a deleted one's name has a new id.
	ID TopicID
	// Epoch is bumped by every partition-count or config change.
	Epoch      int32
	Configs    map[string]string
	Partitions []PartitionState
	// Deleted is set on the last notification of a topic, when it is
	// deleted; Topic and Topics never return a deleted topic.
	Deleted bool
}

// TopicSpec asks for a topic.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
}

// Controller errors.
var (
	ErrTopicExists              = errors.New("broker: topic already exists")
	ErrUnknownTopic             = errors.New("broker: unknown topic or partition")
	ErrInvalidReplicationFactor = errors.New("broker: invalid replication factor")
	ErrInvalidPartitions        = errors.New("broker: invalid number of partitions")
	ErrStaleEpoch               = errors.New("broker: stale leader or partition epoch")
	ErrLeaderNotInISR           = errors.New("broker: proposed ISR lacks the partition's leader")
	ErrNotReplica               = errors.New("broker: broker is not a replica")
)

// Controller assigns partitions to brokers and keeps leaders, leader
// epochs, ISRs and broker registrations (the part of Kafka's KRaft
// controller the harness needs). MemController serves tests, the demo and,
// with a static broker list, multi-process runs; KafkaController keeps its
// state in the metadata Kafka cluster.
type Controller interface {
	// RegisterBroker records a new incarnation of a broker (address, rack)
	// and returns its registration, whose epoch is new. When the
	// controller watches liveness, a live earlier incarnation is fenced
	// first.
	RegisterBroker(b BrokerInfo) (BrokerRegistration, error)
	// Heartbeat renews the session of registration (id, brokerEpoch).
	// ErrBrokerFenced: it is fenced or superseded (register again).
	// enforced says whether the controller watches sessions at all; when
	// it does not, the broker keeps no lease.
	Heartbeat(id int32, brokerEpoch int64) (enforced bool, err error)
	// ShutdownBroker fences registration (id, brokerEpoch) at once: a
	// controlled shutdown, so that its partitions get new leaders without
	// waiting for its session to expire. ErrBrokerFenced: not the live one.
	ShutdownBroker(id int32, brokerEpoch int64) error
	// ReportLogDirOffline is the report of registration (id, brokerEpoch)
	// that its log dir went offline (Kafka's offline log dirs of a broker
	// heartbeat, KIP-858): it leaves every ISR but as a last member, new
	// leaders are elected at once where it led, and it is elected nowhere
	// until it registers again. A repeated report is a no-op.
	// ErrBrokerFenced: not the live registration.
	ReportLogDirOffline(id int32, brokerEpoch int64) error
	// Brokers returns the known brokers, by id.
	Brokers() []BrokerInfo
	// Registrations returns the current registration of every broker
	// that registered, by id.
	Registrations() []BrokerRegistration
	// CreateTopic assigns a new topic. Errors: ErrTopicExists,
	// ErrInvalidPartitions, ErrInvalidReplicationFactor.
	CreateTopic(spec TopicSpec) (TopicState, error)
	// Topic returns a topic's state.
	Topic(name string) (TopicState, bool)
	// Topics returns every topic, by name.
	Topics() []TopicState
	// AlterISR is the leader's AlterPartition: it sets the ISR if
	// leaderEpoch and partitionEpoch are current. Errors: ErrUnknownTopic,
	// ErrStaleEpoch, ErrIneligibleReplica (a fenced broker joining).
	AlterISR(tp TopicPartition, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error)
	// ElectLeader makes leader (a replica) the leader and bumps the leader
	// epoch. Errors: ErrUnknownTopic, ErrNotReplica.
	ElectLeader(tp TopicPartition, leader int32) (PartitionState, error)
	// DeleteTopic removes a topic (by name; with id not zero, the topic
	// must have that id; with name "" the topic of that id). Subscribers
	// get its last state with Deleted set. Errors: ErrUnknownTopic,
	// ErrUnknownTopicID.
	DeleteTopic(name string, id TopicID) (TopicState, error)
	// CreatePartitions grows a topic to total partitions, assigned as
	// AssignReplicas does. Errors: ErrUnknownTopic, ErrInvalidPartitions
	// (total not above the current count), ErrInvalidReplicationFactor.
	CreatePartitions(name string, total int32) (TopicState, error)
	// AlterTopicConfigs replaces a topic's configs by edit's result,
	// computed from the current configs (and computed again if another
	// change came first). Errors: ErrUnknownTopic, edit's.
	AlterTopicConfigs(name string, edit TopicConfigEdit) (TopicState, error)
	// ElectPreferred makes the first replica leader if it is in the ISR
	// and live and the epochs are current (Kafka's preferred-leader
	// election). Errors: ErrUnknownTopic, ErrStaleEpoch, ErrNotElectable.
	ElectPreferred(tp TopicPartition, leaderEpoch, partitionEpoch int32) (PartitionState, error)
	// NextProducerID hands out a producer id unique in the cluster.
	NextProducerID() (int64, error)
	// Subscribe calls fn with every topic whose state changes, in order,
	// from one goroutine at a time; fn must not call back into the
	// controller synchronously. cancel stops the calls.
	Subscribe(fn func(TopicState)) (cancel func())
}

// LivenessConfig turns on session tracking in a controller.
type LivenessConfig struct {
	// SessionTimeout is broker.session.timeout.ms: a broker not heard of
	// for longer is fenced. Default DefaultBrokerSessionTimeout.
	SessionTimeout time.Duration
	// UncleanLeaderElection is unclean.leader.election.enable for topics
	// that do not set it. Default false.
	UncleanLeaderElection bool
	// Clock; default clock.Real.
	Clock clock.Clock
	// Logger; default slog.Default().
	Logger *slog.Logger
}

func (c *LivenessConfig) fill() {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = DefaultBrokerSessionTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// MemController is an in-memory Controller: it applies the records a
// KafkaController would write to the same state machine (clusterState),
// in one process. Notifications run synchronously in the goroutine that
// made the change, after the change is visible, serialised so subscribers
// see changes in order. With EnableLiveness it tracks broker sessions on
// its clock; CheckLiveness fences the silent ones.
type MemController struct {
	notifyMu sync.Mutex      // serialises notifications, taken before mu
	changes  changefeed.Feed // signalled after each record is applied and notified
	mu       struct {
		sync.Mutex
		st       *clusterState
		offset   int64 // of the next record (the next broker epoch)
		live     *LivenessConfig
		sessions *sessionTracker
		subs     map[int]func(TopicState)
		nextSub  int
		nextPID  int64
	}
}

var _ Controller = (*MemController)(nil)

// NewMemController returns an empty controller. With brokers given, the
// broker set is fixed (RegisterBroker may update addresses of listed ids
// only): every process given the same list computes the same assignment.
// producerIDBase is where producer ids start; give each process of a
// multi-process cluster a disjoint range (e.g. broker id << 48 plus the
// start time in ms).
func NewMemController(brokers []BrokerInfo, producerIDBase int64) *MemController {
	c := &MemController{}
	c.mu.st = newClusterState(brokers)
	c.mu.offset = 1 // broker epochs start at 1
	c.mu.subs = map[int]func(TopicState){}
	c.mu.nextPID = producerIDBase
	return c
}

// EnableLiveness starts tracking broker sessions: every live registration
// gets a fresh session now, and from then on a broker not heard of for
// the session timeout is fenced by CheckLiveness.
func (c *MemController) EnableLiveness(cfg LivenessConfig) {
	cfg.fill()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.live = &cfg
	c.mu.sessions = newSessionTracker(cfg.SessionTimeout)
	now := cfg.Clock.Now()
	for _, r := range c.mu.st.regs {
		c.mu.sessions.registered(r.ID, r.Epoch, now)
	}
}

// RunLiveness calls CheckLiveness every quarter session timeout until stop
// is closed (EnableLiveness first).
func (c *MemController) RunLiveness(stop <-chan struct{}) {
	c.mu.Lock()
	cfg := c.mu.live
	c.mu.Unlock()
	if cfg == nil {
		return
	}
	period := max(cfg.SessionTimeout/4, time.Millisecond)
	t := cfg.Clock.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C():
		}
		c.CheckLiveness()
		t.Reset(period)
	}
}

// CheckLiveness fences every live registration whose session has expired
// at the clock's now and returns them.
func (c *MemController) CheckLiveness() []BrokerRegistration {
	c.mu.Lock()
	if c.mu.live == nil {
		c.mu.Unlock()
		return nil
	}
	expired := c.mu.sessions.expired(c.mu.live.Clock.Now(), c.mu.st.regs)
	unclean, logger := c.mu.live.UncleanLeaderElection, c.mu.live.Logger
	c.mu.Unlock()
	var out []BrokerRegistration
	for _, r := range expired {
		_, err := c.commit(stateRecord{Kind: kindFence, BrokerID: r.ID, BrokerEpoch: r.Epoch, Unclean: unclean}, logger)
		if err == nil {
			out = append(out, r)
		}
	}
	return out
}

// commit applies rec as the next record and notifies subscribers.
func (c *MemController) commit(rec stateRecord, logger *slog.Logger) (applyResult, error) {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.mu.Lock()
	offset := c.mu.offset
	c.mu.offset++
	done, res := c.mu.st.apply(rec, offset)
	if res.err == nil {
		switch rec.Kind {
		case kindBroker:
			if c.mu.sessions != nil {
				c.mu.sessions.registered(res.registration.ID, res.registration.Epoch, c.mu.live.Clock.Now())
			}
		}
	}
	snaps := make([]TopicState, len(done.topics))
	for i, ts := range done.topics {
		snaps[i] = cloneTopic(ts)
	}
	subs := c.subsLocked()
	c.mu.Unlock()
	logChanges(logger, rec, done.changes)
	for _, snap := range snaps {
		for _, fn := range subs {
			fn(cloneTopic(&snap))
		}
	}
	c.changes.Signal()
	return res, res.err
}

// Changed returns a channel closed once the next record (a topic, ISR or
// leader change, a registration, a fence) is applied and its subscribers
// notified.
func (c *MemController) Changed() <-chan struct{} { return c.changes.Changed() }

func (c *MemController) logger() *slog.Logger {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.live != nil {
		return c.mu.live.Logger
	}
	return nil // without liveness nothing is decided here worth a log line
}

func (c *MemController) unclean() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.live != nil && c.mu.live.UncleanLeaderElection
}

func (c *MemController) RegisterBroker(b BrokerInfo) (BrokerRegistration, error) {
	c.mu.Lock()
	live := c.mu.live != nil
	c.mu.Unlock()
	res, err := c.commit(stateRecord{Kind: kindBroker, Broker: brokerToWire(b), Unclean: c.unclean(), FencePrevious: live}, c.logger())
	return res.registration, err
}

func (c *MemController) Heartbeat(id int32, brokerEpoch int64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkHeartbeat(c.mu.st.regs, id, brokerEpoch); err != nil {
		return c.mu.live != nil, err
	}
	if c.mu.live == nil {
		return false, nil
	}
	c.mu.sessions.heard(id, brokerEpoch, c.mu.live.Clock.Now())
	return true, nil
}

func (c *MemController) ShutdownBroker(id int32, brokerEpoch int64) error {
	_, err := c.commit(stateRecord{Kind: kindFence, BrokerID: id, BrokerEpoch: brokerEpoch, Unclean: c.unclean()}, c.logger())
	return err
}

func (c *MemController) ReportLogDirOffline(id int32, brokerEpoch int64) error {
	_, err := c.commit(stateRecord{Kind: kindLogDirOffline, BrokerID: id, BrokerEpoch: brokerEpoch, Unclean: c.unclean()}, c.logger())
	return err
}

func (c *MemController) Brokers() []BrokerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.brokerList()
}

func (c *MemController) Registrations() []BrokerRegistration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.registrations()
}

func (c *MemController) CreateTopic(spec TopicSpec) (TopicState, error) {
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
	res, err := c.commit(stateRecord{Kind: kindTopic, Topic: topicToWire(ts)}, c.logger())
	return res.topic, err
}

func (c *MemController) Topic(name string) (TopicState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts, ok := c.mu.st.topics[name]
	if !ok {
		return TopicState{}, false
	}
	return cloneTopic(ts), true
}

func (c *MemController) Topics() []TopicState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.st.topicList()
}

func (c *MemController) AlterISR(tp TopicPartition, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error) {
	res, err := c.commit(stateRecord{
		Kind: kindAlterISR, TopicName: tp.Topic, Partition: tp.Partition,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: slices.Clone(isr),
	}, c.logger())
	return res.partition, err
}

func (c *MemController) ElectLeader(tp TopicPartition, leader int32) (PartitionState, error) {
	return electRetrying(c, tp, func(le, pe int32) (PartitionState, error) {
		res, err := c.commit(stateRecord{
			Kind: kindElectLeader, TopicName: tp.Topic, Partition: tp.Partition,
			LeaderEpoch: le, PartitionEpoch: pe, Leader: leader,
		}, c.logger())
		return res.partition, err
	})
}

// electRetrying runs elect against the partition's current epochs,
// re-reading them when another change came first (ElectLeader's caller
// gives no epochs). Both controllers share it.
func electRetrying(c Controller, tp TopicPartition, elect func(leaderEpoch, partitionEpoch int32) (PartitionState, error)) (PartitionState, error) {
	const attempts = 5
	var last error
	for range attempts {
		ts, ok := c.Topic(tp.Topic)
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(ts.Partitions) {
			return PartitionState{}, fmt.Errorf("%w: %s", ErrUnknownTopic, tp)
		}
		ps := ts.Partitions[tp.Partition]
		out, err := elect(ps.LeaderEpoch, ps.PartitionEpoch)
		if !errors.Is(err, ErrStaleEpoch) {
			return out, err
		}
		last = err
	}
	return PartitionState{}, last
}

func (c *MemController) ElectPreferred(tp TopicPartition, leaderEpoch, partitionEpoch int32) (PartitionState, error) {
	res, err := c.commit(stateRecord{
		Kind: kindElectPreferred, TopicName: tp.Topic, Partition: tp.Partition,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch,
	}, c.logger())
	return res.partition, err
}

func (c *MemController) NextProducerID() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.mu.nextPID
	c.mu.nextPID++
	return id, nil
}

func (c *MemController) Subscribe(fn func(TopicState)) func() {
	return subscribe(&c.notifyMu, &c.mu.Mutex, &c.mu.nextSub, c.mu.subs, fn)
}

// logChanges logs what fencing, registration or election did, an unclean
// election loudly (it may lose acknowledged records).
func logChanges(logger *slog.Logger, rec stateRecord, changes []partitionChange) {
	if logger == nil {
		return
	}
	switch rec.Kind {
	case kindFence:
		logger.Warn("broker fenced", "fenced_broker", rec.BrokerID, "broker_epoch", rec.BrokerEpoch, "partitions_changed", len(changes))
	case kindLogDirOffline:
		logger.Warn("broker's log dir offline: it leaves every ISR and leads nothing until it registers again",
			"offline_broker", rec.BrokerID, "broker_epoch", rec.BrokerEpoch, "partitions_changed", len(changes))
	case kindBroker:
		if rec.Broker != nil {
			logger.Info("broker registered", "registered_broker", rec.Broker.ID, "partitions_changed", len(changes))
		}
	}
	for _, ch := range changes {
		tp := TopicPartition{Topic: ch.topic, Partition: ch.ps.Partition}
		switch {
		case ch.unclean:
			logger.Error("UNCLEAN leader election: acknowledged records may be lost (unclean.leader.election.enable=true)",
				"partition", tp, "leader", ch.ps.Leader, "leader_epoch", ch.ps.LeaderEpoch)
		case ch.ps.Leader == NoLeader:
			logger.Warn("partition has no leader: no live in-sync replica", "partition", tp, "leader_epoch", ch.ps.LeaderEpoch, "isr", ch.ps.ISR)
		default:
			logger.Info("partition changed", "partition", tp, "leader", ch.ps.Leader, "leader_epoch", ch.ps.LeaderEpoch, "isr", ch.ps.ISR)
		}
	}
}

// subscribe adds fn to subs (guarded by mu) and returns its cancel, which
// waits for a notification in progress (notifyMu, taken before mu) so fn
// is never called after cancel returns. Both controllers share it.
func subscribe(notifyMu, mu *sync.Mutex, next *int, subs map[int]func(TopicState), fn func(TopicState)) func() {
	mu.Lock()
	id := *next
	*next++
	subs[id] = fn
	mu.Unlock()
	return func() {
		notifyMu.Lock()
		defer notifyMu.Unlock()
		mu.Lock()
		delete(subs, id)
		mu.Unlock()
	}
}

func (c *MemController) subsLocked() []func(TopicState) { return subscribers(c.mu.subs) }

// AssignReplicas is the deterministic, rack-aware round-robin assignment
// every broker of a static cluster computes alike. Brokers are sorted by
// id and interleaved by rack (Kafka's rack-alternated list); partition p
// takes rf consecutive brokers of that list starting at (h+p) mod n, where
// h is a hash of the topic name, so leaders spread over brokers and each
// partition's replicas over racks. The first replica leads; the ISR is all
// replicas; epochs start at 0.
func AssignReplicas(topic string, partitions int32, rf int16, brokers []BrokerInfo) ([]PartitionState, error) {
	if partitions < 1 || partitions > 1<<16 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidPartitions, partitions)
	}
	if rf < 1 || int(rf) > len(brokers) {
		return nil, fmt.Errorf("%w: %d with %d brokers", ErrInvalidReplicationFactor, rf, len(brokers))
	}
	list := rackAlternated(brokers)
	h := fnv.New32a()
	h.Write([]byte(topic))
	start := int(h.Sum32() % uint32(len(list)))
	out := make([]PartitionState, partitions)
	for p := range out {
		reps := make([]int32, rf)
		for r := range reps {
			reps[r] = list[(start+p+r)%len(list)].ID
		}
		isr := slices.Clone(reps)
		slices.Sort(isr)
		out[p] = PartitionState{Partition: int32(p), Leader: reps[0], Replicas: reps, ISR: isr}
	}
	return out, nil
}

// rackAlternated orders brokers rack by rack in turn: racks sorted by
// name, brokers of a rack by id.
func rackAlternated(brokers []BrokerInfo) []BrokerInfo {
	byRack := map[string][]BrokerInfo{}
	var racks []string
	for _, b := range brokers {
		if _, ok := byRack[b.Rack]; !ok {
			racks = append(racks, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	sort.Strings(racks)
	for _, r := range racks {
		sort.Slice(byRack[r], func(i, j int) bool { return byRack[r][i].ID < byRack[r][j].ID })
	}
	var out []BrokerInfo
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func clonePartition(ps PartitionState) PartitionState {
	ps.Replicas = slices.Clone(ps.Replicas)
	ps.ISR = slices.Clone(ps.ISR)
	return ps
}

func cloneTopic(ts *TopicState) TopicState {
	out := TopicState{Name: ts.Name, ID: ts.ID, Epoch: ts.Epoch, Deleted: ts.Deleted, Configs: cloneMap(ts.Configs), Partitions: make([]PartitionState, len(ts.Partitions))}
	for i, ps := range ts.Partitions {
		out.Partitions[i] = clonePartition(ps)
	}
	return out
}

// fixedBrokerUpdate is what a registration changes of a broker in a
// static cluster list: its endpoints (advertised.listeners), not the
// listed address or rack.
func fixedBrokerUpdate(listed, reg BrokerInfo) BrokerInfo {
	listed.Endpoints = slices.Clone(reg.Endpoints)
	return listed
}

package broker

import (
	"errors"
	"fmt"
	"github.com/kwal/kwal/topicpart"
	"hash/fnv"
	"slices"
	"sort"
	"sync"
)

// TopicPartition names one partition.
// TopicPartition is the module's one topic-partition type (package topicpart).
type TopicPartition = topicpart.TopicPartition

// PartitionState is what the controller decides for one partition.
type PartitionState struct {
	Partition int32
	Leader    int32
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
	Name       string
	Configs    map[string]string
	Partitions []PartitionState
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
	ErrNotReplica               = errors.New("broker: broker is not a replica")
)

// Controller assigns partitions to brokers and keeps leaders, leader
// epochs and ISRs (the part of Kafka's KRaft controller the harness needs).
// The in-memory MemController serves tests, the demo and, with a static
// broker list, multi-process runs; one that keeps its state in the
// metadata Kafka cluster can replace it.
type Controller interface {
	// RegisterBroker records (or updates) a broker's address and rack.
	RegisterBroker(b BrokerInfo) error
	// Brokers returns the known brokers, by id.
	Brokers() []BrokerInfo
	// CreateTopic assigns a new topic. Errors: ErrTopicExists,
	// ErrInvalidPartitions, ErrInvalidReplicationFactor.
	CreateTopic(spec TopicSpec) (TopicState, error)
	// Topic returns a topic's state.
	Topic(name string) (TopicState, bool)
	// Topics returns every topic, by name.
	Topics() []TopicState
	// AlterISR is the leader's AlterPartition: it sets the ISR if
	// leaderEpoch and partitionEpoch are current. Errors: ErrUnknownTopic,
	// ErrStaleEpoch.
	AlterISR(tp TopicPartition, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error)
	// ElectLeader makes leader (a replica) the leader and bumps the leader
	// epoch. Errors: ErrUnknownTopic, ErrNotReplica.
	ElectLeader(tp TopicPartition, leader int32) (PartitionState, error)
	// NextProducerID hands out a producer id unique in the cluster.
	NextProducerID() (int64, error)
	// Subscribe calls fn with every topic whose state changes, in order,
	// from one goroutine at a time; fn must not call back into the
	// controller synchronously. cancel stops the calls.
	Subscribe(fn func(TopicState)) (cancel func())
}

// MemController is an in-memory Controller. Notifications run
// synchronously in the goroutine that made the change, after the change
// is visible, serialised so subscribers see changes in order.
type MemController struct {
	notifyMu sync.Mutex // serialises notifications, taken before mu
	mu       struct {
		sync.Mutex
		brokers map[int32]BrokerInfo
		fixed   bool
		topics  map[string]*TopicState
		subs    map[int]func(TopicState)
		nextSub int
		nextPID int64
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
	c.mu.brokers = map[int32]BrokerInfo{}
	c.mu.topics = map[string]*TopicState{}
	c.mu.subs = map[int]func(TopicState){}
	c.mu.nextPID = producerIDBase
	for _, b := range brokers {
		c.mu.brokers[b.ID] = b
	}
	c.mu.fixed = len(brokers) > 0
	return c
}

func (c *MemController) RegisterBroker(b BrokerInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.mu.brokers[b.ID]; c.mu.fixed && !ok {
		return fmt.Errorf("broker: broker %d is not in the fixed cluster list", b.ID)
	} else if ok && c.mu.fixed && old.Rack != b.Rack {
		return fmt.Errorf("broker: broker %d has rack %q in the cluster list, registers %q", b.ID, old.Rack, b.Rack)
	}
	if old, ok := c.mu.brokers[b.ID]; ok && c.mu.fixed {
		// The static list is authoritative for the inter-broker address;
		// the broker's listeners come from its registration.
		b = fixedBrokerUpdate(old, b)
	}
	c.mu.brokers[b.ID] = b
	return nil
}

func (c *MemController) Brokers() []BrokerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]BrokerInfo, 0, len(c.mu.brokers))
	for _, b := range c.mu.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (c *MemController) CreateTopic(spec TopicSpec) (TopicState, error) {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.mu.Lock()
	if _, ok := c.mu.topics[spec.Name]; ok {
		c.mu.Unlock()
		return TopicState{}, fmt.Errorf("%w: %s", ErrTopicExists, spec.Name)
	}
	brokers := make([]BrokerInfo, 0, len(c.mu.brokers))
	for _, b := range c.mu.brokers {
		brokers = append(brokers, b)
	}
	parts, err := AssignReplicas(spec.Name, spec.Partitions, spec.ReplicationFactor, brokers)
	if err != nil {
		c.mu.Unlock()
		return TopicState{}, err
	}
	ts := &TopicState{Name: spec.Name, Configs: cloneMap(spec.Configs), Partitions: parts}
	c.mu.topics[spec.Name] = ts
	snap, subs := cloneTopic(ts), c.subsLocked()
	c.mu.Unlock()
	for _, fn := range subs {
		fn(cloneTopic(&snap))
	}
	return snap, nil
}

func (c *MemController) Topic(name string) (TopicState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts, ok := c.mu.topics[name]
	if !ok {
		return TopicState{}, false
	}
	return cloneTopic(ts), true
}

func (c *MemController) Topics() []TopicState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TopicState, 0, len(c.mu.topics))
	for _, ts := range c.mu.topics {
		out = append(out, cloneTopic(ts))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *MemController) change(tp TopicPartition, fn func(ps *PartitionState) error) (PartitionState, error) {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.mu.Lock()
	ts, ok := c.mu.topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(ts.Partitions) {
		c.mu.Unlock()
		return PartitionState{}, fmt.Errorf("%w: %s", ErrUnknownTopic, tp)
	}
	ps := &ts.Partitions[tp.Partition]
	if err := fn(ps); err != nil {
		out := clonePartition(*ps)
		c.mu.Unlock()
		return out, err
	}
	ps.PartitionEpoch++
	out := clonePartition(*ps)
	snap, subs := cloneTopic(ts), c.subsLocked()
	c.mu.Unlock()
	for _, fn := range subs {
		fn(cloneTopic(&snap))
	}
	return out, nil
}

func (c *MemController) AlterISR(tp TopicPartition, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error) {
	return c.change(tp, func(ps *PartitionState) error {
		if err := checkPartitionEpochs(tp, ps, leaderEpoch, partitionEpoch); err != nil {
			return err
		}
		return applyISR(tp, ps, isr)
	})
}

func (c *MemController) ElectLeader(tp TopicPartition, leader int32) (PartitionState, error) {
	return c.change(tp, func(ps *PartitionState) error { return applyLeader(tp, ps, leader) })
}

// The partition-state rules both controllers apply (the caller bumps the
// partition epoch after a successful change).

// checkPartitionEpochs refuses a change made against an older state.
func checkPartitionEpochs(tp TopicPartition, ps *PartitionState, leaderEpoch, partitionEpoch int32) error {
	if ps.LeaderEpoch != leaderEpoch || ps.PartitionEpoch != partitionEpoch {
		return fmt.Errorf("%w: %s at leader epoch %d partition epoch %d, asked %d/%d", ErrStaleEpoch, tp, ps.LeaderEpoch, ps.PartitionEpoch, leaderEpoch, partitionEpoch)
	}
	return nil
}

// applyISR sets the ISR, which must name replicas only.
func applyISR(tp TopicPartition, ps *PartitionState, isr []int32) error {
	for _, r := range isr {
		if !slices.Contains(ps.Replicas, r) {
			return fmt.Errorf("%w: %d in ISR of %s", ErrNotReplica, r, tp)
		}
	}
	ps.ISR = slices.Clone(isr)
	slices.Sort(ps.ISR)
	return nil
}

// applyLeader makes leader (a replica) the leader at the next leader epoch;
// a leader outside the ISR joins it (an unclean election, as asked).
func applyLeader(tp TopicPartition, ps *PartitionState, leader int32) error {
	if !slices.Contains(ps.Replicas, leader) {
		return fmt.Errorf("%w: %d for %s", ErrNotReplica, leader, tp)
	}
	ps.Leader = leader
	ps.LeaderEpoch++
	if !slices.Contains(ps.ISR, leader) {
		ps.ISR = append(ps.ISR, leader)
		slices.Sort(ps.ISR)
	}
	return nil
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
	out := TopicState{Name: ts.Name, Configs: cloneMap(ts.Configs), Partitions: make([]PartitionState, len(ts.Partitions))}
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

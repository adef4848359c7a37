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
//   - pid-block: claims the next block of pidBlockSize producer ids; the
//     first claim of a block wins, a loser claims the next one.
//   - broker: a registration; with a static cluster list the list decides
//     addresses and the set is fixed, as in MemController.
//
// # Records
//
//	key                                     value (JSON, "v":1)
//	broker/<id>                             {"v","kind":"broker","proposal","broker":{id,host,port,rack}}
//	topic/<name>/<proposal>                 {"v","kind":"topic","proposal","topic":{name,configs,partitions}}
//	partition/<topic>/<p>/<proposal>        {"v","kind":"alter-isr"|"elect-leader","proposal",
//	                                         "topic","partition","leader_epoch","partition_epoch",
//	                                         "isr"|"leader"}
//	pid-block/<n>                           {"v","kind":"pid-block","proposal","block":n}
//
// Competing proposals never share a key: compaction keeps the latest record
// of a key, so a shared key could keep a losing proposal and drop the
// winner, and a restarted controller would rebuild a different state.
// Hence topic and partition keys end in the proposal id and are never
// compacted away; compaction only drops superseded broker registrations
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
		pending map[string]chan applyResult
		subs    map[int]func(TopicState)
		nextSub int
		closed  bool
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
	c.mu.pending = map[string]chan applyResult{}
	c.mu.subs = map[int]func(TopicState){}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: {0: kgo.NewOffset().AtStart()}})
	go c.applyLoop()
	start := time.Now()
	if err := c.waitApplied(ctx, end); err != nil {
		c.Close()
		return nil, fmt.Errorf("controller: catching up to offset %d of %s: %w", end, cfg.Topic, err)
	}
	c.logger.Info("controller state loaded", "topic", cfg.Topic, "records", end, "took", time.Since(start).Round(time.Millisecond))
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
		changed *TopicState
		res     applyResult
	)
	if err != nil {
		c.logger.Error("skipping cluster state record", "offset", r.Offset, "key", string(r.Key), "err", err)
	} else {
		changed, res = c.mu.st.apply(rec)
		if res.err != nil {
			c.logger.Debug("cluster state record refused", "offset", r.Offset, "key", string(r.Key), "err", res.err)
		}
	}
	c.mu.applied = r.Offset + 1
	close(c.mu.advance)
	c.mu.advance = make(chan struct{})
	waiter := c.mu.pending[rec.Proposal]
	delete(c.mu.pending, rec.Proposal)
	var (
		subs []func(TopicState)
		snap TopicState
	)
	if changed != nil {
		subs, snap = subscribers(c.mu.subs), cloneTopic(changed)
	}
	c.mu.Unlock()
	for _, fn := range subs {
		fn(cloneTopic(&snap))
	}
	if waiter != nil && err == nil {
		waiter <- res
	}
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

// propose produces rec under key and returns what applying it decided.
func (c *KafkaController) propose(key func(proposal string) string, rec stateRecord) (applyResult, error) {
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
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
	defer cancel()
	kr := &kgo.Record{Key: []byte(key(rec.Proposal)), Value: val, Partition: 0}
	if err := c.cl.ProduceSync(ctx, kr).FirstErr(); err != nil {
		return applyResult{}, fmt.Errorf("controller: %s: produce %s: %w", rec.Kind, kr.Key, err)
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

func (c *KafkaController) RegisterBroker(b BrokerInfo) error {
	c.mu.Lock()
	err := c.mu.st.checkBroker(b)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	res, err := c.propose(func(string) string { return "broker/" + strconv.Itoa(int(b.ID)) },
		stateRecord{Kind: kindBroker, Broker: brokerToWire(b)})
	if err != nil {
		return err
	}
	return res.err
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
	ts := TopicState{Name: spec.Name, Configs: cloneMap(spec.Configs), Partitions: parts}
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
	const attempts = 5
	var last error
	for range attempts {
		ts, ok := c.Topic(tp.Topic)
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(ts.Partitions) {
			return PartitionState{}, fmt.Errorf("%w: %s", ErrUnknownTopic, tp)
		}
		ps := ts.Partitions[tp.Partition]
		res, err := c.propose(partitionKey(tp), stateRecord{
			Kind: kindElectLeader, TopicName: tp.Topic, Partition: tp.Partition,
			LeaderEpoch: ps.LeaderEpoch, PartitionEpoch: ps.PartitionEpoch, Leader: leader,
		})
		if err != nil {
			return PartitionState{}, err
		}
		if !errors.Is(res.err, ErrStaleEpoch) {
			return res.partition, res.err
		}
		last = res.err // another change came first: re-read, retry
	}
	return PartitionState{}, last
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
	w := &wireTopic{Name: ts.Name, Configs: ts.Configs}
	for _, ps := range ts.Partitions {
		w.Partitions = append(w.Partitions, wirePartition{
			Partition: ps.Partition, Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch,
			PartitionEpoch: ps.PartitionEpoch, Replicas: ps.Replicas, ISR: ps.ISR,
		})
	}
	return w
}

// applyResult is what applying one record decided, for its proposer.
type applyResult struct {
	topic     TopicState
	partition PartitionState
	err       error
}

// clusterState is the controller's state machine: apply takes records in
// log order and does no I/O, so every controller that applies the same log
// holds the same state.
type clusterState struct {
	fixed        bool
	brokers      map[int32]BrokerInfo
	topics       map[string]*TopicState
	nextPIDBlock int64
}

func newClusterState(static []BrokerInfo) *clusterState {
	s := &clusterState{brokers: map[int32]BrokerInfo{}, topics: map[string]*TopicState{}, fixed: len(static) > 0}
	for _, b := range static {
		s.brokers[b.ID] = b
	}
	return s
}

func (s *clusterState) brokerList() []BrokerInfo {
	out := make([]BrokerInfo, 0, len(s.brokers))
	for _, b := range s.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// checkBroker is MemController's rule for a fixed cluster list.
func (s *clusterState) checkBroker(b BrokerInfo) error {
	old, ok := s.brokers[b.ID]
	switch {
	case s.fixed && !ok:
		return fmt.Errorf("broker: broker %d is not in the fixed cluster list", b.ID)
	case s.fixed && old.Rack != b.Rack:
		return fmt.Errorf("broker: broker %d has rack %q in the cluster list, registers %q", b.ID, old.Rack, b.Rack)
	}
	return nil
}

// apply applies one record. changed is the topic whose state changed, if
// any; the result goes to the record's proposer.
func (s *clusterState) apply(rec stateRecord) (changed *TopicState, res applyResult) {
	switch rec.Kind {
	case kindBroker:
		if rec.Broker == nil {
			return nil, applyResult{err: errors.New("controller: broker record without a broker")}
		}
		b := brokerFromWire(rec.Broker)
		if err := s.checkBroker(b); err != nil {
			return nil, applyResult{err: err}
		}
		if s.fixed { // a static list decides the inter-broker address
			b = fixedBrokerUpdate(s.brokers[b.ID], b)
		}
		s.brokers[b.ID] = b
		return nil, applyResult{}
	case kindTopic:
		w := rec.Topic
		if w == nil || w.Name == "" || len(w.Partitions) == 0 {
			return nil, applyResult{err: fmt.Errorf("%w: malformed topic record", ErrInvalidPartitions)}
		}
		if _, ok := s.topics[w.Name]; ok {
			return nil, applyResult{err: fmt.Errorf("%w: %s", ErrTopicExists, w.Name)}
		}
		ts := &TopicState{Name: w.Name, Configs: cloneMap(w.Configs)}
		for i, wp := range w.Partitions {
			if wp.Partition != int32(i) || len(wp.Replicas) == 0 {
				return nil, applyResult{err: fmt.Errorf("%w: malformed partition %d of %s", ErrInvalidPartitions, i, w.Name)}
			}
			ts.Partitions = append(ts.Partitions, clonePartition(PartitionState{
				Partition: wp.Partition, Leader: wp.Leader, LeaderEpoch: wp.LeaderEpoch,
				PartitionEpoch: wp.PartitionEpoch, Replicas: wp.Replicas, ISR: wp.ISR,
			}))
		}
		s.topics[w.Name] = ts
		return ts, applyResult{topic: cloneTopic(ts)}
	case kindAlterISR, kindElectLeader:
		tp := TopicPartition{Topic: rec.TopicName, Partition: rec.Partition}
		ts, ok := s.topics[tp.Topic]
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(ts.Partitions) {
			return nil, applyResult{err: fmt.Errorf("%w: %s", ErrUnknownTopic, tp)}
		}
		ps := &ts.Partitions[tp.Partition]
		refuse := func(err error) (*TopicState, applyResult) {
			return nil, applyResult{partition: clonePartition(*ps), err: err}
		}
		if err := checkPartitionEpochs(tp, ps, rec.LeaderEpoch, rec.PartitionEpoch); err != nil {
			return refuse(err)
		}
		apply := func() error { return applyISR(tp, ps, rec.ISR) }
		if rec.Kind == kindElectLeader {
			apply = func() error { return applyLeader(tp, ps, rec.Leader) }
		}
		if err := apply(); err != nil {
			return refuse(err)
		}
		ps.PartitionEpoch++
		return ts, applyResult{partition: clonePartition(*ps)}
	case kindPIDBlock:
		if rec.Block != s.nextPIDBlock {
			return nil, applyResult{err: fmt.Errorf("controller: producer id block %d already claimed", rec.Block)}
		}
		s.nextPIDBlock++
		return nil, applyResult{}
	default:
		return nil, applyResult{err: fmt.Errorf("controller: unknown record kind %q", rec.Kind)}
	}
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kwal/kwal/group"
	"github.com/kwal/kwal/purgatory"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetsTopic is Kafka's internal topic of committed offsets and group
// metadata.
const OffsetsTopic = "__consumer_offsets"

// RemoteWALMetadataTopic is the KIP's metadata topic
// (metadata.DefaultTopic), which a cluster may host itself; it is never
// auto-created.
const RemoteWALMetadataTopic = "__remote_wal_log_metadata"

// Group coordinator defaults, Kafka's.
const (
	DefaultOffsetsTopicPartitions        = 50
	DefaultOffsetsTopicReplicationFactor = 3
	DefaultOffsetsTopicSegmentBytes      = 100 << 20 // offsets.topic.segment.bytes
	DefaultGroupMinSessionTimeout        = 6 * time.Second
	DefaultGroupMaxSessionTimeout        = 30 * time.Minute
	DefaultGroupInitialRebalanceDelay    = 3 * time.Second
	DefaultOffsetCommitTimeout           = 5 * time.Second
	DefaultOffsetsRetention              = 7 * 24 * time.Hour // offsets.retention.minutes
	DefaultOffsetsRetentionCheckInterval = 10 * time.Minute   // offsets.retention.check.interval.ms
	// groupWaitMargin is added to a request's own bound (commit timeout,
	// rebalance timeout) before the handler stops waiting.
	groupWaitMargin = 5 * time.Second
)

// GroupConfig holds the group coordinator's settings.
type GroupConfig struct {
	// OffsetsTopicPartitions: offsets.topic.num.partitions. Default 50.
	OffsetsTopicPartitions int32
	// OffsetsTopicReplicationFactor: offsets.topic.replication.factor.
	// Default 3; capped to the brokers registered when the topic is made
	// (Kafka refuses instead, which leaves a one-broker cluster without
	// groups until the setting is lowered).
	OffsetsTopicReplicationFactor int16
	// MinSessionTimeout, MaxSessionTimeout: group.min.session.timeout.ms,
	// group.max.session.timeout.ms. Defaults 6 s and 30 min.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay: group.initial.rebalance.delay.ms. Default
	// 3 s; negative for none.
	InitialRebalanceDelay time.Duration
	// MaxSize: group.max.size. Default 0, unlimited.
	MaxSize int
	// OffsetCommitTimeout: offsets.commit.timeout.ms, how long a commit
	// waits for the ISR. Default 5 s.
	OffsetCommitTimeout time.Duration
	// OffsetsRetention: offsets.retention.minutes, for empty groups
	// (KIP-211). Default 7 days; negative: never.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval: offsets.retention.check.interval.ms.
	// Default 10 min.
	OffsetsRetentionCheckInterval time.Duration
}

func (g *GroupConfig) validate() error {
	if g.OffsetsTopicPartitions == 0 {
		g.OffsetsTopicPartitions = DefaultOffsetsTopicPartitions
	}
	if g.OffsetsTopicReplicationFactor == 0 {
		g.OffsetsTopicReplicationFactor = DefaultOffsetsTopicReplicationFactor
	}
	if g.MinSessionTimeout == 0 {
		g.MinSessionTimeout = DefaultGroupMinSessionTimeout
	}
	if g.MaxSessionTimeout == 0 {
		g.MaxSessionTimeout = DefaultGroupMaxSessionTimeout
	}
	if g.InitialRebalanceDelay == 0 {
		g.InitialRebalanceDelay = DefaultGroupInitialRebalanceDelay
	}
	if g.OffsetCommitTimeout == 0 {
		g.OffsetCommitTimeout = DefaultOffsetCommitTimeout
	}
	if g.OffsetsRetention == 0 {
		g.OffsetsRetention = DefaultOffsetsRetention
	}
	if g.OffsetsRetentionCheckInterval == 0 {
		g.OffsetsRetentionCheckInterval = DefaultOffsetsRetentionCheckInterval
	}
	bad := func(k string, v any) error { return fmt.Errorf("%w: %s=%v", ErrConfig, k, v) }
	switch {
	case g.OffsetsTopicPartitions < 1:
		return bad("offsets.topic.num.partitions", g.OffsetsTopicPartitions)
	case g.OffsetsTopicReplicationFactor < 1:
		return bad("offsets.topic.replication.factor", g.OffsetsTopicReplicationFactor)
	case g.MinSessionTimeout < 0:
		return bad("group.min.session.timeout.ms", g.MinSessionTimeout)
	case g.MaxSessionTimeout < g.MinSessionTimeout:
		return bad("group.max.session.timeout.ms", g.MaxSessionTimeout)
	case g.MaxSize < 0:
		return bad("group.max.size", g.MaxSize)
	case g.OffsetCommitTimeout < 0:
		return bad("offsets.commit.timeout.ms", g.OffsetCommitTimeout)
	case g.OffsetsRetentionCheckInterval < 0:
		return bad("offsets.retention.check.interval.ms", g.OffsetsRetentionCheckInterval)
	}
	return nil
}

// groups is the broker's group coordinator and what its handlers share.
type groups struct {
	coord  *group.Coordinator
	ctx    context.Context // cancelled when the broker closes
	cancel context.CancelFunc
	create sync.Mutex // one __consumer_offsets creation at a time
}

func (b *Broker) startGroups() error {
	gc := b.cfg.Groups
	delay := max(gc.InitialRebalanceDelay, 0)
	coord, err := group.NewCoordinator(group.Config{
		Partitions: gc.OffsetsTopicPartitions,
		Limits: group.Limits{
			MinSessionTimeout: gc.MinSessionTimeout, MaxSessionTimeout: gc.MaxSessionTimeout,
			InitialRebalanceDelay: delay, MaxSize: gc.MaxSize,
		},
		Storage:          offsetsStorage{b},
		OffsetsRetention: gc.OffsetsRetention, OffsetsRetentionCheckInterval: gc.OffsetsRetentionCheckInterval,
		Clock:    b.clock,
		Logger:   b.logger.With("component", "group-coordinator"),
		OnChange: b.changes.Signal,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.groups = &groups{coord: coord, ctx: ctx, cancel: cancel}
	return nil
}

func (b *Broker) closeGroups() {
	b.groups.cancel()
	b.groups.coord.Close()
}

// offsetsRoleChanged moves the coordinator with leadership of a
// __consumer_offsets partition (called from applyTopic).
func (b *Broker) offsetsRoleChanged(tp TopicPartition, role roleChange, ps PartitionState) {
	if tp.Topic != OffsetsTopic {
		return
	}
	switch role {
	case roleLeader:
		b.groups.coord.Elected(tp.Partition, ps.LeaderEpoch)
	case roleFollower:
		b.groups.coord.Resigned(tp.Partition)
	}
}

// offsetsTopicSeen makes the coordinator map groups onto the partitions
// __consumer_offsets has, whatever this broker's
// offsets.topic.num.partitions says (the topic may have been created by a
// broker configured otherwise), as Kafka reads the count from the topic.
func (b *Broker) offsetsTopicSeen(ts TopicState) {
	if ts.Name == OffsetsTopic && len(ts.Partitions) > 0 {
		b.groups.coord.UsePartitions(int32(len(ts.Partitions)))
	}
}

// ensureOffsetsTopic returns __consumer_offsets, creating it on first use.
func (b *Broker) ensureOffsetsTopic() (TopicState, error) {
	if ts, ok := b.ctrl.Topic(OffsetsTopic); ok {
		return ts, nil
	}
	b.groups.create.Lock()
	defer b.groups.create.Unlock()
	if ts, ok := b.ctrl.Topic(OffsetsTopic); ok {
		return ts, nil
	}
	gc := b.cfg.Groups
	rf := gc.OffsetsTopicReplicationFactor
	if n := len(b.ctrl.Brokers()); int(rf) > n {
		b.logger.Warn("offsets.topic.replication.factor is larger than the cluster; creating __consumer_offsets with fewer replicas",
			"offsets.topic.replication.factor", rf, "brokers", n)
		rf = int16(n)
	}
	ts, err := b.ctrl.CreateTopic(TopicSpec{
		Name: OffsetsTopic, Partitions: gc.OffsetsTopicPartitions, ReplicationFactor: rf,
		Configs: map[string]string{
			"cleanup.policy":      "compact",
			"segment.bytes":       fmt.Sprint(DefaultOffsetsTopicSegmentBytes),
			"min.insync.replicas": fmt.Sprint(min(b.cfg.MinInsyncReplicas, int(rf))),
		},
	})
	if errors.Is(err, ErrTopicExists) {
		if ts, ok := b.ctrl.Topic(OffsetsTopic); ok {
			return ts, nil
		}
	}
	if err != nil {
		return TopicState{}, err
	}
	b.logger.Info("created __consumer_offsets", "partitions", gc.OffsetsTopicPartitions, "replication_factor", rf)
	return ts, nil
}

// offsetsStorage is the coordinator's access to this broker's
// __consumer_offsets replicas.
type offsetsStorage struct{ b *Broker }

var _ group.Storage = offsetsStorage{}

// offsetsAppendOp waits for an appended batch to reach the high watermark.
type offsetsAppendOp struct {
	purgatory.Op
	b        *Broker
	p        *partition
	epoch    int32
	required int64
	mu       sync.Mutex
	err      *kerr.Error
	ch       chan struct{}
}

func (o *offsetsAppendOp) TryComplete() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	st, leader := o.p.snapshot()
	switch {
	case o.b.partition(o.p.tp) != o.p || !leader || st.LeaderEpoch != o.epoch:
		o.err = kerr.NotCoordinator
		return true
	case o.p.log.HighWatermark() >= o.required:
		return true
	}
	return false
}

func (o *offsetsAppendOp) OnComplete() {
	o.mu.Lock()
	if o.Outcome() != purgatory.Completed && o.err == nil {
		// Kafka answers a commit that timed out waiting for the ISR with
		// COORDINATOR_NOT_AVAILABLE (the client retries).
		o.err = kerr.CoordinatorNotAvailable
	}
	o.mu.Unlock()
	close(o.ch)
}

func (o *offsetsAppendOp) OnExpiration() {}

// Append appends as leader with acks=all semantics. Errors are mapped as
// Kafka maps a commit's append errors.
func (s offsetsStorage) Append(ctx context.Context, partition, leaderEpoch int32, batch []byte) error {
	b := s.b
	tp := TopicPartition{Topic: OffsetsTopic, Partition: partition}
	p := b.partition(tp)
	if p == nil {
		return kerr.NotCoordinator
	}
	if st, leader := p.snapshot(); !leader || st.LeaderEpoch != leaderEpoch {
		return kerr.NotCoordinator
	}
	res := p.appendAsLeader(batch, -1)
	if res.err != nil {
		switch res.err {
		case kerr.NotLeaderForPartition, kerr.KafkaStorageError, kerr.FencedLeaderEpoch:
			return kerr.NotCoordinator
		case kerr.MessageTooLarge, kerr.RecordListTooLarge:
			return kerr.InvalidCommitOffsetSize
		case kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend:
			return kerr.CoordinatorNotAvailable
		}
		return kerr.UnknownServerError
	}
	b.fetchWait.CheckAndComplete(tp)
	if p.maybeAdvanceHW() {
		b.wake(tp)
	}
	op := &offsetsAppendOp{b: b, p: p, epoch: leaderEpoch, required: res.lastOffset + 1, ch: make(chan struct{})}
	op.Timeout = b.cfg.Groups.OffsetCommitTimeout
	b.produceWait.TryCompleteElseWatch(op, []TopicPartition{tp})
	select {
	case <-op.ch:
	case <-ctx.Done():
		return kerr.RequestTimedOut
	case <-b.stop:
		return kerr.NotCoordinator
	}
	o := op
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if st, _ := p.snapshot(); len(st.ISR) < int(p.minISR.Load()) {
		return kerr.CoordinatorNotAvailable
	}
	return nil
}

// Read reads this broker's log of the partition (it leads it).
func (s offsetsStorage) Read(partition int32, offset int64, maxBytes int) ([]byte, int64, error) {
	p := s.b.partition(TopicPartition{Topic: OffsetsTopic, Partition: partition})
	if p == nil {
		return nil, 0, fmt.Errorf("broker: no replica of %s-%d", OffsetsTopic, partition)
	}
	offset = max(offset, p.log.LogStartOffset())
	end := p.log.LogEndOffset()
	if offset >= end {
		return nil, end, nil
	}
	data, err := p.log.Read(offset, maxBytes)
	return data, end, err
}

// dispatchGroups serves the group coordinator's keys (nil: not one).
func (b *Broker) dispatchGroups(cs *connState, req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		return b.handleFindCoordinator(r)
	case *kmsg.JoinGroupRequest:
		return b.handleJoinGroup(cs, r)
	case *kmsg.SyncGroupRequest:
		return b.handleSyncGroup(cs, r)
	case *kmsg.HeartbeatRequest:
		return b.handleHeartbeat(r)
	case *kmsg.LeaveGroupRequest:
		return b.handleLeaveGroup(r)
	case *kmsg.OffsetCommitRequest:
		return b.handleOffsetCommit(cs, r)
	case *kmsg.OffsetFetchRequest:
		return b.handleOffsetFetch(r)
	case *kmsg.ListGroupsRequest:
		return b.handleListGroups(r)
	case *kmsg.DescribeGroupsRequest:
		return b.handleDescribeGroups(r)
	case *kmsg.DeleteGroupsRequest:
		return b.handleDeleteGroups(cs, r)
	case *kmsg.OffsetDeleteRequest:
		return b.handleOffsetDelete(cs, r)
	}
	return nil
}

// groupCtx bounds a group request's wait by the broker's life and, if
// positive, d; with cs.noWait (fuzzing) it does not wait at all.
func (b *Broker) groupCtx(cs *connState, d time.Duration) (context.Context, context.CancelFunc) {
	if cs.noWait {
		ctx, cancel := context.WithCancel(b.groups.ctx)
		cancel()
		return ctx, cancel
	}
	if d <= 0 {
		return context.WithCancel(b.groups.ctx)
	}
	return context.WithTimeout(b.groups.ctx, d)
}

package rwnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/follower"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/remotewal"
)

// RemoteWALReplicatorConfig configures NewRemoteWALReplicator.
type RemoteWALReplicatorConfig struct {
	BrokerID int32
	Rack     string
	// Store holds the combined objects; decorate it (ledger, latency,
	// faults) before passing it in.
	Store objstore.Store
	// Stores, when set, is one store per rack (see StoreSet): this broker
	// uploads to Stores.Store(Stores.IDFor(Rack)) and reads every slice
	// from the store its event names; Store is then unused.
	Stores StoreResolver
	// Metadata names the Kafka cluster of __remote_wal_log_metadata.
	Metadata metadata.TopicConfig
	// Tasks, Combiner and Follower tune the three parts; their wiring
	// fields (writers, publishers, index, leader access) are filled in.
	Tasks    remotewal.Config
	Combiner combiner.Config
	Follower follower.Config
	// Ledger records fallback bytes that crossed racks.
	Ledger *ledger.Ledger
	// ReadyTimeout bounds the wait for the metadata consumer to catch up
	// at start. Default 30 s.
	ReadyTimeout time.Duration
	// Retention decides when an object is deleted (every in-sync replica
	// past the live part of its entries, and the WAL retention passed; at
	// once when every entry is dead): DELETE_SEGMENT_STARTED, delete,
	// DELETE_SEGMENT_FINISHED, tombstone. This broker deletes the objects
	// whose least partition it leads, whoever uploaded them (deletes).
	Retention metadata.RetentionPolicy
	// OrphanGrace: an object no live metadata references is deleted this
	// long after its upload. Default 5 minutes (see combiner.OrphanConfig).
	OrphanGrace time.Duration
	// MaintenanceInterval is how often retention and orphan collection
	// run. Default 30 s.
	MaintenanceInterval time.Duration
	// LeaderStartTimeout bounds one attempt to catch the metadata up
	// before a new leader's slice task starts (leaderstart.go); attempts
	// repeat, backing off, until one succeeds. Default 10 s.
	LeaderStartTimeout time.Duration
	// Observer, if set, gets the remote-WAL stages (stagehist): cut_to_put,
	// put and publish on the leader side, metadata_delivery, get and
	// replication_lag on the follower side. NewRemoteWALReplicatorFor
	// passes the broker's Config.Stages.
	Observer stagehist.Observer
	Clock    clock.Clock
	Logger   *slog.Logger
}

// RemoteWALReplicator is the broker's remotewal replication mode: the
// leader side runs the remote-WAL write path (remotewal tasks, combiner,
// metadata publisher); the follower side consumes the metadata topic and
// rebuilds follower logs from object storage with the follower package.
// It implements broker.Replicator and reaches the broker only through the
// broker.FollowerReplica handles StartFollower is given and the logs
// StartLeader is given.
type RemoteWALReplicator struct {
	cfg   RemoteWALReplicatorConfig
	pub   *metadata.Publisher
	state *metadata.State
	cons  *metadata.Consumer
	wp    *remotewal.WritePath
	fol   *follower.Follower
	log   *slog.Logger

	retainer *metadata.Retainer
	orphans  *combiner.OrphanCollector
	stopMnt  context.CancelFunc
	mntDone  chan struct{}
	recon    *reconciler
	starts   *starter
	stopStrt context.CancelFunc
	own      objstore.Store // the store this broker uploads to
	storeID  string         // its id, in the events this broker publishes

	closeOnce sync.Once
	closeErr  error

	mu struct {
		sync.Mutex
		leads   map[metadata.TopicPartition]leading
		follows map[metadata.TopicPartition]*followView
		clients map[int32]*leaderConn
	}
}

var _ broker.Replicator = (*RemoteWALReplicator)(nil)

// leading is a partition this broker leads: its log and leader epoch.
type leading struct {
	log   *kafkalog.Log
	epoch int32
}

type followView struct {
	tp     broker.TopicPartition
	leader int32
	epoch  int32
	leo    int64  // leader's log end, from TagLeaderLogEnd
	rack   string // the leader's rack when the follow started (for the ledger)
	h      broker.FollowerReplica
}

// leaderConn is one connection to a leader for OffsetForLeaderEpoch and
// fallback fetches (the replica fetcher keeps its own for long polls).
type leaderConn struct {
	mu sync.Mutex
	c  *broker.WireConn
}

// NewRemoteWALReplicator starts the metadata publisher and consumer (and
// waits until the consumer has caught up, so followers never act on a
// partial index), the write path and the follower.
func NewRemoteWALReplicator(cfg RemoteWALReplicatorConfig) (*RemoteWALReplicator, error) {
	if cfg.Store == nil && cfg.Stores == nil {
		return nil, errors.New("rwnode: remote WAL replicator needs an object store")
	}
	if cfg.Stores == nil {
		cfg.Stores = oneStore{cfg.Store}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.LeaderStartTimeout == 0 {
		cfg.LeaderStartTimeout = 10 * time.Second
	}
	if cfg.Ledger == nil {
		cfg.Ledger = ledger.New()
	}
	r := &RemoteWALReplicator{cfg: cfg, log: cfg.Logger.With("component", "remotewal", "broker", cfg.BrokerID), recon: newReconciler(), starts: newStarter()}
	own, err := r.ownStore()
	if err != nil {
		return nil, err
	}
	r.mu.leads = map[metadata.TopicPartition]leading{}
	r.mu.follows = map[metadata.TopicPartition]*followView{}
	r.mu.clients = map[int32]*leaderConn{}
	if r.pub, err = metadata.NewPublisher(cfg.Metadata, cfg.Clock, r.log); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ReadyTimeout)
	defer cancel()
	r.state = metadata.NewState()
	if r.cons, err = metadata.StartConsumer(ctx, metadata.ConsumerConfig{TopicConfig: cfg.Metadata, Observer: cfg.Observer}, r.state, cfg.Clock, r.log); err != nil {
		r.pub.Close()
		return nil, err
	}
	select {
	case <-r.cons.Ready():
	case <-ctx.Done():
		r.cons.Close()
		r.pub.Close()
		return nil, fmt.Errorf("rwnode: metadata consumer not ready after %v: is %v reachable?", cfg.ReadyTimeout, cfg.Metadata.Bootstrap)
	}
	cc := cfg.Combiner
	cc.BrokerID = cfg.BrokerID
	cc.Bucket = r.storeID
	if cc.Clock == nil {
		cc.Clock = cfg.Clock
	}
	if r.wp, err = remotewal.NewWritePath(remotewal.WritePathConfig{
		Store: own, Publisher: r.pub, Tasks: cfg.Tasks, Combiner: cc, Observer: cfg.Observer, Logger: r.log,
	}); err != nil {
		r.cons.Close()
		r.pub.Close()
		return nil, err
	}
	fc := cfg.Follower
	fc.Store = &storeRouter{stores: cfg.Stores, log: r.log}
	fc.Index = routedIndex{state: r.state}
	fc.Leader = (*leaderState)(r)
	fc.LeaderClient = (*leaderClient)(r)
	fc.Reporter = (*logEndReporter)(r)
	fc.Transfers = cfg.Ledger
	fc.Rack = cfg.Rack
	if fc.Observer == nil {
		fc.Observer = cfg.Observer
	}
	if fc.Clock == nil {
		fc.Clock = cfg.Clock
	}
	if fc.Logger == nil {
		fc.Logger = r.log
	}
	if r.fol, err = follower.New(fc); err != nil {
		r.wp.Close(context.Background())
		r.cons.Close()
		r.pub.Close()
		return nil, err
	}
	if err := r.startMaintenance(); err != nil {
		r.fol.Close()
		r.wp.Close(context.Background())
		r.cons.Close()
		r.pub.Close()
		return nil, err
	}
	sctx, stop := context.WithCancel(context.Background())
	r.stopStrt = stop
	go r.runStarter(sctx)
	if d, ok := r.cons.BootstrapDuration(); ok {
		r.log.Info("remote WAL metadata ready", "bootstrap", d, "metadata_partitions", r.cons.NumPartitions())
	}
	return r, nil
}

func mtp(tp broker.TopicPartition) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
}

// StartLeader starts the partition's slice task with the new leader epoch,
// replacing a task of an earlier epoch, once the metadata has caught up
// (leaderstart.go): at fromOffset (the log end), or below it where the
// store's entries end, to upload in this epoch the range an older leader
// appended and never uploaded. It publishes the epoch's dead range (see
// publishDeadRange) from fromOffset.
func (r *RemoteWALReplicator) StartLeader(tp broker.TopicPartition, log *kafkalog.Log, leaderEpoch int32, fromOffset int64) error {
	r.starts.mu.Lock()
	r.wp.Manager.StopPartition(mtp(tp))
	r.starts.askStart(mtp(tp), pendingStart{log: log, epoch: leaderEpoch, logEnd: fromOffset})
	r.starts.mu.Unlock()
	r.mu.Lock()
	r.mu.leads[mtp(tp)] = leading{log: log, epoch: leaderEpoch}
	r.mu.Unlock()
	r.publishDeadRange(tp, log, leaderEpoch, fromOffset)
	return nil
}

// UploadedOffset is where the partition's published slices end: bytes
// below it are in object storage, so local retention may delete them.
func (r *RemoteWALReplicator) UploadedOffset(tp broker.TopicPartition) (int64, bool) {
	off, err := r.wp.Manager.PublishedOffset(mtp(tp))
	return off, err == nil
}

var _ broker.UploadedOffsetReporter = (*RemoteWALReplicator)(nil)

// StopLeader stops the partition's slice task.
func (r *RemoteWALReplicator) StopLeader(tp broker.TopicPartition) {
	r.mu.Lock()
	delete(r.mu.leads, mtp(tp))
	r.mu.Unlock()
	r.starts.mu.Lock()
	delete(r.starts.pending, mtp(tp))
	r.wp.Manager.StopPartition(mtp(tp))
	r.starts.mu.Unlock()
}

// StartFollower has the follower rebuild the partition's log from object
// storage, appending through h.
func (r *RemoteWALReplicator) StartFollower(h broker.FollowerReplica) error {
	tp := h.TopicPartition()
	m := mtp(tp)
	// The leader is read once: the follower asks for it at every step of
	// every partition, and it is fixed for the follow.
	l := h.Leader()
	r.mu.Lock()
	r.mu.follows[m] = &followView{tp: tp, leader: l.ID, epoch: h.LeaderEpoch(), leo: -1, rack: l.Rack, h: h}
	r.mu.Unlock()
	err := r.fol.AddPartition(m, &partitionFollowerLog{h: h})
	if errors.Is(err, follower.ErrPartitionExists) {
		// A new epoch of the same follow: restart it so the follower
		// truncates against the new leader before appending again.
		_ = r.fol.RemovePartition(m)
		err = r.fol.AddPartition(m, &partitionFollowerLog{h: h})
	}
	return err
}

// StopFollower stops rebuilding the partition's log.
func (r *RemoteWALReplicator) StopFollower(tp broker.TopicPartition) {
	m := mtp(tp)
	r.mu.Lock()
	_, ok := r.mu.follows[m]
	delete(r.mu.follows, m)
	r.mu.Unlock()
	if ok {
		_ = r.fol.RemovePartition(m)
	}
}

var _ broker.LeaderLogEndObserver = (*RemoteWALReplicator)(nil)

// ObserveLeaderLogEnd records the leader's log end from a replica fetch
// response and wakes the follower when it moved.
func (r *RemoteWALReplicator) ObserveLeaderLogEnd(tp broker.TopicPartition, leo int64) {
	r.mu.Lock()
	v := r.mu.follows[mtp(tp)]
	changed := v != nil && v.leo != leo
	if v != nil {
		v.leo = leo
	}
	r.mu.Unlock()
	if changed {
		r.fol.Notify()
	}
}

// Follower exposes the follower side, for status and metrics.
func (r *RemoteWALReplicator) Follower() *follower.Follower { return r.fol }

// WritePath exposes the leader side, for status and metrics.
func (r *RemoteWALReplicator) WritePath() *remotewal.WritePath { return r.wp }

// State exposes the metadata index this broker rebuilt.
func (r *RemoteWALReplicator) State() *metadata.State { return r.state }

// startMaintenance runs retention and orphan collection in the background.
func (r *RemoteWALReplicator) startMaintenance() error {
	pol := r.cfg.Retention
	pol.BrokerID = r.cfg.BrokerID
	pol.Deletes = r.deletes
	ret, err := metadata.NewRetainer(pol, r.state, r.pub, r.cfg.Stores.Store, r.replicatedOffset, r.cfg.Clock, r.log)
	if err != nil {
		return err
	}
	grace := r.cfg.OrphanGrace
	if grace == 0 {
		grace = 5 * time.Minute
	}
	oc, err := combiner.NewOrphanCollector(combiner.OrphanConfig{
		Store: r.own, KeyPrefix: r.cfg.Combiner.KeyPrefix, Refs: remotewal.StateReferences{State: r.state},
		InFlight: r.wp.Combiner.InFlight, Grace: grace, UploadTimeout: r.cfg.Combiner.UploadTimeout,
		Clock: r.cfg.Clock, Logger: r.log,
	})
	if err != nil {
		return err
	}
	r.retainer, r.orphans = ret, oc
	every := r.cfg.MaintenanceInterval
	if every == 0 {
		every = 30 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stopMnt, r.mntDone = cancel, make(chan struct{})
	go func() {
		defer close(r.mntDone)
		t := r.cfg.Clock.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			if err := r.vouch(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("remote WAL replicated offsets not published; will retry", "err", err)
			}
			if n, err := r.retainer.RunOnce(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("remote WAL retention run failed; will retry", "err", err)
			} else if n > 0 {
				r.log.Info("remote WAL retention deleted objects", "objects", n)
			}
			if n, err := r.collectDead(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("deleting objects of deleted partitions failed; will retry", "err", err)
			} else if n > 0 {
				r.log.Info("deleted objects of deleted partitions", "objects", n)
			}
			if keys, err := r.orphans.RunOnce(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("orphan collection failed; will retry", "err", err)
			} else if len(keys) > 0 {
				r.log.Info("deleted orphaned objects", "objects", len(keys))
			}
			t.Reset(every)
		}
	}()
	return nil
}

// safeOffset is the offset below which every in-sync replica of tp holds
// the data: the high watermark, known only where this broker leads tp.
func (r *RemoteWALReplicator) safeOffset(tp metadata.TopicPartition) (int64, bool) {
	r.mu.Lock()
	l, ok := r.mu.leads[tp]
	r.mu.Unlock()
	if !ok {
		return r.deletedOffset(tp)
	}
	return l.log.HighWatermark(), true
}

// Close stops the follower, then lets the write path upload and publish
// what it holds until ctx ends, then closes the metadata clients. Later
// calls return the first call's error.
func (r *RemoteWALReplicator) Close(ctx context.Context) error {
	r.closeOnce.Do(func() { r.closeErr = r.close(ctx) })
	return r.closeErr
}

func (r *RemoteWALReplicator) close(ctx context.Context) error {
	if r.stopMnt != nil {
		r.stopMnt()
		<-r.mntDone
	}
	r.stopStrt()
	<-r.starts.done
	ferr := r.fol.Close()
	werr := r.wp.Close(ctx)
	r.recon.close()
	r.cons.Close()
	r.pub.Close()
	r.mu.Lock()
	for _, c := range r.mu.clients {
		c.mu.Lock()
		if c.c != nil {
			c.c.Close()
		}
		c.mu.Unlock()
	}
	r.mu.Unlock()
	return errors.Join(ferr, werr)
}

// partitionFollowerLog routes the follower's appends through the broker's
// replica handle, so producer state is learned and a stale epoch is
// refused, and wakes the fetcher so the new log end reaches the leader at
// once.
type partitionFollowerLog struct {
	h broker.FollowerReplica
}

var (
	_ follower.Log         = (*partitionFollowerLog)(nil)
	_ follower.RunAppender = (*partitionFollowerLog)(nil)
)

func (l *partitionFollowerLog) LogEndOffset() int64                 { return l.h.LogEndOffset() }
func (l *partitionFollowerLog) LatestEpoch() (int32, bool)          { return l.h.LatestEpoch() }
func (l *partitionFollowerLog) EpochEntries() []kafkalog.EpochEntry { return l.h.EpochEntries() }

func (l *partitionFollowerLog) AppendAsFollower(b []byte) (kafkalog.AppendInfo, error) {
	return l.notified(l.h.AppendAsFollower(b))
}

func (l *partitionFollowerLog) AppendVerifiedAsFollower(b []byte) (kafkalog.AppendInfo, error) {
	return l.notified(l.h.AppendVerifiedAsFollower(b))
}

func (l *partitionFollowerLog) AppendVerifiedRunAsFollower(parts [][]byte) (kafkalog.AppendInfo, error) {
	return l.notified(l.h.AppendVerifiedRunAsFollower(parts))
}

func (l *partitionFollowerLog) notified(info kafkalog.AppendInfo, err error) (kafkalog.AppendInfo, error) {
	if err == nil {
		l.h.Notify()
	}
	return info, err
}

func (l *partitionFollowerLog) Truncate(to int64) error {
	if err := l.h.Truncate(to); err != nil {
		return err
	}
	l.h.Notify()
	return nil
}

type leaderState RemoteWALReplicator

func (s *leaderState) Leader(tp metadata.TopicPartition) (follower.LeaderInfo, bool) {
	r := (*RemoteWALReplicator)(s)
	r.mu.Lock()
	v, ok := r.mu.follows[tp]
	var info follower.LeaderInfo
	if ok {
		info = follower.LeaderInfo{Epoch: v.epoch, LogEnd: v.leo, Rack: v.rack}
	}
	r.mu.Unlock()
	if !ok {
		return info, false
	}
	if info.LogEnd < 0 {
		// Nothing heard from the leader yet: claim no more than we have,
		// so no gap is assumed before the first fetch answers.
		info.LogEnd = v.h.LogEndOffset()
	}
	if info.Rack == "" {
		// The controller did not know the leader's broker yet.
		info.Rack = v.h.Leader().Rack
	}
	return info, true
}

func (s *leaderState) EndOffsetForEpoch(ctx context.Context, tp metadata.TopicPartition, epoch int32) (int32, int64, error) {
	r := (*RemoteWALReplicator)(s)
	v, ok := r.view(tp)
	if !ok {
		return -1, -1, fmt.Errorf("rwnode: %s is not followed", tp)
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = broker.ReplicaOffsetForEpochVersion
	req.ReplicaID = r.cfg.BrokerID
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = tp.Partition, v.epoch, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := r.roundTrip(ctx, v, req)
	if err != nil {
		return -1, -1, err
	}
	for _, t := range resp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
		for _, p := range t.Partitions {
			if p.Partition != tp.Partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, -1, fmt.Errorf("rwnode: OffsetForLeaderEpoch %s epoch %d: %w", tp, epoch, err)
			}
			return p.LeaderEpoch, p.EndOffset, nil
		}
	}
	return -1, -1, fmt.Errorf("rwnode: OffsetForLeaderEpoch %s: no answer for the partition", tp)
}

type leaderClient RemoteWALReplicator

func (c *leaderClient) Fetch(ctx context.Context, tp metadata.TopicPartition, leaderEpoch int32, offset int64, maxBytes int) ([]byte, error) {
	r := (*RemoteWALReplicator)(c)
	v, ok := r.view(tp)
	if !ok {
		return nil, fmt.Errorf("rwnode: %s is not followed", tp)
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = broker.ReplicaFetchVersion
	req.ReplicaID = r.cfg.BrokerID
	req.Rack = broker.FallbackRack
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = int32(maxBytes)
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset = tp.Partition, leaderEpoch, offset
	rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = -1, -1, int32(maxBytes)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := r.roundTrip(ctx, v, req)
	if err != nil {
		return nil, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return nil, fmt.Errorf("rwnode: fallback fetch %s@%d: %w", tp, offset, err)
	}
	for _, t := range fr.Topics {
		for _, p := range t.Partitions {
			if p.Partition != tp.Partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("rwnode: fallback fetch %s@%d: %w", tp, offset, err)
			}
			return p.RecordBatches, nil
		}
	}
	return nil, fmt.Errorf("rwnode: fallback fetch %s: no answer for the partition", tp)
}

type logEndReporter RemoteWALReplicator

func (rep *logEndReporter) ReportLogEnd(tp metadata.TopicPartition, _ int64) {
	r := (*RemoteWALReplicator)(rep)
	if v, ok := r.view(tp); ok {
		v.h.Notify()
	}
}

func (r *RemoteWALReplicator) view(tp metadata.TopicPartition) (followView, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.mu.follows[tp]
	if !ok {
		return followView{}, false
	}
	return *v, true
}

// roundTrip sends one request to the follow's leader over this
// replicator's own connection to it, redialing after an error.
func (r *RemoteWALReplicator) roundTrip(ctx context.Context, v followView, req kmsg.Request) (kmsg.Response, error) {
	leader := v.leader
	r.mu.Lock()
	lc := r.mu.clients[leader]
	if lc == nil {
		lc = &leaderConn{}
		r.mu.clients[leader] = lc
	}
	r.mu.Unlock()
	addr := v.h.Leader().Addr
	if addr == "" {
		return nil, fmt.Errorf("rwnode: leader %d has no known address", leader)
	}
	deadline := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.c == nil {
		c, err := v.h.Dial(addr, fmt.Sprintf("kwal-remotewal-%d", r.cfg.BrokerID), time.Until(deadline))
		if err != nil {
			return nil, fmt.Errorf("rwnode: dial leader %d at %s: %w", leader, addr, err)
		}
		lc.c = c
	}
	resp, err := lc.c.RoundTrip(req, deadline)
	if err != nil {
		lc.c.Close()
		lc.c = nil
		return nil, fmt.Errorf("rwnode: request to leader %d: %w", leader, err)
	}
	return resp, nil
}

package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/topicpart"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Storage is the coordinator's view of the __consumer_offsets partitions
// this broker leads.
type Storage interface {
	// Append appends one batch to partition as leader at leaderEpoch and
	// returns once every in-sync replica has it (acks=all). A non-nil
	// error is a *kerr.Error as the coordinator answers it (NOT_COORDINATOR,
	// COORDINATOR_NOT_AVAILABLE, ...).
	Append(ctx context.Context, partition, leaderEpoch int32, batch []byte) error
	// Read returns whole batches from offset on (from the log start if
	// offset is before it) and the log end offset.
	Read(partition int32, offset int64, maxBytes int) (batches []byte, logEnd int64, err error)
}

// Config configures a Coordinator.
type Config struct {
	// Partitions is offsets.topic.num.partitions.
	Partitions int32
	Limits     Limits
	Storage    Storage
	Clock      clock.Clock
	Logger     *slog.Logger
	// NewMemberID makes member ids; default: client id, "-", a random UUID.
	NewMemberID func(clientID string) string
	// OffsetsRetention is offsets.retention.minutes: the committed offsets
	// of an empty group expire this long after the group emptied or the
	// offset was committed, whichever is later (KIP-211). 0: 7 days;
	// negative: never.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is
	// offsets.retention.check.interval.ms. 0: 10 minutes.
	OffsetsRetentionCheckInterval time.Duration
	// OnChange, if set, is called after anything Describe, List or Fetch
	// may answer differently has changed (a group stepped, a write applied
	// or failed, a partition loaded or unloaded, a timeout or expiry ran),
	// possibly with the coordinator's lock held: it must not block or call
	// back into the coordinator. It may be called when nothing changed.
	OnChange func()
}

// Validate fills defaults and rejects nonsense.
func (c *Config) Validate() error {
	switch {
	case c.Partitions < 1:
		return fmt.Errorf("group: offsets.topic.num.partitions %d", c.Partitions)
	case c.Storage == nil:
		return errors.New("group: no storage")
	case c.Limits.MinSessionTimeout <= 0 || c.Limits.MaxSessionTimeout < c.Limits.MinSessionTimeout:
		return fmt.Errorf("group: session timeouts [%v, %v]", c.Limits.MinSessionTimeout, c.Limits.MaxSessionTimeout)
	case c.Limits.InitialRebalanceDelay < 0:
		return fmt.Errorf("group: group.initial.rebalance.delay.ms %v", c.Limits.InitialRebalanceDelay)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NewMemberID == nil {
		c.NewMemberID = randomMemberID
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = 7 * 24 * time.Hour
	}
	if c.OffsetsRetentionCheckInterval <= 0 {
		c.OffsetsRetentionCheckInterval = 10 * time.Minute
	}
	return nil
}

func (c *Coordinator) changed() {
	if c.cfg.OnChange != nil {
		c.cfg.OnChange()
	}
}

func randomMemberID(clientID string) string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return clientID + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// entry is one loaded group and its committed offsets.
type entry struct {
	g         *Group
	partition int32
	offsets   map[topicpart.TopicPartition]Offset
	storedGen int32 // the generation whose store was queued last (-1: none)
}

// partState is one __consumer_offsets partition this broker leads.
type partState struct {
	epoch   int32
	loading bool
	writes  chan *write
	stop    chan struct{}
	loaded  chan struct{} // closed when loading ends (done or abandoned)
}

// write is one append of the partition's writer; apply runs under the
// coordinator lock after the append succeeded, so in-memory state follows
// the log's order.
type write struct {
	batch []byte
	apply func()
	fail  func(error) // under the lock, when the append failed
	done  chan error  // nil: nobody waits
}

// Coordinator is the classic group coordinator of one broker: it serves
// the groups whose __consumer_offsets partition the broker leads, loads a
// partition's groups when it becomes leader (Elected) and forgets them
// when it stops (Resigned).
//
// Concurrency: mu guards the partitions and groups; group state machines
// run under it and their callbacks only hand results to channels. One
// writer goroutine per led partition appends in order; one timer loop
// delivers timeouts. Close stops them.
type Coordinator struct {
	cfg    Config
	logger *slog.Logger
	kick   chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		parts      map[int32]*partState
		groups     map[string]*entry
		partitions int32     // of __consumer_offsets (UsePartitions)
		armed      time.Time // the deadline the timer loop waits for (zero: none)
		closed     bool
	}
}

// NewCoordinator validates cfg and starts the timer loop.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, logger: cfg.Logger, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	c.mu.parts = map[int32]*partState{}
	c.mu.groups = map[string]*entry{}
	c.mu.partitions = cfg.Partitions
	c.wg.Add(1)
	go c.timerLoop()
	return c, nil
}

// Close stops the coordinator; waiting requests get NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.mu.closed = true
	for p := range c.mu.parts {
		c.resignLocked(p)
	}
	c.mu.Unlock()
	close(c.stop)
	c.wg.Wait()
}

// PartitionFor is the group's __consumer_offsets partition.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return PartitionFor(groupID, c.mu.partitions)
}

// UsePartitions sets the partition count groups map onto, when
// __consumer_offsets exists with a count other than Config.Partitions. It
// applies only while no partition is led: groups already placed would
// move.
func (c *Coordinator) UsePartitions(n int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n == c.mu.partitions || n < 1 {
		return
	}
	if len(c.mu.parts) > 0 {
		c.logger.Error("__consumer_offsets changed its partition count while led; keeping the old count", "partitions", c.mu.partitions, "topic_partitions", n)
		return
	}
	c.logger.Warn("__consumer_offsets has a partition count other than offsets.topic.num.partitions; using the topic's", "configured", c.mu.partitions, "topic_partitions", n)
	c.mu.partitions = n
}

// Elected: this broker leads partition at leaderEpoch; its groups load in
// the background (requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS).
// The channel returned is closed when loading ends.
func (c *Coordinator) Elected(partition, leaderEpoch int32) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		done := make(chan struct{})
		close(done)
		return done
	}
	if ps := c.mu.parts[partition]; ps != nil {
		if ps.epoch == leaderEpoch {
			return ps.loaded
		}
		c.resignLocked(partition)
	}
	ps := &partState{epoch: leaderEpoch, loading: true, writes: make(chan *write, 64), stop: make(chan struct{}), loaded: make(chan struct{})}
	c.mu.parts[partition] = ps
	c.wg.Add(1)
	go c.load(partition, ps)
	return ps.loaded
}

// Resigned: this broker no longer leads partition.
func (c *Coordinator) Resigned(partition int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resignLocked(partition)
}

func (c *Coordinator) resignLocked(partition int32) {
	ps := c.mu.parts[partition]
	if ps == nil {
		return
	}
	delete(c.mu.parts, partition)
	close(ps.stop)
	now := c.cfg.Clock.Now()
	n := 0
	for id, e := range c.mu.groups {
		if e.partition == partition {
			e.g.Unload(now, kerr.NotCoordinator)
			delete(c.mu.groups, id)
			n++
		}
	}
	c.logger.Info("group coordinator unloaded partition", "partition", partition, "groups", n)
	c.changed()
}

// load replays the partition's log, then installs its groups and starts
// its writer.
func (c *Coordinator) load(partition int32, ps *partState) {
	defer c.wg.Done()
	defer close(ps.loaded)
	start := c.cfg.Clock.Now()
	groups := map[string]*GroupRecord{}
	offsets := map[string]map[topicpart.TopicPartition]Offset{}
	var from int64
	records := 0
	for {
		batches, end, err := c.cfg.Storage.Read(partition, from, 1<<20)
		if err != nil {
			c.logger.Error("load __consumer_offsets partition", "partition", partition, "offset", from, "err", err)
			return // stays loading until the next election
		}
		if from >= end || len(batches) == 0 {
			break
		}
		next, err := DecodeBatches(batches, func(offset int64, key, value []byte) error {
			rec, err := DecodeRecord(key, value)
			if err != nil {
				// Refused, not absorbed: a record we cannot read is
				// skipped with a log line, the rest still loads.
				c.logger.Error("skipping unreadable __consumer_offsets record", "partition", partition, "offset", offset, "err", err)
				return nil
			}
			records++
			if rec.IsGroup {
				groups[rec.Key.Group] = rec.GroupValue
				if rec.GroupValue == nil {
					delete(offsets, rec.Key.Group)
				}
				return nil
			}
			tp := topicpart.TopicPartition{Topic: rec.Key.Topic, Partition: rec.Key.Partition}
			m := offsets[rec.Key.Group]
			if rec.Offset == nil {
				delete(m, tp)
				return nil
			}
			if m == nil {
				m = map[topicpart.TopicPartition]Offset{}
				offsets[rec.Key.Group] = m
			}
			m[tp] = *rec.Offset
			return nil
		})
		if err != nil {
			c.logger.Error("load __consumer_offsets partition", "partition", partition, "offset", from, "err", err)
			return
		}
		if next <= from {
			break
		}
		from = next
		select {
		case <-ps.stop:
			return
		default:
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.parts[partition] != ps {
		return // resigned meanwhile
	}
	now := c.cfg.Clock.Now()
	n := 0
	for id, rec := range groups {
		if rec == nil {
			continue
		}
		e := &entry{g: Restore(id, *rec, c.cfg.Limits, c.cfg.NewMemberID, now), partition: partition, offsets: offsets[id], storedGen: -1}
		if e.offsets == nil {
			e.offsets = map[topicpart.TopicPartition]Offset{}
		}
		c.mu.groups[id] = e
		n++
	}
	for id, m := range offsets {
		if _, ok := c.mu.groups[id]; !ok && len(m) > 0 {
			c.mu.groups[id] = &entry{g: New(id, c.cfg.Limits, c.cfg.NewMemberID, now), partition: partition, offsets: m, storedGen: -1}
			n++
		}
	}
	ps.loading = false
	c.wg.Add(1)
	go c.writer(partition, ps)
	c.logger.Info("group coordinator loaded partition", "partition", partition, "leader_epoch", ps.epoch,
		"groups", n, "records", records, "log_end", from, "took", c.cfg.Clock.Since(start))
	c.kickTimer()
	c.changed()
}

func (c *Coordinator) writer(partition int32, ps *partState) {
	defer c.wg.Done()
	for {
		select {
		case <-ps.stop:
			return
		case w := <-ps.writes:
			err := c.cfg.Storage.Append(context.Background(), partition, ps.epoch, w.batch)
			if (err == nil && w.apply != nil) || (err != nil && w.fail != nil) {
				c.mu.Lock()
				switch {
				case c.mu.parts[partition] != ps:
					err = kerr.NotCoordinator
				case err == nil:
					w.apply()
				default:
					w.fail(err)
				}
				c.mu.Unlock()
				c.kickTimer()
				c.changed()
			}
			if err != nil {
				c.logger.Warn("__consumer_offsets append", "partition", partition, "err", err)
			}
			if w.done != nil {
				w.done <- err
			}
		}
	}
}

// enqueueLocked hands a write to the partition's writer.
func (c *Coordinator) enqueueLocked(ps *partState, w *write) bool {
	select {
	case ps.writes <- w:
		return true
	case <-ps.stop:
		return false
	default:
	}
	// The queue is full: wait outside the lock.
	c.mu.Unlock()
	defer c.mu.Lock()
	select {
	case ps.writes <- w:
		return true
	case <-ps.stop:
		return false
	}
}

// lookupLocked finds the group's partition and group; with create, an
// unknown group is made.
func (c *Coordinator) lookupLocked(groupID string, create bool) (*partState, *entry, *kerr.Error) {
	if c.mu.closed {
		return nil, nil, kerr.NotCoordinator
	}
	p := PartitionFor(groupID, c.mu.partitions)
	ps := c.mu.parts[p]
	switch {
	case ps == nil:
		return nil, nil, kerr.NotCoordinator
	case ps.loading:
		return nil, nil, kerr.CoordinatorLoadInProgress
	}
	e := c.mu.groups[groupID]
	if e == nil && create {
		e = &entry{g: New(groupID, c.cfg.Limits, c.cfg.NewMemberID, c.cfg.Clock.Now()), partition: p, offsets: map[topicpart.TopicPartition]Offset{}, storedGen: -1}
		c.mu.groups[groupID] = e
	}
	return ps, e, nil
}

// afterLocked persists a group whose generation settled and re-arms the
// timer loop if the group now has an earlier deadline than the loop's.
func (c *Coordinator) afterLocked(ps *partState, e *entry) {
	defer c.changed()
	defer c.kickIfEarlierLocked(e)
	if gen, ok := e.g.Storing(); ok && e.storedGen != gen {
		// The leader's assignment: stored before SyncGroup answers.
		e.storedGen = gen
		e.g.TakeDirty()
		g := e.g
		c.enqueueLocked(ps, &write{
			batch: EncodeBatch([]KV{{GroupRecordKey(g.ID()), EncodeGroup(g.Record())}}, c.cfg.Clock.Now().UnixMilli()),
			apply: func() { g.Stored(c.cfg.Clock.Now(), gen, nil) },
			fail:  func(err error) { g.Stored(c.cfg.Clock.Now(), gen, asKerr(err)) },
		})
		return
	}
	st := e.g.State()
	if st != Stable && st != Empty {
		return
	}
	if !e.g.TakeDirty() {
		return
	}
	if st == Empty && e.g.Generation() == 0 && len(e.offsets) == 0 {
		return // never had a generation
	}
	rec := EncodeGroup(e.g.Record())
	c.enqueueLocked(ps, &write{batch: EncodeBatch([]KV{{GroupRecordKey(e.g.ID()), rec}}, c.cfg.Clock.Now().UnixMilli())})
}

// kickIfEarlierLocked wakes the timer loop only when e's next deadline
// is before the one the loop waits for: a heartbeat, which moves a
// deadline later, costs the loop nothing (it wakes early at worst).
func (c *Coordinator) kickIfEarlierLocked(e *entry) {
	d := e.g.NextDeadline()
	if d.IsZero() || (!c.mu.armed.IsZero() && !d.Before(c.mu.armed)) {
		return
	}
	c.mu.armed = d
	c.kickTimer()
}

func (c *Coordinator) kickTimer() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// wait blocks for a state machine's answer; the context or Close ends it.
func wait[T any](ctx context.Context, c *Coordinator, ch chan T, fail T) T {
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
	case <-c.stop:
	}
	select {
	case r := <-ch:
		return r
	default:
		return fail
	}
}

// Join serves a JoinGroup; it blocks until the join phase ends.
func (c *Coordinator) Join(ctx context.Context, groupID string, req JoinRequest) JoinResult {
	ch := make(chan JoinResult, 1)
	c.mu.Lock()
	ps, e, err := c.lookupLocked(groupID, req.MemberID == "")
	switch {
	case err != nil:
		c.mu.Unlock()
		return errJoin(err, req.MemberID)
	case e == nil:
		c.mu.Unlock()
		return errJoin(kerr.UnknownMemberID, req.MemberID)
	}
	e.g.Join(c.cfg.Clock.Now(), req, func(r JoinResult) { ch <- r })
	if e.g.Unused() && len(e.offsets) == 0 {
		delete(c.mu.groups, groupID) // a refused first join leaves nothing behind
	}
	c.afterLocked(ps, e)
	c.mu.Unlock()
	return wait(ctx, c, ch, errJoin(kerr.RebalanceInProgress, req.MemberID))
}

// Sync serves a SyncGroup; it blocks until the leader's assignment.
func (c *Coordinator) Sync(ctx context.Context, groupID string, req SyncRequest) SyncResult {
	ch := make(chan SyncResult, 1)
	c.mu.Lock()
	ps, e, err := c.lookupLocked(groupID, false)
	switch {
	case err != nil:
		c.mu.Unlock()
		return SyncResult{Err: err}
	case e == nil:
		c.mu.Unlock()
		return SyncResult{Err: kerr.UnknownMemberID}
	}
	e.g.Sync(c.cfg.Clock.Now(), req, func(r SyncResult) { ch <- r })
	c.afterLocked(ps, e)
	c.mu.Unlock()
	return wait(ctx, c, ch, SyncResult{Err: kerr.RebalanceInProgress})
}

// Heartbeat serves a Heartbeat.
func (c *Coordinator) Heartbeat(groupID, memberID, instanceID string, generation int32) *kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, e, err := c.lookupLocked(groupID, false)
	switch {
	case err != nil:
		return err
	case e == nil:
		return kerr.UnknownMemberID
	}
	err = e.g.Heartbeat(c.cfg.Clock.Now(), memberID, instanceID, generation)
	c.afterLocked(ps, e)
	return err
}

// Leave serves a LeaveGroup: a top-level error, or one per member.
func (c *Coordinator) Leave(groupID string, members []LeaveMember) (*kerr.Error, []*kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, e, err := c.lookupLocked(groupID, false)
	switch {
	case err != nil:
		return err, nil
	case e == nil:
		return kerr.UnknownMemberID, nil
	}
	errs := e.g.Leave(c.cfg.Clock.Now(), members)
	c.afterLocked(ps, e)
	return nil, errs
}

// CommitRequest is an OffsetCommit for one group.
type CommitRequest struct {
	MemberID, InstanceID string
	Generation           int32
	Offsets              map[topicpart.TopicPartition]Offset
}

// Commit validates and appends committed offsets; it returns once they are
// replicated (acks=all), with the error every partition gets.
func (c *Coordinator) Commit(ctx context.Context, groupID string, req CommitRequest) *kerr.Error {
	c.mu.Lock()
	ps, e, err := c.lookupLocked(groupID, req.Generation < 0)
	if err == nil && e == nil {
		err = kerr.IllegalGeneration // Kafka: no such group, a generation given
	}
	if err == nil {
		err = e.g.CheckCommit(c.cfg.Clock.Now(), req.MemberID, req.InstanceID, req.Generation)
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if len(req.Offsets) == 0 {
		c.mu.Unlock()
		return nil
	}
	kvs := make([]KV, 0, len(req.Offsets))
	for tp, o := range req.Offsets {
		kvs = append(kvs, KV{OffsetRecordKey(OffsetKey{Group: groupID, Topic: tp.Topic, Partition: tp.Partition}), EncodeOffset(o)})
	}
	sort.Slice(kvs, func(i, j int) bool { return string(kvs[i].Key) < string(kvs[j].Key) })
	w := &write{batch: EncodeBatch(kvs, c.cfg.Clock.Now().UnixMilli()), done: make(chan error, 1), apply: func() {
		if cur := c.mu.groups[groupID]; cur != nil {
			for tp, o := range req.Offsets {
				cur.offsets[tp] = o
			}
		}
	}}
	ok := c.enqueueLocked(ps, w)
	c.mu.Unlock()
	if !ok {
		return kerr.NotCoordinator
	}
	select {
	case err := <-w.done:
		return asKerr(err)
	case <-ctx.Done():
		return kerr.RequestTimedOut
	case <-ps.stop:
		return kerr.NotCoordinator
	}
}

func asKerr(err error) *kerr.Error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return kerr.UnknownServerError
}

// Fetch returns a group's committed offsets: of tps, or all with tps nil.
// A partition without a commit is absent.
func (c *Coordinator) Fetch(groupID string, tps []topicpart.TopicPartition) (map[topicpart.TopicPartition]Offset, *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, e, err := c.lookupLocked(groupID, false)
	if err != nil {
		return nil, err
	}
	out := map[topicpart.TopicPartition]Offset{}
	if e == nil || e.g.State() == Dead {
		return out, nil
	}
	if tps == nil {
		for tp, o := range e.offsets {
			out[tp] = o
		}
		return out, nil
	}
	for _, tp := range tps {
		if o, ok := e.offsets[tp]; ok {
			out[tp] = o
		}
	}
	return out, nil
}

// Listed is a group as ListGroups shows it.
type Listed struct {
	ID, ProtocolType string
	State            State
}

// List returns the groups this coordinator serves, by id.
func (c *Coordinator) List() []Listed {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Listed
	for id, e := range c.mu.groups {
		if e.g.State() != Dead {
			out = append(out, Listed{ID: id, ProtocolType: e.g.ProtocolType(), State: e.g.State()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Described is a group as DescribeGroups shows it.
type Described struct {
	State        State
	ProtocolType string
	Protocol     string
	Members      []MemberInfo
}

// Describe returns a group's state; an unknown group is Dead, as Kafka.
func (c *Coordinator) Describe(groupID string) (Described, *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, e, err := c.lookupLocked(groupID, false)
	if err != nil {
		return Described{}, err
	}
	if e == nil {
		return Described{State: Dead}, nil
	}
	d := Described{State: e.g.State(), ProtocolType: e.g.ProtocolType(), Members: e.g.Members()}
	if d.State == Stable {
		d.Protocol = e.g.Protocol()
	}
	return d, nil
}

// Delete deletes an empty group and its offsets (DeleteGroups): group and
// offset tombstones are appended, acks=all.
func (c *Coordinator) Delete(ctx context.Context, groupID string) *kerr.Error {
	c.mu.Lock()
	ps, e, err := c.lookupLocked(groupID, false)
	if err == nil && e == nil {
		err = kerr.GroupIDNotFound
	}
	if err == nil {
		err = e.g.Delete(c.cfg.Clock.Now())
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	kvs := []KV{{GroupRecordKey(groupID), nil}}
	for tp := range e.offsets {
		kvs = append(kvs, KV{OffsetRecordKey(OffsetKey{Group: groupID, Topic: tp.Topic, Partition: tp.Partition}), nil})
	}
	w := &write{batch: EncodeBatch(kvs, c.cfg.Clock.Now().UnixMilli()), done: make(chan error, 1), apply: func() {
		if c.mu.groups[groupID] == e {
			delete(c.mu.groups, groupID)
		}
	}, fail: func(error) {
		// The tombstones were not written: the group lives on, empty.
		e.g.setState(Empty, c.cfg.Clock.Now())
	}}
	ok := c.enqueueLocked(ps, w)
	c.mu.Unlock()
	c.changed() // the group is dead now, whatever the write does
	if !ok {
		return kerr.NotCoordinator
	}
	select {
	case err := <-w.done:
		return asKerr(err)
	case <-ctx.Done():
		return kerr.RequestTimedOut
	case <-ps.stop:
		return kerr.NotCoordinator
	}
}

// DeleteOffsets deletes a group's committed offsets of tps
// (OffsetDelete). A consumer group still subscribed to a topic keeps its
// offsets: GROUP_SUBSCRIBED_TO_TOPIC for those partitions.
func (c *Coordinator) DeleteOffsets(ctx context.Context, groupID string, tps []topicpart.TopicPartition) (*kerr.Error, map[topicpart.TopicPartition]*kerr.Error) {
	c.mu.Lock()
	ps, e, err := c.lookupLocked(groupID, false)
	if err == nil && (e == nil || e.g.State() == Dead) {
		err = kerr.GroupIDNotFound
	}
	if err != nil {
		c.mu.Unlock()
		return err, nil
	}
	subscribed := map[string]bool{}
	if e.g.State() != Empty {
		if e.g.ProtocolType() != "consumer" {
			c.mu.Unlock()
			return kerr.NonEmptyGroup, nil
		}
		for _, md := range e.g.SelectedMetadata() {
			var m kmsg.ConsumerMemberMetadata
			if m.ReadFrom(md) == nil {
				for _, t := range m.Topics {
					subscribed[t] = true
				}
			}
		}
	}
	per := map[topicpart.TopicPartition]*kerr.Error{}
	var kvs []KV
	var del []topicpart.TopicPartition
	for _, tp := range tps {
		if subscribed[tp.Topic] {
			per[tp] = kerr.GroupSubscribedToTopic
			continue
		}
		per[tp] = nil
		if _, ok := e.offsets[tp]; ok {
			del = append(del, tp)
			kvs = append(kvs, KV{OffsetRecordKey(OffsetKey{Group: groupID, Topic: tp.Topic, Partition: tp.Partition}), nil})
		}
	}
	if len(kvs) == 0 {
		c.mu.Unlock()
		return nil, per
	}
	w := &write{batch: EncodeBatch(kvs, c.cfg.Clock.Now().UnixMilli()), done: make(chan error, 1), apply: func() {
		for _, tp := range del {
			delete(e.offsets, tp)
		}
	}}
	ok := c.enqueueLocked(ps, w)
	c.mu.Unlock()
	if !ok {
		return kerr.NotCoordinator, nil
	}
	select {
	case err := <-w.done:
		if ke := asKerr(err); ke != nil {
			return ke, nil
		}
		return nil, per
	case <-ctx.Done():
		return kerr.RequestTimedOut, nil
	case <-ps.stop:
		return kerr.NotCoordinator, nil
	}
}

// ExpireDue delivers every timeout due now and returns the next deadline
// (zero: none). The timer loop calls it; tests on a manual clock may too.
func (c *Coordinator) ExpireDue() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	var next time.Time
	ids := make([]string, 0, len(c.mu.groups))
	for id := range c.mu.groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := c.mu.groups[id]
		if d := e.g.NextDeadline(); !d.IsZero() && !now.Before(d) {
			e.g.Expire(now)
			if ps := c.mu.parts[e.partition]; ps != nil && !ps.loading {
				st := e.g.State()
				if (st == Stable || st == Empty) && e.g.TakeDirty() {
					c.enqueueWriteNoWaitLocked(ps, e)
				}
			}
		}
		if d := e.g.NextDeadline(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	c.mu.armed = next
	return next
}

// ExpireOffsets deletes, with tombstones, the committed offsets of empty
// groups older than offsets.retention.minutes (counted from when the
// group emptied or the offset was committed, whichever is later, as
// KIP-211), and the groups left with nothing. It returns how many offsets
// it expired. The timer loop calls it every
// offsets.retention.check.interval.ms; tests may too.
func (c *Coordinator) ExpireOffsets() int {
	if c.cfg.OffsetsRetention < 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	n := 0
	for id, e := range c.mu.groups {
		ps := c.mu.parts[e.partition]
		if ps == nil || ps.loading || e.g.State() != Empty {
			continue
		}
		var kvs []KV
		expired := map[topicpart.TopicPartition]Offset{}
		for tp, o := range e.offsets {
			base := o.CommitTime
			if e.g.StateSince().After(base) {
				base = e.g.StateSince()
			}
			if now.Sub(base) >= c.cfg.OffsetsRetention {
				expired[tp] = o
				kvs = append(kvs, KV{OffsetRecordKey(OffsetKey{Group: id, Topic: tp.Topic, Partition: tp.Partition}), nil})
			}
		}
		if len(kvs) == 0 {
			continue
		}
		last := len(expired) == len(e.offsets)
		if last {
			kvs = append(kvs, KV{GroupRecordKey(id), nil})
		}
		n += len(expired)
		groupID, e := id, e
		w := &write{batch: EncodeBatch(kvs, now.UnixMilli()), apply: func() {
			for tp, o := range expired {
				if cur, ok := e.offsets[tp]; ok && cur.CommitTime.Equal(o.CommitTime) && cur.Offset == o.Offset {
					delete(e.offsets, tp) // not committed again meanwhile
				}
			}
			if last && len(e.offsets) == 0 && e.g.Idle() && c.mu.groups[groupID] == e {
				delete(c.mu.groups, groupID)
			}
		}}
		select {
		case ps.writes <- w:
		default:
			c.logger.Warn("__consumer_offsets write queue full; offset expiry retried at the next check", "group", id)
		}
	}
	if n > 0 {
		c.logger.Info("expired committed offsets of empty groups", "offsets", n, "retention", c.cfg.OffsetsRetention)
	}
	return n
}

// enqueueWriteNoWaitLocked queues a group record without blocking (a full
// queue drops it with a log line; the next change writes it again).
func (c *Coordinator) enqueueWriteNoWaitLocked(ps *partState, e *entry) {
	w := &write{batch: EncodeBatch([]KV{{GroupRecordKey(e.g.ID()), EncodeGroup(e.g.Record())}}, c.cfg.Clock.Now().UnixMilli())}
	select {
	case ps.writes <- w:
	default:
		c.logger.Warn("__consumer_offsets write queue full; group record not written", "group", e.g.ID())
	}
}

func (c *Coordinator) timerLoop() {
	defer c.wg.Done()
	t := c.cfg.Clock.NewTimer(time.Hour)
	defer t.Stop()
	ret := c.cfg.Clock.NewTimer(c.cfg.OffsetsRetentionCheckInterval)
	defer ret.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		case <-t.C():
		case <-ret.C():
			c.ExpireOffsets()
			ret.Reset(c.cfg.OffsetsRetentionCheckInterval)
		}
		next := c.ExpireDue()
		c.changed()
		d := time.Hour
		if !next.IsZero() {
			d = max(next.Sub(c.cfg.Clock.Now()), 0)
		}
		t.Reset(d)
	}
}

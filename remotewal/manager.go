package remotewal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// Log is what a task needs of a leader partition's log; *kafkalog.Log
// implements it.
type Log interface {
	LogEndOffset() int64
	// EndPosition is the log end offset and where it lies (the active
	// segment's base offset and size), without I/O.
	EndPosition() (int64, kafkalog.SegmentPosition)
	PositionOf(offset int64) (kafkalog.SegmentPosition, error)
	Slice(fromOffset int64, maxBytes int) (kafkalog.SegmentSlice, error)
	// SliceAtInto is Slice from a known position, without the index
	// lookup, read into a buffer alloc returns (kafkalog.Log.SliceAtInto).
	SliceAtInto(at kafkalog.SegmentPosition, fromOffset int64, maxBytes int, alloc func(n int) []byte) (kafkalog.SegmentSlice, error)
	AppendNotify() <-chan struct{}
}

var _ Log = (*kafkalog.Log)(nil)

// Sink receives cut slices; *combiner.Combiner implements it. Submit blocks
// while the combiner's queue is full and returns ctx's error if ctx ends first.
// A slice's Data is the sink's until it calls the slice's Done: the task
// then reads later slices into the same memory (combiner.Slice).
type Sink interface {
	Submit(ctx context.Context, s combiner.Slice) error
}

// PackCaller is a Sink that paces objects on an interval of its own and asks
// the tasks for what they hold when one is due; *combiner.Combiner
// implements it. A task whose sink is a PackCaller holds bytes below
// UploadBytes in its log, announced (Announce), until the sink calls for
// them (Ticket.Called), then submits them and withdraws: a partition gives
// each object one slice, and no task runs a timer. With any other Sink a
// task cuts such bytes after Interval.
type PackCaller interface {
	Sink
	Announce(since time.Time) combiner.Ticket
	Withdraw(combiner.Ticket)
}

// Config configures a Manager.
type Config struct {
	// ThreadPoolSize is remote.wal.log.manager.thread.pool.size: how many
	// tasks may read and submit at once. Default 4.
	ThreadPoolSize int
	// UploadBytes cuts a slice once this many bytes are pending. Default 256 KiB.
	UploadBytes int
	// Interval cuts a slice once the oldest pending byte has waited this
	// long, when the sink is not a PackCaller (which calls for the bytes
	// itself); it is also the retry delay after a failed cut. Default 5 ms.
	Interval time.Duration
	// MaxSliceBytes caps one slice. Default 1 MiB; must be ≥ UploadBytes.
	MaxSliceBytes int

	Clock  clock.Clock
	Logger *slog.Logger
}

// Validate fills defaults and rejects nonsense.
func (c *Config) Validate() error {
	if c.ThreadPoolSize == 0 {
		c.ThreadPoolSize = 4
	}
	if c.UploadBytes == 0 {
		c.UploadBytes = 256 << 10
	}
	if c.Interval == 0 {
		c.Interval = 5 * time.Millisecond
	}
	if c.MaxSliceBytes == 0 {
		c.MaxSliceBytes = 1 << 20
		if c.MaxSliceBytes < c.UploadBytes {
			c.MaxSliceBytes = c.UploadBytes
		}
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.ThreadPoolSize < 1:
		return fmt.Errorf("remotewal: thread pool size %d: must be ≥ 1", c.ThreadPoolSize)
	case c.UploadBytes < 1:
		return fmt.Errorf("remotewal: upload bytes %d: must be ≥ 1", c.UploadBytes)
	case c.Interval < 0:
		return fmt.Errorf("remotewal: interval %v: must be ≥ 0", c.Interval)
	case c.MaxSliceBytes < c.UploadBytes:
		return fmt.Errorf("remotewal: max slice bytes %d below upload bytes %d", c.MaxSliceBytes, c.UploadBytes)
	}
	return nil
}

// CutReason says why a slice was cut.
type CutReason int

const (
	CutSize     CutReason = iota // pending bytes reached UploadBytes
	CutInterval                  // the oldest pending byte waited Interval, or the combiner called for it
	CutBoundary                  // a segment roll or an epoch change ends the slice
)

// Metrics are the Manager's counters.
type Metrics struct {
	Tasks          int
	Slices         int64
	Bytes          int64
	CutsBySize     int64
	CutsByInterval int64
	CutsByBoundary int64
	Errors         int64
	Resubmits      int64 // slices re-cut after the combiner gave them up
}

// ErrStopped is returned for a partition the Manager is not running.
var ErrStopped = errors.New("remotewal: partition task not running")

// Manager runs one task per leader partition.
type Manager struct {
	cfg    Config
	sink   Sink
	caller PackCaller // sink, if it calls for held bytes; else nil
	pool   chan struct{}
	// bufs holds the buffers slices are read into: each goes back when
	// the sink is done with its slice (Done), so that cutting does not
	// fault in fresh memory for every slice (at 50 MB/s, 50 MB/s of page
	// faults). A buffer is a power of two in size: what the tasks hold in
	// buffers is at most twice what they have submitted and not yet been
	// told of.
	bufs objstore.BufferPool

	mu struct {
		sync.Mutex
		tasks map[metadata.TopicPartition]*task
		// stopped is, per partition, the leader epoch of its last stopped
		// task and where that task's submitted slices ended: a task
		// started again in the same epoch never cuts below it, so the
		// epoch's entries stay in offset order (invariant 4) whatever the
		// caller asks.
		stopped map[metadata.TopicPartition]stoppedTask
		closed  bool
	}

	slices, bytes, bySize, byInterval, byBoundary, errs, resubmits atomic.Int64
}

// NewManager returns a Manager that submits to sink.
func NewManager(cfg Config, sink Sink) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, sink: sink, pool: make(chan struct{}, cfg.ThreadPoolSize)}
	m.caller, _ = sink.(PackCaller)
	m.mu.tasks = make(map[metadata.TopicPartition]*task)
	m.mu.stopped = make(map[metadata.TopicPartition]stoppedTask)
	return m, nil
}

type stoppedTask struct {
	epoch int32
	next  int64
}

// StartPartition starts the task of a partition this broker now leads at
// leaderEpoch, cutting from fromOffset: the log end offset when leadership
// began, or below it where the previous leader appended a range it never
// uploaded (UploadStart). Every slice is submitted in leaderEpoch, the
// uploader's epoch, even one of batches an older leader appended. A task
// started again in the epoch of the partition's last stopped task starts
// no lower than where that one's submitted slices ended.
func (m *Manager) StartPartition(tp metadata.TopicPartition, log Log, leaderEpoch int32, fromOffset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return fmt.Errorf("remotewal: start %s: manager closed", tp)
	}
	if _, ok := m.mu.tasks[tp]; ok {
		return fmt.Errorf("remotewal: start %s: task already running", tp)
	}
	if st, ok := m.mu.stopped[tp]; ok && st.epoch == leaderEpoch && fromOffset < st.next {
		fromOffset = min(st.next, log.LogEndOffset())
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &task{m: m, tp: tp, log: log, epoch: leaderEpoch, cancel: cancel, done: make(chan struct{}), failWake: make(chan struct{}, 1), idle: make(chan struct{}, 1), rewind: -1}
	t.next.Store(fromOffset)
	t.published.Store(fromOffset)
	m.mu.tasks[tp] = t
	go t.run(ctx)
	return nil
}

// StopPartition stops a partition's task (leadership lost or partition
// deleted) and waits for it to exit. Slices already submitted stay submitted.
func (m *Manager) StopPartition(tp metadata.TopicPartition) {
	m.mu.Lock()
	t := m.mu.tasks[tp]
	delete(m.mu.tasks, tp)
	m.mu.Unlock()
	if t != nil {
		t.cancel()
		<-t.done
		m.mu.Lock()
		if _, again := m.mu.tasks[tp]; !again {
			m.mu.stopped[tp] = stoppedTask{epoch: t.epoch, next: t.next.Load()}
		}
		m.mu.Unlock()
	}
}

// SubmittedOffset returns the offset up to which (exclusive) the partition's
// bytes have been handed to the combiner.
func (m *Manager) SubmittedOffset(tp metadata.TopicPartition) (int64, error) {
	m.mu.Lock()
	t := m.mu.tasks[tp]
	m.mu.Unlock()
	if t == nil {
		return 0, fmt.Errorf("%w: %s", ErrStopped, tp)
	}
	return t.next.Load(), nil
}

// PublishedOffset returns the offset up to which (exclusive) the partition's
// slices have their metadata published.
func (m *Manager) PublishedOffset(tp metadata.TopicPartition) (int64, error) {
	m.mu.Lock()
	t := m.mu.tasks[tp]
	m.mu.Unlock()
	if t == nil {
		return 0, fmt.Errorf("%w: %s", ErrStopped, tp)
	}
	return t.published.Load(), nil
}

// Metrics returns a snapshot of the counters.
func (m *Manager) Metrics() Metrics {
	m.mu.Lock()
	n := len(m.mu.tasks)
	m.mu.Unlock()
	return Metrics{
		Tasks: n, Slices: m.slices.Load(), Bytes: m.bytes.Load(),
		CutsBySize: m.bySize.Load(), CutsByInterval: m.byInterval.Load(),
		CutsByBoundary: m.byBoundary.Load(), Errors: m.errs.Load(), Resubmits: m.resubmits.Load(),
	}
}

// Close stops every task and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	m.mu.closed = true
	tasks := m.mu.tasks
	m.mu.tasks = map[metadata.TopicPartition]*task{}
	m.mu.Unlock()
	for _, t := range tasks {
		t.cancel()
	}
	for _, t := range tasks {
		<-t.done
	}
}

type failedSlice struct {
	base int64
	err  error
}

type task struct {
	m      *Manager
	tp     metadata.TopicPartition
	log    Log
	epoch  int32
	cancel context.CancelFunc
	done   chan struct{}

	next atomic.Int64 // owned by the task goroutine; read by SubmittedOffset
	// published is one past the last offset whose metadata the combiner
	// published.
	published atomic.Int64
	// failed receives slices the combiner gave up on. The task then stops
	// cutting, waits until none of its slices is held by the combiner
	// (inflight, idle), and re-cuts its log from the lowest given-up base
	// offset, in order: the combiner gives up every later slice of the
	// partition until then (combiner.ErrEarlierSliceFailed), so entries are
	// published in offset order (invariant 4) and followers never wait on
	// a gap that only the leader could fill. Only the lowest given-up
	// base matters, so failures fold into one value (a per-task queue of
	// them cost 1,024 slots per partition, hundreds of MB at 10,000
	// partitions, and overflowed by dropping).
	failMu struct {
		sync.Mutex
		pending bool
		lowest  failedSlice
	}
	// failWake gets a token when a failure is folded in; cap 1.
	failWake chan struct{}
	// inflight counts slices submitted and not yet done; idle gets a
	// token when it drops to zero.
	inflight atomic.Int64
	idle     chan struct{}
	// rewind is the offset to re-cut from once idle; -1: none. Owned by
	// the task goroutine.
	rewind int64
	// rewindCause is the first error of the current rewind.
	rewindCause error
	// pendingSince is when the task first saw bytes past next; zero when
	// nothing is pending.
	pendingSince time.Time
	// nextPos is where next lies in the log, when nextPosKnown: after a
	// cut it is the slice's end, so the bytes pending are the active
	// segment's size minus it (EndPosition), without a lookup per append.
	// Owned by the task goroutine.
	nextPos      kafkalog.SegmentPosition
	nextPosKnown bool
	// ticket is the task's announcement to a PackCaller sink while it
	// holds bytes below UploadBytes; called is set once the sink called
	// for them. Owned by the task goroutine.
	ticket combiner.Ticket
	called bool
}

func (t *task) run(ctx context.Context) {
	defer close(t.done)
	defer t.withdraw()
	cfg := &t.m.cfg
	// The timer is made at the first wait, not here stopped: made, it is
	// armed (for an hour) until stopped, an instant in which a test
	// waiting for the task to arm its timer would take it for the wait.
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		// Take the notification channel before reading the log end, so an
		// append between the two cannot be missed.
		notify := t.log.AppendNotify()
		if t.rewind >= 0 && t.inflight.Load() == 0 {
			t.rewindNow()
		}
		var due time.Time
		var err error
		if t.rewind < 0 {
			due, err = t.step(ctx)
		} else {
			// Nothing is cut until the rewind: hold nothing announced.
			t.withdraw()
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			t.withdraw()
			t.nextPosKnown = false
			t.m.errs.Add(1)
			cfg.Logger.Error("remotewal: cutting slice failed; will retry", "partition", t.tp.String(), "offset", t.next.Load(), "err", err)
			wait := cfg.Interval
			if wait <= 0 {
				wait = time.Millisecond
			}
			due = cfg.Clock.Now().Add(wait)
		}
		var timerC <-chan time.Time
		if !due.IsZero() {
			// Armed for the instant step decided: on a manual clock a
			// test may move the clock meanwhile (clock.ResetAt).
			if timer == nil {
				timer = cfg.Clock.NewTimer(time.Hour)
			}
			clock.ResetAt(timer, cfg.Clock, due)
			timerC = timer.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-notify:
		case <-timerC:
			timerC = nil // fired: nothing to stop
		case <-t.ticket.Called():
			t.called = true
		case <-t.failWake:
			t.takeFailed(ctx)
		case <-t.idle:
		}
		if timerC != nil {
			timer.Stop()
		}
	}
}

// withdraw ends the task's announcement, if any.
func (t *task) withdraw() {
	if t.ticket.Live() {
		t.m.caller.Withdraw(t.ticket)
		t.ticket = combiner.Ticket{}
	}
	t.called = false
}

// step cuts every slice that is due and returns when the oldest pending
// byte comes due (zero: wait for the next append, or for the sink to call
// for the bytes, only).
func (t *task) step(ctx context.Context) (time.Time, error) {
	cfg := &t.m.cfg
	for {
		next := t.next.Load()
		leo, end := t.log.EndPosition()
		if next >= leo {
			t.pendingSince = time.Time{}
			// Caught up: a called task has answered.
			t.withdraw()
			return time.Time{}, nil
		}
		now := cfg.Clock.Now()
		if t.pendingSince.IsZero() {
			t.pendingSince = now
		}
		pending, boundary, err := t.pendingBytes(next, end)
		if err != nil {
			return time.Time{}, err
		}
		age := now.Sub(t.pendingSince)
		var reason CutReason
		switch {
		case pending >= int64(cfg.UploadBytes):
			reason = CutSize
		case boundary:
			reason = CutBoundary
		case t.called:
			reason = CutInterval
		case t.m.caller != nil:
			// Hold the bytes until the sink calls for them.
			if !t.ticket.Live() {
				t.ticket = t.m.caller.Announce(t.pendingSince)
			}
			return time.Time{}, nil
		case age >= cfg.Interval:
			reason = CutInterval
		default:
			return t.pendingSince.Add(cfg.Interval), nil
		}
		if err := t.cut(ctx, next, reason); err != nil {
			return time.Time{}, err
		}
		// Bytes still pending after this cut arrived after pendingSince, but
		// we do not know when; treat them as pending from now, which can
		// only delay their cut by less than one Interval.
		t.pendingSince = time.Time{}
	}
}

// pendingBytes returns the bytes appended at or after offset next, whose
// log end lies at end, and whether they span a segment roll (so a cut is
// due regardless of size). Where next lies is known after a cut; it is
// looked up (PositionOf) only at the start, after a rewind or error, and
// once after each roll.
func (t *task) pendingBytes(next int64, end kafkalog.SegmentPosition) (int64, bool, error) {
	if !t.nextPosKnown || t.nextPos.SegmentBaseOffset != end.SegmentBaseOffset {
		pos, err := t.log.PositionOf(next)
		if err != nil {
			return 0, false, fmt.Errorf("position of offset %d: %w", next, err)
		}
		t.nextPos, t.nextPosKnown = pos, true
	}
	if t.nextPos.SegmentBaseOffset != end.SegmentBaseOffset {
		// next lies in an older segment than the active one: what is
		// left of it ends at the roll.
		return 0, true, nil
	}
	return end.Position - t.nextPos.Position, false, nil
}

func (t *task) cut(ctx context.Context, next int64, reason CutReason) error {
	cfg := &t.m.cfg
	select {
	case t.m.pool <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-t.m.pool }()

	var s kafkalog.SegmentSlice
	var err error
	var buf []byte // what s.Data is read into, from the Manager's pool
	if t.nextPosKnown {
		s, err = t.log.SliceAtInto(t.nextPos, next, cfg.MaxSliceBytes, func(n int) []byte {
			buf = t.m.bufs.Get(n)
			return buf
		})
		if err != nil || len(s.Data) == 0 || len(buf) == 0 || &s.Data[0] != &buf[0] {
			t.m.bufs.Put(buf) // not holding the slice's bytes
			buf = nil
		}
		if errors.Is(err, kafkalog.ErrNotBatchBoundary) {
			// The remembered position is stale (the log changed under
			// us): look it up.
			t.nextPosKnown = false
		}
	}
	if !t.nextPosKnown {
		s, err = t.log.Slice(next, cfg.MaxSliceBytes)
	}
	if err != nil {
		return fmt.Errorf("slice from offset %d: %w", next, err)
	}
	if s.FirstOffset != next || len(s.Data) == 0 {
		t.m.bufs.Put(buf)
		return fmt.Errorf("slice from offset %d starts at %d with %d bytes", next, s.FirstOffset, len(s.Data))
	}
	if s.LeaderEpoch > t.epoch {
		// Bytes of a later epoch than ours mean someone else leads now; the
		// broker will stop this task. Never upload them as ours.
		t.m.bufs.Put(buf)
		return fmt.Errorf("slice at offset %d has leader epoch %d above task epoch %d", next, s.LeaderEpoch, t.epoch)
	}
	if s.NextOffset < t.log.LogEndOffset() && len(s.Data) < cfg.UploadBytes && reason == CutInterval {
		reason = CutBoundary
	}
	err = t.submit(ctx, s, buf)
	if err != nil {
		return err
	}
	t.next.Store(s.NextOffset)
	t.nextPos = kafkalog.SegmentPosition{SegmentBaseOffset: s.SegmentBaseOffset, Position: s.EndPosition}
	t.nextPosKnown = true
	t.m.slices.Add(1)
	t.m.bytes.Add(int64(len(s.Data)))
	switch reason {
	case CutSize:
		t.m.bySize.Add(1)
	case CutInterval:
		t.m.byInterval.Add(1)
	default:
		t.m.byBoundary.Add(1)
	}
	return nil
}

// submit hands s to the sink. buf, if not nil, is the Manager's buffer
// s.Data is in: it goes back to the pool when the sink calls Done, after
// which the sink holds no reference to Data (combiner.Slice). A sink that
// refuses the slice (Submit's error) may still hold it, so the buffer is
// then left to the garbage collector.
func (t *task) submit(ctx context.Context, s kafkalog.SegmentSlice, buf []byte) error {
	t.inflight.Add(1)
	err := t.m.sink.Submit(ctx, combiner.Slice{
		TopicPartition: t.tp,
		// The uploader's epoch: the same as the batches' except for the
		// range an older leader appended and never uploaded, which a new
		// leader uploads in its own epoch (UploadStart), so that a deposed
		// leader's late entries of its epoch never overlap entries of the
		// same epoch published by someone else.
		LeaderEpoch:       t.epoch,
		BaseOffset:        s.FirstOffset,
		LastOffset:        s.LastOffset,
		SegmentBaseOffset: s.SegmentBaseOffset,
		BasePosition:      s.BasePosition,
		EndPosition:       s.EndPosition,
		Data:              s.Data,
		AppendedAt:        t.pendingSince,
		Done: func(_ combiner.UploadedObject, err error) {
			defer func() {
				t.m.bufs.Put(buf)
				if t.inflight.Add(-1) == 0 {
					select {
					case t.idle <- struct{}{}:
					default:
					}
				}
			}()
			if err == nil {
				for {
					p := t.published.Load()
					if s.NextOffset <= p || t.published.CompareAndSwap(p, s.NextOffset) {
						return
					}
				}
			}
			// Called from the combiner's goroutine: never block it.
			t.foldFailed(failedSlice{base: s.FirstOffset, err: err})
		},
	})
	if err != nil {
		t.inflight.Add(-1)
		return fmt.Errorf("submit slice [%d,%d]: %w", s.FirstOffset, s.LastOffset, err)
	}
	return nil
}

// foldFailed records f as given up, keeping the lowest base offset (and
// its error), and wakes the task. It never blocks.
func (t *task) foldFailed(f failedSlice) {
	if errors.Is(f.err, combiner.ErrClosed) {
		return
	}
	t.failMu.Lock()
	if !t.failMu.pending || f.base < t.failMu.lowest.base {
		t.failMu.pending, t.failMu.lowest = true, f
	}
	t.failMu.Unlock()
	select {
	case t.failWake <- struct{}{}:
	default:
	}
}

// takeFailed moves the folded failure, if any, into the task's rewind.
func (t *task) takeFailed(ctx context.Context) {
	t.failMu.Lock()
	f, ok := t.failMu.lowest, t.failMu.pending
	t.failMu.pending = false
	t.failMu.Unlock()
	if ok {
		t.noteFailed(ctx, f)
	}
}

// noteFailed records a slice the combiner gave up on: the task re-cuts
// from the lowest such base offset once the combiner holds none of its
// slices.
func (t *task) noteFailed(ctx context.Context, f failedSlice) {
	if errors.Is(f.err, combiner.ErrClosed) || ctx.Err() != nil {
		return
	}
	if t.rewind < 0 || f.base < t.rewind {
		if t.rewind < 0 {
			t.rewindCause = f.err
		}
		t.rewind = f.base
	}
}

// rewindNow moves next back to the rewind offset and logs it once.
func (t *task) rewindNow() {
	t.takeFailed(context.Background())
	from := t.rewind
	t.m.resubmits.Add(1)
	t.m.cfg.Logger.Warn("remotewal: re-cutting from the first slice the combiner gave up on", "partition", t.tp.String(),
		"from_offset", from, "submitted_offset", t.next.Load(), "cause", t.rewindCause)
	t.next.Store(from)
	t.nextPosKnown = false
	t.rewind, t.rewindCause = -1, nil
	t.pendingSince = time.Time{}
}

package combiner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/internal/retry"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// Errors.
var (
	// ErrClosed: Submit after Close, or a slice still held when Close gave up.
	ErrClosed = errors.New("combiner: closed")
	// ErrEarlierSliceFailed: a slice given up because an earlier slice of
	// its partition and leader epoch was given up and not yet re-submitted:
	// publishing it would put the partition's entries out of offset order
	// (DESIGN.md invariant 4). The caller re-submits from the earlier one.
	ErrEarlierSliceFailed = errors.New("combiner: an earlier slice of the partition was given up")
	// ErrInvalidSlice: Submit was given a slice that cannot be encoded.
	ErrInvalidSlice = errors.New("combiner: invalid slice")
	// ErrKeyTaken: a create-only PUT found an object under the key that is
	// not ours. The combiner retries under a new key.
	ErrKeyTaken = errors.New("combiner: key holds another object")
	// ErrRefused: the object encoder refused a slice (objformat's rules:
	// within one object a partition's base offsets must rise, "base offset
	// N not after M"). Only that slice is left out of its object; the rest
	// is uploaded and published, and the slice is given up for its own
	// partition (the caller re-submits from its base offset).
	ErrRefused = errors.New("combiner: slice refused by the object encoder")
)

// Slice is the exact bytes of whole RecordBatch v2 batches of one partition
// and one leader epoch, cut from the leader's active segment.
type Slice struct {
	metadata.TopicPartition
	LeaderEpoch       int32
	BaseOffset        int64
	LastOffset        int64
	SegmentBaseOffset int64
	BasePosition      int64
	EndPosition       int64
	// Data belongs to the combiner from Submit on; the caller must not
	// modify it until Done is called, after which the combiner holds no
	// reference to it and the caller may reuse its memory (remotewal
	// reads the next slices into it). A Submit that returns an error
	// never calls Done.
	Data []byte
	// AppendedAt is when the slice's oldest byte was appended on the
	// leader; zero means "at Submit".
	AppendedAt time.Time
	// Done, if set, is called once: with the object after its metadata was
	// published, or with the error that made the combiner give the slice up
	// (then nothing about it was published, and the caller re-submits from
	// its base offset). Once a slice is given up, every later slice of its
	// partition and leader epoch is given up too (ErrEarlierSliceFailed)
	// until one arrives again that starts at or below the given-up base
	// offset: the caller re-cuts its log from there, in order. Called from the combiner's publisher goroutine; it
	// must not block or call Submit.
	Done func(UploadedObject, error)
}

// UploadedObject is one combined object, durable in storage.
type UploadedObject struct {
	ID         metadata.ObjectID
	Key        string
	Bucket     string
	BrokerID   int32
	Entries    []metadata.SliceEntry
	UploadedAt time.Time
	Size       int64
}

// ObjectWriter writes combined objects. StoreWriter, the one
// implementation outside tests, adapts an objstore.Store.
type ObjectWriter interface {
	// PutObject writes body under key create-only, failing with an error
	// that wraps objstore.ErrExists if key exists. body is not retained or
	// read after PutObject returns: the combiner reuses it.
	PutObject(ctx context.Context, key string, body []byte) error
	// ReadObjectTail returns the last n bytes of key (fewer if the object is
	// shorter), or an error wrapping objstore.ErrNotFound.
	ReadObjectTail(ctx context.Context, key string, n int64) ([]byte, error)
}

// Publisher makes an uploaded object's metadata visible
// (COPY_SEGMENT_FINISHED). The combiner calls it once per object, in the
// order objects were cut, only after the PUT succeeded; on error it retries
// the same object (same ID), so PublishObject must be idempotent by ID.
type Publisher interface {
	PublishObject(ctx context.Context, obj UploadedObject) error
}

// StoreWriter adapts an objstore.Store to ObjectWriter: create-only PUTs
// (If-None-Match: *) and suffix-range GETs. It tags every request with
// component "combiner" (unless ctx already names a component), so the
// ledger counts the combiner's requests as its own. It is the adapter the
// write path (remotewal.NewWritePath) uses.
type StoreWriter struct{ Store objstore.Store }

var _ ObjectWriter = StoreWriter{}

// Component is the ledger component of the combiner's requests.
const Component = "combiner"

func tagged(ctx context.Context) context.Context {
	if objstore.TagsFrom(ctx).Component != "" {
		return ctx
	}
	return objstore.WithTags(ctx, objstore.Tags{Component: Component, Partition: -1})
}

func (w StoreWriter) PutObject(ctx context.Context, key string, body []byte) error {
	if err := w.Store.Put(tagged(ctx), key, body, objstore.PutOptions{IfNoneMatch: true}); err != nil {
		return fmt.Errorf("combiner: put %q (%d bytes): %w", key, len(body), err)
	}
	return nil
}

func (w StoreWriter) ReadObjectTail(ctx context.Context, key string, n int64) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("combiner: read tail of %q: length %d: %w", key, n, objstore.ErrInvalidRange)
	}
	b, err := w.Store.GetRange(tagged(ctx), key, -n, -1)
	if err != nil {
		return nil, fmt.Errorf("combiner: read tail of %q: %w", key, err)
	}
	return b, nil
}

// Metrics is a snapshot of the combiner's gauges and counters.
type Metrics struct {
	QueuedSlices   int   // submitted, not yet cut into an object
	QueuedBytes    int64 //
	HeldSlices     int   // submitted, not yet published or given up (the bounded amount)
	HeldBytes      int64 //
	SubmitsBlocked int64 // Submits that had to wait for room
	ObjectsCut     int64
	ObjectsUp      int64 // PUT succeeded
	ObjectsPub     int64 // metadata published
	BytesUploaded  int64
	UploadRetries  int64
	PublishRetries int64
	ObjectsFailed  int64 // given up: their slices got Done(err)
	// ObjectsPartial counts objects published with some of their slices
	// left out (given up for their own partition only); those slices'
	// byte ranges are dead bytes no metadata references.
	ObjectsPartial int64
	SlicesGivenUp  int64 // slices that got Done(err), whole objects included
	// Announced: tasks holding bytes back until called (Announce);
	// Called: tasks called for them that have not answered yet.
	Announced, Called int
}

// batch holds slices in queue order, as the encoder and the Done callbacks
// need them and no more (a Slice's other fields are not used here). The
// queue is one batch; each cut object gets its own from Combiner.mu.spare,
// and it goes back there once released, so cutting does not allocate and
// no batch is in two places at once.
type batch struct {
	in   []objformat.Input
	done []func(UploadedObject, error) // parallel to in; nil where no Done
}

// bytes is what the batch counts against QueueBytes: Σ len(Data).
func (b *batch) bytes() int64 {
	var n int64
	for i := range b.in {
		n += int64(len(b.in[i].Data))
	}
	return n
}

// reset empties b, dropping its references to slice data and callbacks
// but keeping its capacity.
func (b *batch) reset() {
	clear(b.in)
	clear(b.done)
	b.in, b.done = b.in[:0], b.done[:0]
}

// job is one cut object.
type job struct {
	seq uint64
	b   *batch
}

type result struct {
	seq uint64
	b   *batch
	obj UploadedObject
	err error
	// refused, when set, is parallel to b.in: the slices the encoder
	// refused (ErrRefused), which are not in the object; obj.Entries are
	// the others', in order.
	refused []error
}

// Combiner packs slices of many partitions into combined objects, uploads
// them and publishes their metadata in order. See the package doc.
type Combiner struct {
	cfg    Config
	clock  clock.Clock
	log    *slog.Logger
	policy Policy

	wake    chan struct{} // cutter: queue changed or closing; cap 1
	jobs    chan job      // cutter → workers
	results chan result   // workers → publisher
	abort   context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when the publisher has finished

	mu struct {
		sync.Mutex
		// uploads and publishes turn failed attempts into log lines at
		// state changes (see logAttempt).
		uploads, publishes episode
		// queue and view are compacted in place after each cut, so their
		// backing arrays are reused; cut slices are copied out into jobs.
		queue       batch
		view        []Queued // parallel to queue, for Pack
		queuedBytes int64    // Σ len(Data) of queue
		// open is the size of the last object Pack would make of the
		// queue, still open (Policy.place, emptyObject when none): Submit
		// follows Pack's walk so it knows where objects begin and end.
		// openStamp is the time stamped on that object's first slice
		// that came without AppendedAt, zero if none.
		open      int64
		openStamp time.Time
		// armedFor is Pending.Last while the cutter's timer is armed: a
		// slice appended before it missed the last object and is due at
		// once, so it pokes the cutter. Zero when the cutter left nothing.
		armedFor time.Time
		// ann counts the tasks holding bytes back until asked (Announce).
		ann announcements
		// lastTimed and nextTimed are Pending.Last and Next: when the
		// cutter last cut an object for the interval or called the tasks
		// for one, and the budget for the next.
		lastTimed, nextTimed time.Time
		heldSlices           int
		heldBytes            int64
		// heldBy is the held amount per partition, bounded by
		// PartitionQueueSlices and PartitionQueueBytes so that one
		// partition's backlog cannot take the whole bound from the others.
		// Entries stay when they drop to zero (one per partition this
		// combiner has seen), so counting costs one map lookup per Submit
		// and per release and no allocation.
		heldBy   map[metadata.TopicPartition]*held
		space    chan struct{} // closed and replaced when room frees up
		waiting  bool          // a Submit may be waiting on space
		spare    []*batch      // released jobs' batches, emptied, for the cutter
		closed   bool
		inFlight map[string]struct{}
	}
	randMu sync.Mutex // guards cfg.Rand

	m struct {
		submitsBlocked, cut, up, pub, bytesUp, upRetries, pubRetries, failed, partial, givenUp atomic.Int64
	}
}

// held is what one partition holds of the bound.
type held struct {
	slices int
	bytes  int64
}

// New starts a combiner. Stop it with Close.
func New(cfg Config) (*Combiner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Combiner{
		cfg:     cfg,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		policy:  cfg.policy(),
		wake:    make(chan struct{}, 1),
		jobs:    make(chan job),
		results: make(chan result, cfg.ThreadPoolSize),
		done:    make(chan struct{}),
	}
	// The first object for the interval goes no sooner than Interval
	// after the start.
	c.mu.lastTimed = c.clock.Now()
	c.mu.nextTimed = c.mu.lastTimed.Add(2 * cfg.Interval)
	c.abort, c.cancel = context.WithCancel(context.Background())
	c.mu.space = make(chan struct{})
	c.mu.inFlight = make(map[string]struct{})
	c.mu.heldBy = make(map[metadata.TopicPartition]*held)
	c.mu.open = emptyObject
	var workers sync.WaitGroup
	for range cfg.ThreadPoolSize {
		workers.Add(1)
		go func() { defer workers.Done(); c.worker() }()
	}
	go c.cutter()
	go func() { workers.Wait(); close(c.results) }()
	go c.publisher()
	return c, nil
}

// Submit queues s for upload. It blocks while the combiner holds
// QueueSlices slices or QueueBytes bytes that are not yet published, or
// s's partition holds PartitionQueueSlices or PartitionQueueBytes of them,
// so memory stays bounded, an acks=all produce times out rather than
// piling up, and one partition's backlog cannot stop the others' Submits.
// It returns ctx's error if ctx ends first, ErrClosed after Close, or
// ErrInvalidSlice.
func (c *Combiner) Submit(ctx context.Context, s Slice) error {
	if len(s.Data) == 0 || len(s.Topic) == 0 || len(s.Topic) > objformat.MaxTopicLen || s.Partition < 0 ||
		s.LeaderEpoch < 0 || s.BaseOffset < 0 || s.LastOffset < s.BaseOffset || len(s.Data) > objformat.MaxRawLength {
		return fmt.Errorf("%w: %v epoch %d offsets [%d, %d], %d bytes", ErrInvalidSlice, s.TopicPartition, s.LeaderEpoch, s.BaseOffset, s.LastOffset, len(s.Data))
	}
	size := int64(len(s.Data))
	view := Queued{Size: size + int64(objformat.EntrySize(s.Topic)), AppendedAt: s.AppendedAt}
	blocked := false
	var ph *held // s's partition's count, nil when it has none yet
	for {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			return ErrClosed
		}
		var ok bool
		if ph, ok = c.admits(s.TopicPartition, size); ok {
			break
		}
		space := c.mu.space
		c.mu.waiting = true
		// The cutter may be waiting for called tasks to answer, and this
		// may be one of them: tell it to cut without them.
		callsOut := c.mu.ann.called > 0
		c.mu.Unlock()
		if callsOut {
			c.poke()
		}
		if !blocked {
			blocked = true
			c.m.submitsBlocked.Add(1)
		}
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	wasEmpty := len(c.mu.queue.in) == 0
	closedBefore, closedAfter, open := c.policy.place(c.mu.open, view.Size)
	if closedBefore {
		c.mu.openStamp = time.Time{}
	}
	stamped := view.AppendedAt.IsZero()
	if stamped {
		// A slice without AppendedAt is stamped at Submit. Only the
		// oldest stamp of the object Pack leaves open decides when it is
		// cut, and stamps only grow, so later slices of the same object
		// share its first stamp: Pack decides exactly as with a clock
		// read per slice, which would cost more than the rest of Submit.
		if c.mu.openStamp.IsZero() {
			c.mu.openStamp = c.clock.Now()
		}
		view.AppendedAt = c.mu.openStamp
	}
	c.mu.open = open
	if closedAfter {
		c.mu.openStamp = time.Time{}
	}
	c.mu.queue.in = append(c.mu.queue.in, objformat.Input{TopicPartition: s.TopicPartition, LeaderEpoch: s.LeaderEpoch,
		BaseOffset: s.BaseOffset, LastOffset: s.LastOffset, Data: s.Data})
	c.mu.queue.done = append(c.mu.queue.done, s.Done)
	c.mu.view = append(c.mu.view, view)
	c.mu.queuedBytes += size
	c.mu.heldSlices++
	c.mu.heldBytes += size
	if ph == nil {
		ph = new(held)
		c.mu.heldBy[s.TopicPartition] = ph
	}
	ph.slices++
	ph.bytes += size
	// Wake the cutter only when its decision may change: the queue was
	// empty (it arms the interval timer), an object just closed (Pack
	// would cut it), or this slice is older than the one the timer is
	// armed for (never so for one stamped now). Otherwise the slice waits
	// for the next cut without a wakeup, so small slices cost no channel
	// operation each.
	wake := wasEmpty || closedBefore || closedAfter ||
		(!stamped && !c.mu.armedFor.IsZero() && view.AppendedAt.Before(c.mu.armedFor))
	c.mu.Unlock()
	if wake {
		c.poke()
	}
	return nil
}

// admits reports whether a slice of tp with size bytes fits the bounds,
// the total one and its partition's. An empty combiner (or partition)
// takes any slice, so one bigger than a byte bound cannot wait forever.
// It also returns tp's count (nil if it has none yet). Called with c.mu
// held.
func (c *Combiner) admits(tp metadata.TopicPartition, size int64) (*held, bool) {
	h := c.mu.heldBy[tp]
	if c.mu.heldSlices > 0 && (c.mu.heldSlices >= c.cfg.QueueSlices || c.mu.heldBytes+size > c.cfg.QueueBytes) {
		return h, false
	}
	return h, h == nil || h.slices == 0 || (h.slices < c.cfg.PartitionQueueSlices && h.bytes+size <= c.cfg.PartitionQueueBytes)
}

func (c *Combiner) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Metrics returns a snapshot.
func (c *Combiner) Metrics() Metrics {
	c.mu.Lock()
	m := Metrics{QueuedSlices: len(c.mu.queue.in), QueuedBytes: c.mu.queuedBytes, HeldSlices: c.mu.heldSlices, HeldBytes: c.mu.heldBytes,
		Announced: len(c.mu.ann.live), Called: c.mu.ann.called}
	c.mu.Unlock()
	m.SubmitsBlocked = c.m.submitsBlocked.Load()
	m.ObjectsCut = c.m.cut.Load()
	m.ObjectsUp = c.m.up.Load()
	m.ObjectsPub = c.m.pub.Load()
	m.BytesUploaded = c.m.bytesUp.Load()
	m.UploadRetries = c.m.upRetries.Load()
	m.PublishRetries = c.m.pubRetries.Load()
	m.ObjectsFailed = c.m.failed.Load()
	m.ObjectsPartial = c.m.partial.Load()
	m.SlicesGivenUp = c.m.givenUp.Load()
	return m
}

// InFlight reports whether key is an object this combiner is uploading or
// has uploaded and not yet published or given up. The orphan collector must
// not delete such a key.
func (c *Combiner) InFlight(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mu.inFlight[key]
	return ok
}

// Close stops taking slices, cuts what is queued, and waits until every
// held slice is published or given up. If ctx ends first it aborts: retries
// stop, remaining slices get Done(ErrClosed), and Close returns ctx's error
// once every goroutine has stopped.
func (c *Combiner) Close(ctx context.Context) error {
	c.mu.Lock()
	if !c.mu.closed {
		c.mu.closed = true
		close(c.mu.space) // blocked Submits see closed
		c.mu.space = make(chan struct{})
	}
	c.mu.Unlock()
	c.poke()
	select {
	case <-c.done:
		c.cancel()
		return nil
	case <-ctx.Done():
		c.cancel()
		<-c.done
		return ctx.Err()
	}
}

// cutter owns cutting: it runs Pack over the queue and hands objects, in
// order, to the workers with consecutive sequence numbers.
func (c *Combiner) cutter() {
	defer close(c.jobs)
	timer := c.clock.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var seq uint64
	var cut []job
	for {
		c.mu.Lock()
		closing := c.mu.closed
		now := c.clock.Now()
		c.mu.ann.answered()
		pend := c.mu.ann.pending(now, c.mu.waiting)
		pend.Last, pend.Next = c.mu.lastTimed, c.mu.nextTimed
		plan := PackWith(c.mu.view, pend, now, c.policy, closing)
		if plan.Mark {
			c.mu.lastTimed, c.mu.nextTimed = c.policy.Marked(pend, now)
		}
		if plan.Call {
			c.mu.ann.callAll(now)
		}
		cut = cut[:0]
		n := 0
		q := &c.mu.queue
		for _, k := range plan.Cuts {
			// Copy the slices out so the queue's arrays can be reused at
			// once; the job's batch is recycled after release.
			b := c.spareBatch()
			b.in = append(b.in, q.in[n:n+k]...)
			b.done = append(b.done, q.done[n:n+k]...)
			c.mu.queuedBytes -= b.bytes()
			cut = append(cut, job{b: b})
			n += k
		}
		if n > 0 {
			m := copy(q.in, q.in[n:])
			copy(q.done, q.done[n:])
			// Drop the references left behind by the move down.
			clear(q.in[m:])
			clear(q.done[m:])
			q.in, q.done = q.in[:m], q.done[:m]
			c.mu.view = c.mu.view[:copy(c.mu.view, c.mu.view[n:])]
		}
		c.mu.armedFor = time.Time{}
		if plan.Wait > 0 {
			// Anything appended since the last mark is due no sooner than
			// what the timer is armed for; anything older is due at once.
			c.mu.armedFor = c.mu.lastTimed
		}
		// What Pack left is the open object Submit follows, unless the
		// interval or a flush cut that too.
		empty := len(q.in) == 0
		if empty {
			c.mu.open, c.mu.openStamp = emptyObject, time.Time{}
		}
		c.mu.Unlock()

		for i := range cut {
			cut[i].seq = seq
			select {
			case c.jobs <- cut[i]:
				seq++
				c.m.cut.Add(1)
			case <-c.abort.Done():
				for _, rest := range cut[i:] {
					c.release(rest.b, UploadedObject{}, ErrClosed, nil)
				}
				c.failQueue()
				return
			}
			cut[i] = job{}
		}
		if closing && empty {
			return
		}
		if plan.Wait > 0 {
			// Wait counts from now, read before the cut: the clock may
			// have moved since (a test's manual clock, or a slow hand-off).
			if d := plan.Wait - c.clock.Since(now); d > 0 {
				timer.Reset(d)
			} else {
				c.poke()
			}
		}
		select {
		case <-c.wake:
		case <-timer.C():
		case <-c.abort.Done():
			c.failQueue()
			return
		}
		timer.Stop()
	}
}

// spareBatch returns an empty batch, reused if one is spare. Called with
// c.mu held.
func (c *Combiner) spareBatch() *batch {
	if n := len(c.mu.spare); n > 0 {
		b := c.mu.spare[n-1]
		c.mu.spare[n-1] = nil
		c.mu.spare = c.mu.spare[:n-1]
		return b
	}
	return new(batch)
}

func (c *Combiner) failQueue() {
	c.mu.Lock()
	q := c.mu.queue
	c.mu.queue, c.mu.view, c.mu.queuedBytes, c.mu.armedFor = batch{}, nil, 0, time.Time{}
	c.mu.open, c.mu.openStamp = emptyObject, time.Time{}
	c.mu.Unlock()
	c.release(&q, UploadedObject{}, ErrClosed, nil)
}

// release gives up the budget of b's slices and tells their callers:
// Done(obj, nil) to each published slice, Done(UploadedObject{}, err) to
// each given-up one. errs, when set, is parallel to b.in and says which
// (nil: published in obj); without it every slice gets err (nil: all
// published). b is then recycled for a later job: the caller must not use
// it again.
func (c *Combiner) release(b *batch, obj UploadedObject, err error, errs []error) {
	if len(b.in) == 0 {
		return
	}
	n := b.bytes()
	c.mu.Lock()
	c.mu.heldSlices -= len(b.in)
	c.mu.heldBytes -= n
	for i := range b.in {
		h := c.mu.heldBy[b.in[i].TopicPartition]
		h.slices--
		h.bytes -= int64(len(b.in[i].Data))
	}
	if c.mu.waiting {
		close(c.mu.space)
		c.mu.space = make(chan struct{})
		c.mu.waiting = false
	}
	c.mu.Unlock()
	// Counted before any Done, so a caller told of its slice sees it in
	// Metrics.
	var gaveUp int64
	for i := range b.in {
		if (errs == nil && err != nil) || (errs != nil && errs[i] != nil) {
			gaveUp++
		}
	}
	c.m.givenUp.Add(gaveUp)
	for i, done := range b.done {
		if done == nil {
			continue
		}
		e := err
		if errs != nil {
			e = errs[i]
		}
		if e != nil {
			done(UploadedObject{}, e)
		} else {
			done(obj, nil)
		}
	}
	// The spare list never holds more slots than were held at once,
	// which the queue bound limits.
	b.reset()
	c.mu.Lock()
	c.mu.spare = append(c.mu.spare, b)
	c.mu.Unlock()
}

func (c *Combiner) jitter(d time.Duration) time.Duration {
	c.randMu.Lock()
	defer c.randMu.Unlock()
	// Equal jitter: [d/2, d], so backoff still grows but retries spread.
	return d/2 + time.Duration(c.cfg.Rand.Int64N(int64(d/2)+1))
}

func (c *Combiner) newID() metadata.ObjectID {
	c.randMu.Lock()
	defer c.randMu.Unlock()
	return newID(c.cfg.Rand)
}

// sleep waits d on the injected clock; false if aborted.
func (c *Combiner) sleep(d time.Duration) bool {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-c.abort.Done():
		return false
	}
}

func (c *Combiner) backoff(attempt int) time.Duration {
	d := c.cfg.BackoffMin
	for i := 0; i < attempt && d < c.cfg.BackoffMax; i++ {
		d *= 2
	}
	return c.jitter(min(d, c.cfg.BackoffMax))
}

// worker encodes and uploads objects. Its encode buffer is reused for the
// next object only after upload returned, that is after the last PUT
// attempt of this object returned (ObjectWriter does not retain the body),
// so no buffer still being uploaded or retried is ever overwritten. A
// buffer grown past MaxObjectBytes by one oversized slice is not kept.
//
// When the encoder refuses the object, the slices it refuses (refuse) are
// left out and the rest is encoded again: one partition's bad slice does
// not fail the others'.
func (c *Combiner) worker() {
	var enc objformat.Encoder
	defer enc.Close()
	var buf []byte
	var keep []objformat.Input
	for j := range c.jobs {
		if int64(cap(buf)) > c.cfg.MaxObjectBytes {
			buf = nil
		}
		in := j.b.in
		body, entries, err := enc.Append(buf, in, c.cfg.Codec)
		var refused []error
		if errors.Is(err, objformat.ErrInvalidInput) {
			if refused = refuse(in); refused != nil {
				keep = keep[:0]
				for i := range in {
					if refused[i] == nil {
						keep = append(keep, in[i])
					}
				}
				c.log.Warn("combiner: slices refused by the encoder are left out of their object", "refused", len(in)-len(keep), "slices", len(in), "err", err)
				body, entries, err = nil, nil, nil
				if len(keep) > 0 {
					body, entries, err = enc.Append(buf, keep, c.cfg.Codec)
				}
				clear(keep) // drop references to slice data
			}
		}
		if err != nil {
			c.log.Error("combiner: encode", "err", err, "slices", len(in))
			c.results <- result{seq: j.seq, b: j.b, err: err}
			continue
		}
		if body == nil { // every slice refused
			c.results <- result{seq: j.seq, b: j.b, refused: refused}
			continue
		}
		buf = body
		obj, err := c.upload(body, entries)
		c.results <- result{seq: j.seq, b: j.b, obj: obj, err: err, refused: refused}
	}
}

// refuse returns, parallel to in, the error of each slice the encoder
// would refuse, nil if it refuses none: within one object a partition's
// base offsets must rise past the last offset of its slice before
// (objformat's rule; Submit checks the rest). A refused slice does not
// count as the partition's last. Pure.
func refuse(in []objformat.Input) []error {
	var out []error
	last := make(map[metadata.TopicPartition]int64, len(in))
	for i := range in {
		s := &in[i]
		if prev, ok := last[s.TopicPartition]; ok && s.BaseOffset <= prev {
			if out == nil {
				out = make([]error, len(in))
			}
			out[i] = fmt.Errorf("%w: %v epoch %d slice [%d, %d]: base offset %d not after %d in the same object",
				ErrRefused, s.TopicPartition, s.LeaderEpoch, s.BaseOffset, s.LastOffset, s.BaseOffset, prev)
			continue
		}
		last[s.TopicPartition] = s.LastOffset
	}
	return out
}

// upload PUTs body create-only, retrying retriable errors with backoff
// until UploadTimeout. A PUT that failed ambiguously may have stored the
// object: the retry then finds the key taken, and the object is ours if its
// trailer equals ours (same footer length and CRC32C, so the same entries
// with the same slice CRCs, positions and lengths, so the same size).
func (c *Combiner) upload(body []byte, entries []metadata.SliceEntry) (UploadedObject, error) {
	start := c.clock.Now()
	id := c.newID()
	key := Key(c.cfg.KeyPrefix, c.cfg.BrokerID, start, id)
	c.setInFlight(key, true)
	trailer := body[len(body)-objformat.TrailerSize:]
	for attempt := 0; ; attempt++ {
		if c.abort.Err() != nil {
			c.setInFlight(key, false)
			return UploadedObject{}, ErrClosed
		}
		began := c.attemptBegins(&c.mu.uploads)
		actx, cancel := context.WithTimeout(c.abort, c.cfg.AttemptTimeout)
		err := c.cfg.Writer.PutObject(actx, key, body)
		if errors.Is(err, objstore.ErrExists) {
			var tail []byte
			tail, err = c.cfg.Writer.ReadObjectTail(actx, key, objformat.TrailerSize)
			switch {
			case err == nil && bytes.Equal(tail, trailer):
				c.log.Info("combiner: create-only PUT found our own earlier attempt", "key", key, "attempt", attempt)
			case err == nil:
				c.log.Warn("combiner: key holds another object; retrying under a new key", "key", key)
				err = fmt.Errorf("%w: %s", ErrKeyTaken, key)
				c.setInFlight(key, false)
				id = c.newID()
				key = Key(c.cfg.KeyPrefix, c.cfg.BrokerID, c.clock.Now(), id)
				c.setInFlight(key, true)
			}
		}
		cancel()
		if err == nil {
			c.logAttempt(&c.mu.uploads, "upload", key, attempt, began, nil)
			c.m.up.Add(1)
			c.m.bytesUp.Add(int64(len(body)))
			return UploadedObject{ID: id, Key: key, Bucket: c.cfg.Bucket, BrokerID: c.cfg.BrokerID,
				Entries: entries, UploadedAt: c.clock.Now(), Size: int64(len(body))}, nil
		}
		if (!errors.Is(err, ErrKeyTaken) && !c.cfg.Retriable(err)) || c.clock.Since(start) >= c.cfg.UploadTimeout {
			c.log.Error("combiner: upload failed", "key", key, "attempts", attempt+1, "err", err)
			// The key stays possibly-written; left out of the in-flight set
			// it becomes an orphan the collector removes after its grace.
			c.setInFlight(key, false)
			return UploadedObject{}, fmt.Errorf("combiner: upload %s: %w", key, err)
		}
		c.m.upRetries.Add(1)
		c.logAttempt(&c.mu.uploads, "upload", key, attempt, began, err)
		if !c.sleep(c.backoff(attempt)) {
			c.setInFlight(key, false)
			return UploadedObject{}, ErrClosed
		}
	}
}

// failureLogEvery: while uploads (or publishes) keep failing, the count
// of failed attempts is logged this often.
const failureLogEvery = 10 * time.Second

// episode is the state of one kind of attempt (uploads, publishes) for
// the log: the failure episode, and how many attempts have succeeded.
type episode struct {
	retry.Episode
	oks uint64
}

// attemptBegins returns what logAttempt needs to know of an attempt
// beginning now: the successes so far.
func (c *Combiner) attemptBegins(ep *episode) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ep.oks
}

// logAttempt logs failed upload or publish attempts (err != nil) as one
// state change per outage, not one WARN per attempt of every object: the
// first failure, then at most every failureLogEvery the count since, and
// the first success after them with the total. Each attempt is at DEBUG.
// A failed attempt that began before another succeeded (began: from
// attemptBegins) is from the outage that success ended: it does not
// start a new one (several uploads are in flight when a store heals).
func (c *Combiner) logAttempt(ep *episode, what, key string, attempt int, began uint64, err error) {
	now := c.clock.Now()
	c.mu.Lock()
	ep.Every = failureLogEvery
	var r retry.Report
	var n int64
	var d time.Duration
	switch {
	case err == nil:
		ep.oks++
		r, n, d = ep.OK(now)
	case ep.oks == began:
		r, n = ep.Fail(now)
		d = now.Sub(ep.Since())
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Debug("combiner: "+what+" retry", "key", key, "attempt", attempt+1, "err", err)
	}
	switch r {
	case retry.Entered:
		c.log.Warn("combiner: "+what+" failing; retrying with backoff", "key", key, "attempt", attempt+1, "err", err)
	case retry.Still:
		c.log.Warn("combiner: "+what+"s still failing", "failedAttempts", n, "for", d.Round(time.Millisecond), "err", err)
	case retry.Left:
		c.log.Info("combiner: "+what+"s succeed again", "failedAttempts", n, "after", d.Round(time.Millisecond))
	}
}

func (c *Combiner) setInFlight(key string, on bool) {
	c.mu.Lock()
	if on {
		c.mu.inFlight[key] = struct{}{}
	} else {
		delete(c.mu.inFlight, key)
	}
	c.mu.Unlock()
}

// publisher publishes objects in the order they were cut: a result that
// arrives early waits in pending until every earlier one is done, so each
// partition's entries are published in offset order however uploads race.
func (c *Combiner) publisher() {
	defer close(c.done)
	// failedFrom is, per partition and leader epoch, the lowest base
	// offset given up since a slice starting at or below it came again.
	failedFrom := map[epochPartition]int64{}
	var scratch finishScratch
	pending := make(map[uint64]result)
	var next uint64
	for r := range c.results {
		pending[r.seq] = r
		for {
			r, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			c.finish(r, failedFrom, &scratch)
		}
	}
	if len(pending) != 0 {
		// Every cut object gets exactly one result; a gap is a bug.
		panic(fmt.Sprintf("combiner: %d results left unpublished, next seq %d", len(pending), next))
	}
}

// epochPartition keys the publisher's given-up state.
type epochPartition struct {
	tp    metadata.TopicPartition
	epoch int32
}

// finish decides, in cut order, what becomes of one object's slices, and
// tells their callers. A failed upload gives every slice up (its bytes
// may not be durable). Otherwise each slice is judged for its own
// partition and leader epoch: one the encoder refused, or one after a
// given-up slice of its partition that was not re-submitted since
// (ErrEarlierSliceFailed), is given up; the others are published, with
// only their entries, so one partition's failures never fail another's
// slices. The given-up slices' byte ranges stay in the object,
// referenced by no metadata (dead bytes, which kwal audit counts); an
// object with no slice left to publish is left unpublished for the
// orphan collector.
func (c *Combiner) finish(r result, failedFrom map[epochPartition]int64, scratch *finishScratch) {
	in := r.b.in
	if r.err != nil {
		for i := range in {
			failSlice(failedFrom, &in[i])
		}
		c.m.failed.Add(1)
		c.release(r.b, UploadedObject{}, r.err, nil)
		return
	}
	errs := scratch.errs[:0]
	wanted := scratch.entries[:0]
	j := 0 // next entry of r.obj: the slices not refused, in order
	for i := range in {
		s := &in[i]
		var err error
		switch {
		case r.refused != nil && r.refused[i] != nil:
			err = r.refused[i]
		default:
			e := r.obj.Entries[j]
			j++
			k := epochPartition{s.TopicPartition, s.LeaderEpoch}
			if from, ok := failedFrom[k]; ok {
				if s.BaseOffset > from {
					err = fmt.Errorf("%w: %v epoch %d slice at %d after the one at %d", ErrEarlierSliceFailed, s.TopicPartition, s.LeaderEpoch, s.BaseOffset, from)
					break
				}
				// Re-submitted from (or below) the given-up slice: the
				// partition publishes again from here, in order.
				delete(failedFrom, k)
			}
			wanted = append(wanted, e)
		}
		if err != nil {
			failSlice(failedFrom, s)
		}
		errs = append(errs, err)
	}
	scratch.errs, scratch.entries = errs, wanted
	defer func() { clear(scratch.errs); clear(scratch.entries) }()
	if len(wanted) == 0 {
		// Uploaded (or not even encoded) but never published: the orphan
		// collector's once its grace has passed.
		if r.obj.Key != "" {
			c.setInFlight(r.obj.Key, false)
		}
		c.m.failed.Add(1)
		c.release(r.b, UploadedObject{}, nil, errs)
		return
	}
	obj := r.obj
	if len(wanted) < len(in) {
		obj.Entries = slices.Clone(wanted)
	}
	err := c.publish(obj)
	c.setInFlight(obj.Key, false)
	if err != nil {
		for i := range in {
			if errs[i] == nil {
				errs[i] = err
				failSlice(failedFrom, &in[i])
			}
		}
		c.m.failed.Add(1)
		c.release(r.b, UploadedObject{}, nil, errs)
		return
	}
	c.m.pub.Add(1)
	if len(wanted) < len(in) {
		c.m.partial.Add(1)
		c.log.Info("combiner: object published without the slices given up for their own partitions",
			"key", obj.Key, "published", len(wanted), "given_up", len(in)-len(wanted))
		c.release(r.b, obj, nil, errs)
		return
	}
	c.release(r.b, obj, nil, nil)
}

// finishScratch is the publisher's reusable per-object state.
type finishScratch struct {
	errs    []error
	entries []metadata.SliceEntry
}

// failSlice records s as given up: later slices of its partition and
// leader epoch are given up until one at or below the lowest given-up base
// offset comes again.
func failSlice(failedFrom map[epochPartition]int64, s *objformat.Input) {
	k := epochPartition{s.TopicPartition, s.LeaderEpoch}
	if from, ok := failedFrom[k]; !ok || s.BaseOffset < from {
		failedFrom[k] = s.BaseOffset
	}
}

func (c *Combiner) publish(obj UploadedObject) error {
	for attempt := 0; ; attempt++ {
		if c.abort.Err() != nil {
			return ErrClosed
		}
		began := c.attemptBegins(&c.mu.publishes)
		actx, cancel := context.WithTimeout(c.abort, c.cfg.AttemptTimeout)
		err := c.cfg.Publisher.PublishObject(actx, obj)
		cancel()
		if err == nil {
			c.logAttempt(&c.mu.publishes, "publish", obj.Key, attempt, began, nil)
			return nil
		}
		if !c.cfg.Retriable(err) {
			c.log.Error("combiner: publish failed; the object is left for the orphan collector", "key", obj.Key, "err", err)
			return fmt.Errorf("combiner: publish %s: %w", obj.Key, err)
		}
		c.m.pubRetries.Add(1)
		c.logAttempt(&c.mu.publishes, "publish", obj.Key, attempt, began, err)
		if !c.sleep(c.backoff(attempt)) {
			return ErrClosed
		}
	}
}

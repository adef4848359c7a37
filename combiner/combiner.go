package combiner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/internal/clock"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// Errors.
var (
	// ErrClosed: Submit after Close, or a slice still held when Close gave up.
	ErrClosed = errors.New("combiner: closed")
	// ErrInvalidSlice: Submit was given a slice that cannot be encoded.
	ErrInvalidSlice = errors.New("combiner: invalid slice")
	// ErrKeyTaken: a create-only PUT found an object under the key that is
	// not ours. The combiner retries under a new key.
	ErrKeyTaken = errors.New("combiner: key holds another object")
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
	// modify it.
	Data []byte
	// AppendedAt is when the slice's oldest byte was appended on the
	// leader; zero means "at Submit".
	AppendedAt time.Time
	// Done, if set, is called once: with the object after its metadata was
	// published, or with the error that made the combiner give the slice up
	// (then nothing about it was published, and the caller re-submits from
	// its base offset). Called from the combiner's publisher goroutine; it
	// must not block or call Submit.
	Done func(UploadedObject, error)
}

// UploadedObject is one combined object, durable in storage.
type UploadedObject struct {
	ID         string
	Key        string
	Bucket     string
	BrokerID   int32
	Entries    []metadata.SliceEntry
	UploadedAt time.Time
	Size       int64
}

// ObjectWriter writes combined objects. remotewal implements it over its
// storage manager; StoreWriter adapts an objstore.Store.
type ObjectWriter interface {
	// PutObject writes body under key create-only, failing with an error
	// that wraps objstore.ErrExists if key exists. body is not retained.
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

// StoreWriter adapts an objstore.Store to ObjectWriter, tagging requests
// with component "combiner" for the ledger.
type StoreWriter struct{ Store objstore.Store }

var _ ObjectWriter = StoreWriter{}

func tagged(ctx context.Context) context.Context {
	if objstore.TagsFrom(ctx).Component != "" {
		return ctx
	}
	return objstore.WithTags(ctx, objstore.Tags{Component: "combiner", Partition: -1})
}

func (w StoreWriter) PutObject(ctx context.Context, key string, body []byte) error {
	return w.Store.Put(tagged(ctx), key, body, objstore.PutOptions{IfNoneMatch: true})
}

func (w StoreWriter) ReadObjectTail(ctx context.Context, key string, n int64) ([]byte, error) {
	return w.Store.GetRange(tagged(ctx), key, -n, 0)
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
}

type item struct {
	s    Slice
	size int64 // len(Data)
}

type job struct {
	seq   uint64
	items []item
}

type result struct {
	seq   uint64
	items []item
	obj   UploadedObject
	err   error
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
		queue       []item
		view        []Queued // parallel to queue, for Pack
		queuedBytes int64
		heldSlices  int
		heldBytes   int64
		space       chan struct{} // closed and replaced when room frees up
		closed      bool
		inFlight    map[string]struct{}
	}
	randMu sync.Mutex // guards cfg.Rand

	m struct {
		submitsBlocked, cut, up, pub, bytesUp, upRetries, pubRetries, failed atomic.Int64
	}
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
	c.abort, c.cancel = context.WithCancel(context.Background())
	c.mu.space = make(chan struct{})
	c.mu.inFlight = make(map[string]struct{})
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
// QueueSlices slices or QueueBytes bytes that are not yet published, so
// memory stays bounded and an acks=all produce times out rather than piling
// up. It returns ctx's error if ctx ends first, ErrClosed after Close, or
// ErrInvalidSlice.
func (c *Combiner) Submit(ctx context.Context, s Slice) error {
	if len(s.Data) == 0 || len(s.Topic) == 0 || len(s.Topic) > objformat.MaxTopicLen || s.Partition < 0 ||
		s.LeaderEpoch < 0 || s.BaseOffset < 0 || s.LastOffset < s.BaseOffset || len(s.Data) > objformat.MaxRawLength {
		return fmt.Errorf("%w: %v epoch %d offsets [%d, %d], %d bytes", ErrInvalidSlice, s.TopicPartition, s.LeaderEpoch, s.BaseOffset, s.LastOffset, len(s.Data))
	}
	if s.AppendedAt.IsZero() {
		s.AppendedAt = c.clock.Now()
	}
	size := int64(len(s.Data))
	blocked := false
	for {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			return ErrClosed
		}
		// An empty combiner takes any slice, so one bigger than QueueBytes
		// cannot wait forever.
		if c.mu.heldSlices == 0 || (c.mu.heldSlices < c.cfg.QueueSlices && c.mu.heldBytes+size <= c.cfg.QueueBytes) {
			break
		}
		space := c.mu.space
		c.mu.Unlock()
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
	wasEmpty := len(c.mu.queue) == 0
	c.mu.queue = append(c.mu.queue, item{s: s, size: size})
	c.mu.view = append(c.mu.view, Queued{Size: size + int64(objformat.EntrySize(s.Topic)), AppendedAt: s.AppendedAt})
	c.mu.queuedBytes += size
	c.mu.heldSlices++
	c.mu.heldBytes += size
	full := c.mu.queuedBytes >= c.cfg.UploadBytes
	c.mu.Unlock()
	if wasEmpty || full {
		c.poke()
	}
	return nil
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
	m := Metrics{QueuedSlices: len(c.mu.queue), QueuedBytes: c.mu.queuedBytes, HeldSlices: c.mu.heldSlices, HeldBytes: c.mu.heldBytes}
	c.mu.Unlock()
	m.SubmitsBlocked = c.m.submitsBlocked.Load()
	m.ObjectsCut = c.m.cut.Load()
	m.ObjectsUp = c.m.up.Load()
	m.ObjectsPub = c.m.pub.Load()
	m.BytesUploaded = c.m.bytesUp.Load()
	m.UploadRetries = c.m.upRetries.Load()
	m.PublishRetries = c.m.pubRetries.Load()
	m.ObjectsFailed = c.m.failed.Load()
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
	for {
		c.mu.Lock()
		closing := c.mu.closed
		plan := Pack(c.mu.view, c.clock.Now(), c.policy, closing)
		var cut [][]item
		n := 0
		for _, k := range plan.Cuts {
			cut = append(cut, c.mu.queue[n:n+k:n+k])
			n += k
		}
		if n > 0 {
			for _, it := range c.mu.queue[:n] {
				c.mu.queuedBytes -= it.size
			}
			// Copy the rest down so the backing arrays do not grow forever
			// and the cut items are no longer shared with the queue.
			c.mu.queue = append([]item(nil), c.mu.queue[n:]...)
			c.mu.view = append(c.mu.view[:0], c.mu.view[n:]...)
		}
		empty := len(c.mu.queue) == 0
		c.mu.Unlock()

		for i, items := range cut {
			select {
			case c.jobs <- job{seq: seq, items: items}:
				seq++
				c.m.cut.Add(1)
			case <-c.abort.Done():
				for _, rest := range cut[i:] {
					c.release(rest, UploadedObject{}, ErrClosed)
				}
				c.failQueue()
				return
			}
		}
		if closing && empty {
			return
		}
		if plan.Wait > 0 {
			timer.Reset(plan.Wait)
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

func (c *Combiner) failQueue() {
	c.mu.Lock()
	q := c.mu.queue
	c.mu.queue, c.mu.view, c.mu.queuedBytes = nil, nil, 0
	c.mu.Unlock()
	c.release(q, UploadedObject{}, ErrClosed)
}

// release gives up the budget of items and tells their callers.
func (c *Combiner) release(items []item, obj UploadedObject, err error) {
	if len(items) == 0 {
		return
	}
	var b int64
	for _, it := range items {
		b += it.size
	}
	c.mu.Lock()
	c.mu.heldSlices -= len(items)
	c.mu.heldBytes -= b
	close(c.mu.space)
	c.mu.space = make(chan struct{})
	c.mu.Unlock()
	for _, it := range items {
		if it.s.Done != nil {
			it.s.Done(obj, err)
		}
	}
}

func (c *Combiner) jitter(d time.Duration) time.Duration {
	c.randMu.Lock()
	defer c.randMu.Unlock()
	// Equal jitter: [d/2, d], so backoff still grows but retries spread.
	return d/2 + time.Duration(c.cfg.Rand.Int64N(int64(d/2)+1))
}

func (c *Combiner) newID() string {
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

// worker encodes and uploads objects. Its encode buffer is reused: the
// writer does not retain the body.
func (c *Combiner) worker() {
	var enc objformat.Encoder
	defer enc.Close()
	var buf []byte
	var in []objformat.Input
	for j := range c.jobs {
		in = in[:0]
		for _, it := range j.items {
			s := &it.s
			in = append(in, objformat.Input{TopicPartition: s.TopicPartition, LeaderEpoch: s.LeaderEpoch,
				BaseOffset: s.BaseOffset, LastOffset: s.LastOffset, Data: s.Data})
		}
		body, entries, err := enc.Append(buf, in, c.cfg.Codec)
		if err != nil {
			c.log.Error("combiner: encode", "err", err, "slices", len(in))
			c.results <- result{seq: j.seq, items: j.items, err: err}
			continue
		}
		buf = body
		obj, err := c.upload(body, entries)
		clear(in) // drop references to slice data
		c.results <- result{seq: j.seq, items: j.items, obj: obj, err: err}
	}
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
		c.log.Warn("combiner: upload retry", "key", key, "attempt", attempt+1, "err", err)
		if !c.sleep(c.backoff(attempt)) {
			c.setInFlight(key, false)
			return UploadedObject{}, ErrClosed
		}
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
			c.finish(r)
		}
	}
	if len(pending) != 0 {
		// Every cut object gets exactly one result; a gap is a bug.
		panic(fmt.Sprintf("combiner: %d results left unpublished, next seq %d", len(pending), next))
	}
}

func (c *Combiner) finish(r result) {
	if r.err != nil {
		c.m.failed.Add(1)
		c.release(r.items, UploadedObject{}, r.err)
		return
	}
	err := c.publish(r.obj)
	c.setInFlight(r.obj.Key, false)
	if err != nil {
		c.m.failed.Add(1)
		c.release(r.items, UploadedObject{}, err)
		return
	}
	c.m.pub.Add(1)
	c.release(r.items, r.obj, nil)
}

func (c *Combiner) publish(obj UploadedObject) error {
	for attempt := 0; ; attempt++ {
		if c.abort.Err() != nil {
			return ErrClosed
		}
		actx, cancel := context.WithTimeout(c.abort, c.cfg.AttemptTimeout)
		err := c.cfg.Publisher.PublishObject(actx, obj)
		cancel()
		if err == nil {
			return nil
		}
		if !c.cfg.Retriable(err) {
			c.log.Error("combiner: publish failed; the object is left for the orphan collector", "key", obj.Key, "err", err)
			return fmt.Errorf("combiner: publish %s: %w", obj.Key, err)
		}
		c.m.pubRetries.Add(1)
		c.log.Warn("combiner: publish retry", "key", obj.Key, "attempt", attempt+1, "err", err)
		if !c.sleep(c.backoff(attempt)) {
			return ErrClosed
		}
	}
}

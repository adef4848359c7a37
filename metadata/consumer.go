package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/stagehist"
)

// ConsumerConfig says what a Consumer reads.
type ConsumerConfig struct {
	TopicConfig
	// Follow: the user partitions whose metadata this broker needs (its
	// follower replicas). The consumer reads the metadata partitions they
	// map to, which also carry other partitions' events; State indexes
	// those too. Nil or empty: every metadata partition.
	Follow []TopicPartition
	// Observer, if set, gets the metadata_delivery stage of every record
	// read once the consumer is ready: from the record's timestamp (set by
	// the publishing client) to its application, on the consumer's clock.
	// Records replayed while bootstrapping are not observed.
	Observer stagehist.Observer
}

// ConsumerStats counts the records a Consumer has seen.
type ConsumerStats struct {
	Records   int64 // records read
	Malformed int64 // refused by the decoder or for a key/partition mismatch
	Refused   int64 // illegal transitions refused by State
	Ignored   int64 // updates for unknown objects
}

// Consumer reads its metadata partitions from the earliest offset and
// feeds every event to a State. It is ready once it has read up to the end
// offsets listed when it started. One goroutine owns the client's polling;
// the accessors are safe for concurrent use; Close stops the goroutine.
type Consumer struct {
	cfg        ConsumerConfig
	cl         *kgo.Client
	state      *State
	clk        clock.Clock
	logger     *slog.Logger
	partitions int32 // of the metadata topic
	followed   []int32

	ready  chan struct{}
	done   chan struct{}
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		start     time.Time
		bootstrap time.Duration
		isReady   bool
		readyEnds map[int32]int64
		positions map[int32]int64 // next offset to read
		moved     chan struct{}   // closed and replaced when positions move
		stats     ConsumerStats
	}
}

// StartConsumer creates the topic if needed, lists the end offsets of the
// followed metadata partitions and starts reading them from the earliest
// offset into state. ctx bounds only the start; Close stops the consumer.
func StartConsumer(ctx context.Context, cfg ConsumerConfig, state *State, clk clock.Clock, logger *slog.Logger, opts ...kgo.Opt) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(cfg.Bootstrap...),
		kgo.ClientID(cfg.ClientID),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	base = append(base, cfg.Security.Opts()...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("metadata: consumer client: %w", err)
	}
	c := &Consumer{cfg: cfg, cl: cl, state: state, clk: clk, logger: logger,
		ready: make(chan struct{}), done: make(chan struct{})}
	c.mu.start = clk.Now()
	c.mu.positions = make(map[int32]int64)
	c.mu.moved = make(chan struct{})

	if c.partitions, err = EnsureTopic(ctx, cl, &cfg.TopicConfig, logger); err != nil {
		cl.Close()
		return nil, err
	}
	c.followed = followedPartitions(cfg.Follow, c.partitions)
	starts, ends, err := listOffsets(ctx, cl, cfg.Topic, c.followed)
	if err != nil {
		cl.Close()
		return nil, err
	}
	c.mu.readyEnds = ends
	for p, s := range starts {
		c.mu.positions[p] = s
	}
	offs := make(map[int32]kgo.Offset, len(c.followed))
	for _, p := range c.followed {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offs})
	c.mu.Lock()
	c.checkReadyLocked()
	c.mu.Unlock()

	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.run(runCtx)
	return c, nil
}

func followedPartitions(follow []TopicPartition, n int32) []int32 {
	if len(follow) == 0 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(i)
		}
		return out
	}
	set := make(map[int32]bool)
	for _, tp := range follow {
		set[MetadataPartition(tp, n)] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func listOffsets(ctx context.Context, cl *kgo.Client, topic string, parts []int32) (starts, ends map[int32]int64, err error) {
	adm := kadm.NewClient(cl)
	collect := func(what string, lo kadm.ListedOffsets, err error) (map[int32]int64, error) {
		if err != nil {
			return nil, fmt.Errorf("metadata: list %s offsets of %s: %w", what, topic, err)
		}
		out := make(map[int32]int64, len(parts))
		var first error
		lo.Each(func(o kadm.ListedOffset) {
			if o.Err != nil && first == nil {
				first = fmt.Errorf("metadata: list %s offset of %s-%d: %w", what, topic, o.Partition, o.Err)
			}
			out[o.Partition] = o.Offset
		})
		if first != nil {
			return nil, first
		}
		for p := range out {
			if !slices.Contains(parts, p) {
				delete(out, p)
			}
		}
		return out, nil
	}
	lo, err := adm.ListStartOffsets(ctx, topic)
	if starts, err = collect("start", lo, err); err != nil {
		return nil, nil, err
	}
	lo, err = adm.ListEndOffsets(ctx, topic)
	if ends, err = collect("end", lo, err); err != nil {
		return nil, nil, err
	}
	return starts, ends, nil
}

func (c *Consumer) run(ctx context.Context) {
	defer close(c.done)
	for {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.Canceled) {
				continue
			}
			c.logger.Warn("metadata fetch error", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
		}
		c.applyPoll(fetches)
	}
}

// applyPoll decodes every record of one poll and hands the events to
// State in one ApplyAll, so the follower wakes once per poll (its index
// changes once), then moves the positions.
func (c *Consumer) applyPoll(fetches kgo.Fetches) {
	var (
		evs  []Event
		recs []*kgo.Record
		ends = map[int32]int64{}
	)
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		for _, r := range p.Records {
			ev, err := DecodeRecord(r.Key, r.Value)
			if err == nil {
				err = c.checkPartition(ev, r.Partition)
			}
			if err != nil {
				c.logger.Warn("metadata event refused", "partition", r.Partition, "offset", r.Offset, "err", err)
				c.mu.Lock()
				c.mu.stats.Records++
				c.mu.stats.Malformed++
				c.mu.Unlock()
				continue
			}
			evs, recs = append(evs, ev), append(recs, r)
		}
		if n := len(p.Records); n > 0 {
			ends[p.Partition] = max(ends[p.Partition], p.Records[n-1].Offset+1)
		}
	})
	if len(evs) > 0 {
		if c.cfg.Observer != nil && c.isReady() {
			now := c.clk.Now()
			for _, r := range recs {
				c.cfg.Observer.Observe(stagehist.MetadataDelivery, now.Sub(r.Timestamp))
			}
		}
		// Counted after ApplyAll: its callback runs under State's lock,
		// and c.mu is taken before it elsewhere (checkReadyLocked).
		errs := make([]error, len(evs))
		c.state.ApplyAll(evs, func(i int, err error) { errs[i] = err })
		for i, err := range errs {
			c.applied(recs[i], err)
		}
	}
	for p, next := range ends {
		c.advance(p, next)
	}
}

// applied counts one event's result and logs a refusal.
func (c *Consumer) applied(r *kgo.Record, err error) {
	c.mu.Lock()
	c.mu.stats.Records++
	switch {
	case err == nil:
	case errors.Is(err, ErrUnknownObject):
		c.mu.stats.Ignored++
	default:
		c.mu.stats.Refused++
	}
	c.mu.Unlock()
	if err != nil {
		c.logger.Warn("metadata event not applied", "partition", r.Partition, "offset", r.Offset, "err", err)
	}
}

func (c *Consumer) checkPartition(ev Event, partition int32) error {
	want := int32(-1)
	switch e := ev.(type) {
	case *ObjectMetadata:
		want = e.MetadataPartition
	case *StateUpdate:
		want = e.MetadataPartition
	case *Tombstone:
		want = e.MetadataPartition
	case *PartitionDelete:
		want = MetadataPartition(e.TopicPartition, c.partitions)
	case *DeadRange:
		want = MetadataPartition(e.TopicPartition, c.partitions)
	case *ReplicatedOffset:
		want = MetadataPartition(e.TopicPartition, c.partitions)
	}
	if want != partition {
		return malformed("%s event for metadata partition %d found on partition %d", ev.Type(), want, partition)
	}
	return nil
}

func (c *Consumer) advance(partition int32, next int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if next > c.mu.positions[partition] {
		c.mu.positions[partition] = next
	}
	close(c.mu.moved)
	c.mu.moved = make(chan struct{})
	c.checkReadyLocked()
}

func (c *Consumer) checkReadyLocked() {
	if c.mu.isReady {
		return
	}
	for p, end := range c.mu.readyEnds {
		if c.mu.positions[p] < end {
			return
		}
	}
	c.mu.isReady = true
	c.mu.bootstrap = c.clk.Since(c.mu.start)
	close(c.ready)
	st := c.state.Stats()
	c.logger.Info("metadata consumer ready", "bootstrap", c.mu.bootstrap,
		"metadata_partitions", len(c.followed), "records", c.mu.stats.Records,
		"object_parts", st.Parts, "slices", st.Slices)
}

func (c *Consumer) isReady() bool {
	select {
	case <-c.ready:
		return true
	default:
		return false
	}
}

// Ready is closed once the consumer has read up to the end offsets it
// listed at start.
func (c *Consumer) Ready() <-chan struct{} { return c.ready }

// BootstrapDuration is the time from start to ready, and false before ready.
func (c *Consumer) BootstrapDuration() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.bootstrap, c.mu.isReady
}

// MetadataPartitions returns the metadata partitions read, ascending.
func (c *Consumer) MetadataPartitions() []int32 { return slices.Clone(c.followed) }

// NumPartitions is the metadata topic's partition count.
func (c *Consumer) NumPartitions() int32 { return c.partitions }

// Stats returns the record counts so far.
func (c *Consumer) Stats() ConsumerStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.stats
}

// CatchUp lists the current end offsets and waits until the consumer has
// read up to them or ctx ends. Use it to see one's own published events.
func (c *Consumer) CatchUp(ctx context.Context) error {
	_, ends, err := listOffsets(ctx, c.cl, c.cfg.Topic, c.followed)
	if err != nil {
		return err
	}
	for {
		c.mu.Lock()
		moved := c.mu.moved
		behind := false
		for p, end := range ends {
			if c.mu.positions[p] < end {
				behind = true
				break
			}
		}
		c.mu.Unlock()
		if !behind {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return fmt.Errorf("metadata: catch up: %w", ctx.Err())
		case <-c.done:
			return errors.New("metadata: catch up: consumer closed")
		}
	}
}

// Close stops reading and closes the client.
func (c *Consumer) Close() {
	c.cancel()
	<-c.done
	c.cl.Close()
}

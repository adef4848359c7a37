package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/clock"
)

// Publisher writes events to the metadata topic. Its franz-go client is
// idempotent (acks=all), so records of one metadata partition keep their
// order across retries, and a manual partitioner puts each record on the
// metadata partition the event names. Safe for concurrent use; calls for
// one user partition must be made in order by the caller (the combiner
// publishes in upload-completion order per partition).
type Publisher struct {
	cfg    TopicConfig
	cl     *kgo.Client
	clk    clock.Clock
	logger *slog.Logger

	mu struct {
		sync.Mutex
		partitions int32 // 0 until the topic is known
	}
}

// Publisher's methods take ctx and return when every record is acknowledged,
// or with the first error; the ctx deadline bounds the wait when Kafka is
// unreachable. Records not yet written when ctx ends are failed.

// NewPublisher makes the client; it does not connect yet. The topic is
// created on first use.
func NewPublisher(cfg TopicConfig, clk clock.Clock, logger *slog.Logger, opts ...kgo.Opt) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(cfg.Bootstrap...),
		kgo.ClientID(cfg.ClientID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
	base = append(base, cfg.Security.Opts()...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("metadata: publisher client: %w", err)
	}
	return &Publisher{cfg: cfg, cl: cl, clk: clk, logger: logger}, nil
}

// Close flushes nothing and closes the client; in-flight calls fail.
func (p *Publisher) Close() { p.cl.Close() }

// Partitions returns the metadata topic's partition count, creating the
// topic on first use. While Kafka is unreachable it retries (backoff 50 ms
// doubling to 2 s) until ctx ends, then returns an error wrapping ctx.Err().
func (p *Publisher) Partitions(ctx context.Context) (int32, error) {
	p.mu.Lock()
	n := p.mu.partitions
	p.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	backoff := 50 * time.Millisecond
	for {
		var err error
		n, err = EnsureTopic(ctx, p.cl, &p.cfg, p.logger)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("metadata: %w (last error: %v)", ctx.Err(), err)
		}
		p.logger.Warn("metadata topic not reachable, retrying", "err", err, "backoff", backoff)
		t := p.clk.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("metadata: %w (last error: %v)", ctx.Err(), err)
		case <-t.C():
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	p.mu.Lock()
	p.mu.partitions = n
	p.mu.Unlock()
	return n, nil
}

// Publish writes events, each to the metadata partition it names (for a
// PartitionDelete, DeadRange or ReplicatedOffset, the one its user
// partition maps to), and returns once
// all are acknowledged.
func (p *Publisher) Publish(ctx context.Context, evs ...Event) error {
	n, err := p.Partitions(ctx)
	if err != nil {
		return err
	}
	recs := make([]*kgo.Record, 0, len(evs))
	for _, ev := range evs {
		r, err := p.record(ev, n)
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	return p.produce(ctx, recs)
}

// produce waits for every record's acknowledgement or for ctx. kgo cannot
// fail a record an idempotent producer may already have sent (that would
// break its sequence numbers), so a record in flight when ctx ends stays
// buffered and may still land later; that is harmless because events are
// idempotent snapshots under per-object keys, and order per metadata
// partition is kept. The goroutine waiting for it ends when it lands or the
// client closes.
func (p *Publisher) produce(ctx context.Context, recs []*kgo.Record) error {
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	wg.Add(len(recs))
	for _, r := range recs {
		p.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
			}
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("metadata: publish %d events to %s: %w", len(recs), p.cfg.Topic, ctx.Err())
	}
	if first != nil {
		return fmt.Errorf("metadata: publish %d events to %s: %w", len(recs), p.cfg.Topic, first)
	}
	return nil
}

func (p *Publisher) record(ev Event, n int32) (*kgo.Record, error) {
	r := &kgo.Record{Topic: p.cfg.Topic, Key: RecordKey(ev)}
	switch e := ev.(type) {
	case *ObjectMetadata:
		r.Partition = e.MetadataPartition
	case *StateUpdate:
		r.Partition = e.MetadataPartition
	case *Tombstone:
		r.Partition = e.MetadataPartition
		if err := e.Validate(); err != nil {
			return nil, err
		}
		return p.checkPartition(r, n)
	case *PartitionDelete:
		r.Partition = MetadataPartition(e.TopicPartition, n)
	case *DeadRange:
		r.Partition = MetadataPartition(e.TopicPartition, n)
	case *ReplicatedOffset:
		r.Partition = MetadataPartition(e.TopicPartition, n)
	default:
		return nil, fmt.Errorf("metadata: cannot publish %T", ev)
	}
	v, err := Encode(nil, ev)
	if err != nil {
		return nil, err
	}
	r.Value = v
	return p.checkPartition(r, n)
}

// ErrWrongPartitionCount: an event names a metadata partition the topic
// does not have (it was split for a different partition count).
var ErrWrongPartitionCount = errors.New("metadata: event names a metadata partition the topic does not have")

func (p *Publisher) checkPartition(r *kgo.Record, n int32) (*kgo.Record, error) {
	if r.Partition < 0 || r.Partition >= n {
		return nil, fmt.Errorf("%w: partition %d of %d", ErrWrongPartitionCount, r.Partition, n)
	}
	return r, nil
}

// PublishObject splits obj by metadata partition (Split) and publishes the
// parts in one call, each keyed (object id, metadata partition). Use it for
// COPY_SEGMENT_FINISHED right after the PUT succeeded, and for every later
// state with obj.State set: each part is a full snapshot, so compaction
// always leaves a self-sufficient record.
func (p *Publisher) PublishObject(ctx context.Context, obj *ObjectMetadata) error {
	n, err := p.Partitions(ctx)
	if err != nil {
		return err
	}
	parts := Split(obj, n)
	evs := make([]Event, len(parts))
	for i, pt := range parts {
		evs[i] = pt
	}
	return p.Publish(ctx, evs...)
}

// PublishCopyFinished publishes obj in COPY_SEGMENT_FINISHED with the given
// event time.
func (p *Publisher) PublishCopyFinished(ctx context.Context, obj ObjectMetadata, eventTimestampMs int64) error {
	obj.State, obj.EventTimestampMs = CopySegmentFinished, eventTimestampMs
	return p.PublishObject(ctx, &obj)
}

// PublishTombstones removes every part of obj from the topic.
func (p *Publisher) PublishTombstones(ctx context.Context, obj *ObjectMetadata) error {
	n, err := p.Partitions(ctx)
	if err != nil {
		return err
	}
	parts := Split(obj, n)
	evs := make([]Event, len(parts))
	for i, pt := range parts {
		evs[i] = &Tombstone{pt.Ref()}
	}
	return p.Publish(ctx, evs...)
}

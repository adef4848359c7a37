package kafkalog

import (
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/kwal/kwal/clock"
)

// Defaults, Kafka's where Kafka has one.
const (
	DefaultSegmentBytes              = 1 << 30           // log.segment.bytes
	DefaultSegmentMs                 = 7 * 24 * 3600_000 // log.roll.ms (log.roll.hours=168)
	DefaultRetentionMs               = 7 * 24 * 3600_000 // log.retention.ms
	DefaultIndexIntervalBytes        = 4096              // log.index.interval.bytes
	DefaultHighWatermarkCheckpointMs = 5000              // replica.high.watermark.checkpoint.interval.ms
	DefaultProducerSnapshots         = 2
	DefaultProducerIDExpirationMs    = 86_400_000 // producer.id.expiration.ms
)

// Config configures a Log. Zero fields take defaults in Validate; a zero
// value therefore cannot mean "zero" (RetentionMs 0 is the default, not
// "delete at once").
type Config struct {
	// SegmentBytes: a batch that would grow the active segment past this
	// goes to a new segment. Default 1 GiB, at most math.MaxInt32.
	SegmentBytes int64
	// SegmentMs: roll when the active segment's first append is this old
	// (by Clock). Default 7 days.
	SegmentMs int64
	// RetentionMs: delete a segment whose newest batch timestamp (or, for
	// batches without timestamps, whose last append) is older. Default 7
	// days; -1 unlimited.
	RetentionMs int64
	// RetentionBytes: delete the oldest segments while the log exceeds
	// this. Default and -1: unlimited.
	RetentionBytes int64
	// FlushMessages: fsync after this many records since the last fsync
	// (flush.messages). Default math.MaxInt64: the OS decides.
	FlushMessages int64
	// FlushMs: fsync at an append when this long has passed since the
	// last fsync (flush.ms). Default math.MaxInt64.
	FlushMs int64
	// IndexIntervalBytes: bytes between offset-index entries. Default 4096.
	IndexIntervalBytes int
	// MaxBatchBytes bounds a batch appended as leader. Default
	// DefaultMaxBatchBytes (Kafka's message.max.bytes).
	MaxBatchBytes int
	// HighWatermarkCheckpointMs: SetHighWatermark writes the checkpoint
	// when this long has passed since the last write; Flush and Close
	// always write it. Default 5000; -1 writes on every change.
	HighWatermarkCheckpointMs int64
	// ProducerSnapshots: how many producer-state snapshots (taken at each
	// roll and at Close) to keep, newest first. Default 2; at least 1.
	ProducerSnapshots int
	// ProducerIDExpirationMs: a producer whose latest batch timestamp is
	// this old is forgotten by RemoveExpiredProducers and when the table
	// is loaded (producer.id.expiration.ms). Default 86400000 (1 day).
	ProducerIDExpirationMs int64
	// ProducerStateRebuildDisabled makes Open start with an empty
	// producer table and write no snapshots: the behaviour before producer
	// state was rebuilt, kept only so that tests can show the duplicates
	// an idempotent producer then gets after a restart. Never set it in
	// production.
	ProducerStateRebuildDisabled bool

	// Compacted: the topic's cleanup.policy includes compact. Its sealed
	// segments may be rewritten by the cleaner (Compact), and a follower
	// accepts the leader's compacted batches (offset gaps, batches with
	// fewer records than their offset range).
	Compacted bool

	Clock  clock.Clock  // default clock.Real{}
	Logger *slog.Logger // default slog.Default()
	// OnChange, if set, is called after every call that may have changed
	// what a reader sees (append, high watermark, truncation, log start,
	// segment deletion, a compacted segment swapped in), with no lock of
	// the log held. It must not block; it may be called when nothing
	// changed. The broker uses it to signal its state-change feed.
	OnChange func()
	FS       FS // default OSFS{}
}

var errConfig = errors.New("kafkalog: invalid config")

// Validate fills defaults and rejects nonsense. Errors wrap an internal
// config sentinel and name the field.
func (c *Config) Validate() error {
	def := func(p *int64, d int64) {
		if *p == 0 {
			*p = d
		}
	}
	def(&c.SegmentBytes, DefaultSegmentBytes)
	def(&c.SegmentMs, DefaultSegmentMs)
	def(&c.RetentionMs, DefaultRetentionMs)
	def(&c.RetentionBytes, -1)
	def(&c.FlushMessages, math.MaxInt64)
	def(&c.FlushMs, math.MaxInt64)
	def(&c.HighWatermarkCheckpointMs, DefaultHighWatermarkCheckpointMs)
	def(&c.ProducerIDExpirationMs, DefaultProducerIDExpirationMs)
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.ProducerSnapshots == 0 {
		c.ProducerSnapshots = DefaultProducerSnapshots
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FS == nil {
		c.FS = OSFS{}
	}
	switch {
	case c.SegmentBytes < BatchHeaderSize || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("%w: SegmentBytes %d not in [%d, %d]", errConfig, c.SegmentBytes, BatchHeaderSize, math.MaxInt32)
	case c.SegmentMs < 1:
		return fmt.Errorf("%w: SegmentMs %d", errConfig, c.SegmentMs)
	case c.RetentionMs < -1:
		return fmt.Errorf("%w: RetentionMs %d", errConfig, c.RetentionMs)
	case c.RetentionBytes < -1:
		return fmt.Errorf("%w: RetentionBytes %d", errConfig, c.RetentionBytes)
	case c.FlushMessages < 1:
		return fmt.Errorf("%w: FlushMessages %d", errConfig, c.FlushMessages)
	case c.FlushMs < 0:
		return fmt.Errorf("%w: FlushMs %d", errConfig, c.FlushMs)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("%w: IndexIntervalBytes %d", errConfig, c.IndexIntervalBytes)
	case c.MaxBatchBytes < BatchHeaderSize:
		return fmt.Errorf("%w: MaxBatchBytes %d below the batch header size", errConfig, c.MaxBatchBytes)
	case c.ProducerIDExpirationMs < 1:
		return fmt.Errorf("%w: ProducerIDExpirationMs %d", errConfig, c.ProducerIDExpirationMs)
	case c.ProducerSnapshots < 1:
		return fmt.Errorf("%w: ProducerSnapshots %d", errConfig, c.ProducerSnapshots)
	case c.HighWatermarkCheckpointMs < -1:
		return fmt.Errorf("%w: HighWatermarkCheckpointMs %d", errConfig, c.HighWatermarkCheckpointMs)
	}
	return nil
}

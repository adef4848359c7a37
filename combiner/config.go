package combiner

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// Defaults. The KIP names the keys but gives no values; these are chosen
// for S3 Express One Zone at the KIP's "300-500 KB every 10-20 ms".
const (
	// remote.wal.log.manager.combiner.task.upload.bytes
	DefaultUploadBytes = 256 << 10
	// remote.wal.log.manager.combiner.task.interval.ms
	DefaultInterval = 10 * time.Millisecond
	// remote.wal.log.manager.combiner.thread.pool.size: uploads in flight.
	// At 100 objects/s and a p99 PUT of ~30 ms, Little's law wants 3; one
	// more absorbs a slow PUT without stalling the queue.
	DefaultThreadPoolSize = 4
	// remote.wal.log.manager.combiner.queue.size: slices held, from Submit
	// until published.
	DefaultQueueSlices = 8192
	// Bytes held, from Submit until published (kwal's own bound).
	DefaultQueueBytes = 64 << 20
	// One partition holds at most this share of each bound by default, so
	// that a backlog of a few partitions (a hot one, or one whose slices
	// keep being given up and re-cut) leaves room for the others.
	DefaultPartitionShare = 4
	// Objects are at most this big unless one slice is bigger.
	DefaultMaxObjectBytes = 4 << 20

	DefaultAttemptTimeout = 10 * time.Second
	DefaultUploadTimeout  = time.Minute
	DefaultBackoffMin     = 10 * time.Millisecond
	DefaultBackoffMax     = time.Second
)

// Config configures a Combiner. Validate fills defaults.
type Config struct {
	BrokerID int32
	// KeyPrefix goes before "wal/" in every key; empty or ending in "/".
	KeyPrefix string
	// Bucket is recorded in UploadedObject; the writer knows where to write.
	Bucket string

	QueueSlices int
	QueueBytes  int64
	// PartitionQueueSlices and PartitionQueueBytes bound what one
	// partition holds (from Submit until published or given up) within
	// QueueSlices and QueueBytes; default a DefaultPartitionShare-th of
	// each. A partition holding nothing takes any one slice.
	PartitionQueueSlices int
	PartitionQueueBytes  int64
	Interval             time.Duration
	UploadBytes          int64
	MaxObjectBytes       int64
	ThreadPoolSize       int
	Codec                metadata.Codec

	// AttemptTimeout bounds one PUT or publish attempt (a context deadline,
	// so it runs on real time whatever the Clock).
	AttemptTimeout time.Duration
	// UploadTimeout bounds all attempts to upload one object, measured on
	// Clock. The orphan grace period must exceed it.
	UploadTimeout time.Duration
	BackoffMin    time.Duration
	BackoffMax    time.Duration

	Writer    ObjectWriter
	Publisher Publisher
	Clock     clock.Clock
	Logger    *slog.Logger
	// Rand seeds backoff jitter and object ids; nil uses a ChaCha8 source
	// seeded from crypto/rand. Tests pass a seeded one to replay.
	Rand *rand.Rand
	// Retriable classifies upload and publish errors; nil is
	// DefaultRetriable.
	Retriable func(error) bool
}

// Validate fills defaults and rejects nonsense.
func (c *Config) Validate() error {
	if c.Writer == nil || c.Publisher == nil {
		return errors.New("combiner: config needs a Writer and a Publisher")
	}
	if c.BrokerID < 0 {
		return fmt.Errorf("combiner: broker id %d", c.BrokerID)
	}
	if c.KeyPrefix != "" && !strings.HasSuffix(c.KeyPrefix, "/") {
		return fmt.Errorf("combiner: key prefix %q must end in /", c.KeyPrefix)
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.QueueSlices == 0 {
		c.QueueSlices = DefaultQueueSlices
	}
	if c.ThreadPoolSize == 0 {
		c.ThreadPoolSize = DefaultThreadPoolSize
	}
	def(&c.QueueBytes, DefaultQueueBytes)
	if c.PartitionQueueSlices == 0 {
		c.PartitionQueueSlices = max(1, c.QueueSlices/DefaultPartitionShare)
	}
	def(&c.PartitionQueueBytes, max(1, c.QueueBytes/DefaultPartitionShare))
	def(&c.UploadBytes, DefaultUploadBytes)
	def(&c.MaxObjectBytes, max(DefaultMaxObjectBytes, c.UploadBytes))
	defd(&c.Interval, DefaultInterval)
	defd(&c.AttemptTimeout, DefaultAttemptTimeout)
	defd(&c.UploadTimeout, DefaultUploadTimeout)
	defd(&c.BackoffMin, DefaultBackoffMin)
	defd(&c.BackoffMax, DefaultBackoffMax)
	switch {
	case c.QueueSlices < 1 || c.QueueBytes < 1:
		return fmt.Errorf("combiner: queue size %d slices / %d bytes", c.QueueSlices, c.QueueBytes)
	case c.PartitionQueueSlices < 1 || c.PartitionQueueBytes < 1 ||
		c.PartitionQueueSlices > c.QueueSlices || c.PartitionQueueBytes > c.QueueBytes:
		return fmt.Errorf("combiner: per-partition queue size %d slices / %d bytes must be ≥ 1 and within the queue's %d / %d",
			c.PartitionQueueSlices, c.PartitionQueueBytes, c.QueueSlices, c.QueueBytes)
	case c.Interval < 0 || c.UploadBytes < 1:
		return fmt.Errorf("combiner: interval %v, upload bytes %d", c.Interval, c.UploadBytes)
	case c.MaxObjectBytes < c.UploadBytes:
		return fmt.Errorf("combiner: max object bytes %d < upload bytes %d", c.MaxObjectBytes, c.UploadBytes)
	case c.ThreadPoolSize < 1:
		return fmt.Errorf("combiner: thread pool size %d", c.ThreadPoolSize)
	case c.Codec != metadata.CodecNone && c.Codec != metadata.CodecZstd:
		return fmt.Errorf("combiner: codec %v", c.Codec)
	case c.AttemptTimeout < 0 || c.UploadTimeout < 0 || c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin:
		return fmt.Errorf("combiner: timeouts %v/%v, backoff %v..%v", c.AttemptTimeout, c.UploadTimeout, c.BackoffMin, c.BackoffMax)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Rand == nil {
		var seed [32]byte
		if _, err := io.ReadFull(crand.Reader, seed[:]); err != nil {
			return fmt.Errorf("combiner: seed: %w", err)
		}
		c.Rand = rand.New(rand.NewChaCha8(seed))
	}
	if c.Retriable == nil {
		c.Retriable = DefaultRetriable
	}
	return nil
}

func (c *Config) policy() Policy {
	return Policy{UploadBytes: c.UploadBytes, MaxObjectBytes: c.MaxObjectBytes, Interval: c.Interval}
}

// DefaultRetriable: an error that says (Retriable() bool) decides; invalid
// keys, corrupt objects and cancellation are final; anything else (5xx,
// 503 SlowDown, timeouts, connection resets, an unreachable Kafka) is
// retried.
func DefaultRetriable(err error) bool {
	var r interface{ Retriable() bool }
	if errors.As(err, &r) {
		return r.Retriable()
	}
	switch {
	case errors.Is(err, objstore.ErrInvalidKey), errors.Is(err, context.Canceled), errors.Is(err, ErrClosed):
		return false
	}
	return true
}

// Key returns the object key for id uploaded by broker at t:
// <prefix>wal/<broker-id>/<yyyymmddhh>/<id as UUID>.kwal. Every key has the
// same depth and ends in a leaf name, so none is a "/"-prefix of another.
func Key(prefix string, broker int32, t time.Time, oid metadata.ObjectID) string {
	id := oid.UUID()
	b := make([]byte, 0, len(prefix)+len("wal/")+11+len("/2006010215/")+len(id)+len(".kwal"))
	b = append(b, prefix...)
	b = append(b, "wal/"...)
	b = strconv.AppendInt(b, int64(broker), 10)
	b = append(b, '/')
	b = t.UTC().AppendFormat(b, "2006010215")
	b = append(b, '/')
	b = append(b, id...)
	b = append(b, ".kwal"...)
	return string(b)
}

// WALPrefix is the prefix every key of prefix's WAL objects starts with.
func WALPrefix(prefix string) string { return prefix + "wal/" }

// IsWALKey reports whether key (under prefix) has the shape Key makes.
func IsWALKey(prefix, key string) bool {
	rest, ok := strings.CutPrefix(key, WALPrefix(prefix))
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || len(parts[1]) != 10 || !strings.HasSuffix(parts[2], ".kwal") || len(parts[2]) <= len(".kwal") {
		return false
	}
	for _, s := range []string{parts[0], parts[1]} {
		if s == "" {
			return false
		}
		for _, r := range s {
			if r < '0' || r > '9' {
				return false
			}
		}
	}
	return true
}

// newID makes a random object id (version 4 UUID layout) from r.
func newID(r *rand.Rand) metadata.ObjectID {
	var id metadata.ObjectID
	binary.BigEndian.PutUint64(id[:8], r.Uint64())
	binary.BigEndian.PutUint64(id[8:], r.Uint64())
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

package follower

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/retry"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/ledger"
)

// Index is the follower's view of the metadata: the FINISHED slices of a
// partition. StateIndex adapts *metadata.State.
type Index interface {
	// Slices returns the slices of tp whose LastOffset is at least
	// fromOffset, in any order; duplicates and overlapping slices of other
	// leader epochs may be present. The caller owns the returned slice.
	Slices(tp metadata.TopicPartition, fromOffset int64) []Located
	// Changed returns a channel closed at the next change. Take it before
	// calling Slices so no change is missed. The follower calls Slices for
	// a partition again only once the channel it took is closed (or its
	// log was truncated), so every change must close it: new slices,
	// state changes, removals.
	Changed() <-chan struct{}
}

// IndexChanges is what an Index may also say: which partitions changed.
// With it, an index change has the follower read again only the slices
// of the partitions it touched; without it, those of every partition.
// *metadata.State's ChangedSince has this contract.
type IndexChanges interface {
	// ChangedSince returns the partitions changed after since (the seq an
	// earlier call returned, 0 before any) and the seq to pass next;
	// complete false means the changes since are not all known, and every
	// partition must be taken as changed. It must list every partition
	// whose Slices a change may have changed.
	ChangedSince(since uint64) (tps []metadata.TopicPartition, seq uint64, complete bool)
}

// Log is what the follower needs of one partition's local log.
// *kafkalog.Log implements it.
type Log interface {
	LogEndOffset() int64
	// AppendAsFollower appends whole batches starting exactly at the log
	// end, validating each batch (CRC included) first; nothing is appended
	// on error.
	AppendAsFollower(batches []byte) (kafkalog.AppendInfo, error)
	// AppendVerifiedAsFollower is AppendAsFollower for batches validated
	// already by kafkalog.ValidateBatchesCRC32C (CRC and header, as Kafka's
	// follower checks a batch): their CRCs are not checked again, their
	// framing, offsets and epochs are.
	AppendVerifiedAsFollower(batches []byte) (kafkalog.AppendInfo, error)
	// Truncate removes every batch at or after to (a batch boundary).
	Truncate(to int64) error
	LatestEpoch() (int32, bool)
	EpochEntries() []kafkalog.EpochEntry
}

var _ Log = (*kafkalog.Log)(nil)

// LeaderInfo is what the follower last learned about a partition's leader
// from its FollowerFetch responses.
type LeaderInfo struct {
	// Epoch is the current leader epoch.
	Epoch int32
	// LogEnd is the leader's log end offset (or high watermark) as last
	// reported; it drives the lag metric and gap detection.
	LogEnd int64
	// Rack is the leader's rack, for the ledger.
	Rack string
}

// LeaderState answers the leader-epoch questions. The broker implements it
// from FollowerFetch and OffsetsForLeaderEpoch.
type LeaderState interface {
	// Leader returns the known leader of tp; ok is false while there is
	// none (the follower then holds the partition).
	Leader(tp metadata.TopicPartition) (info LeaderInfo, ok bool)
	// EndOffsetForEpoch asks the current leader for the end of epoch in its
	// history (OffsetsForLeaderEpoch): the largest epoch <= epoch it has and
	// the start offset of the next one (its log end for its latest epoch);
	// (-1, -1) when epoch is above every epoch it has.
	EndOffsetForEpoch(ctx context.Context, tp metadata.TopicPartition, epoch int32) (foundEpoch int32, endOffset int64, err error)
}

// LeaderClient fetches record batches straight from the leader: the
// fallback ("recovery stream") when object storage cannot serve a range.
type LeaderClient interface {
	// Fetch returns whole batches of tp starting with the batch holding
	// offset, up to about maxBytes (at least one batch). The leader must
	// refuse (an error) when its leader epoch is not leaderEpoch, so that a
	// deposed leader cannot feed the follower. A trailing partial batch is
	// allowed and ignored.
	Fetch(ctx context.Context, tp metadata.TopicPartition, leaderEpoch int32, offset int64, maxBytes int) ([]byte, error)
}

// Reporter receives the log end offset after every change, to report it to
// the leader in the next FollowerFetch. Called from the driver goroutine:
// it must not block nor call back into the Follower.
type Reporter interface {
	ReportLogEnd(tp metadata.TopicPartition, logEnd int64)
}

// TransferRecorder counts bytes that crossed the network between racks.
// *ledger.Ledger implements it.
type TransferRecorder interface {
	RecordTransfer(component, fromRack, toRack string, tp ledger.TopicPartition, bytes int64)
}

var _ TransferRecorder = (*ledger.Ledger)(nil)

// ObjectReader is the read the follower makes of object storage.
// objstore.Store implements it.
type ObjectReader interface {
	GetRange(ctx context.Context, key string, off, length int64) ([]byte, error)
}

var _ ObjectReader = objstore.Store(nil)

// Errors.
var (
	// ErrCorruptSlice: a slice's stored bytes failed their CRC32C or length
	// check, or a batch inside failed its own; see *CorruptSliceError.
	ErrCorruptSlice = errors.New("follower: corrupt slice")
	// ErrMisaligned: a slice (or a leader fetch) straddles the log end but
	// has no batch boundary at it.
	ErrMisaligned = errors.New("follower: log end is not a batch boundary of the slice")
	// ErrClosed: the Follower was closed.
	ErrClosed = errors.New("follower: closed")
	// ErrPartitionExists and ErrUnknownPartition: AddPartition of a
	// followed partition, RemovePartition of one that is not.
	ErrPartitionExists  = errors.New("follower: partition already followed")
	ErrUnknownPartition = errors.New("follower: partition not followed")
)

// CorruptSliceError says which slice was refused and why. It matches
// ErrCorruptSlice and unwraps to the cause (objformat.ErrCorruptObject or
// kafkalog.ErrCorruptBatch).
type CorruptSliceError struct {
	Key   string
	Entry metadata.SliceEntry
	Err   error
}

func (e *CorruptSliceError) Error() string {
	return fmt.Sprintf("follower: corrupt slice %v [%d, %d] epoch %d in %s@%d: %v",
		e.Entry.TopicPartition, e.Entry.BaseOffset, e.Entry.LastOffset, e.Entry.LeaderEpoch, e.Key, e.Entry.Position, e.Err)
}

func (e *CorruptSliceError) Is(target error) bool { return target == ErrCorruptSlice }
func (e *CorruptSliceError) Unwrap() error        { return e.Err }

// Cause says why the follower fell back to the leader.
type Cause string

// Fallback causes.
const (
	CauseMetadataLag   Cause = "metadata-lag"   // the index has nothing at the log end yet
	CauseMetadataGap   Cause = "metadata-gap"   // the index has slices above a hole (retention, lost events)
	CauseFenced        Cause = "fenced"         // the only slices at the log end are from a cut-off epoch
	CauseFutureEpoch   Cause = "future-epoch"   // the slices at the log end are from an epoch not yet known
	CauseObjectMissing Cause = "object-missing" // GET answered not found
	CauseCorrupt       Cause = "corrupt"        // CRC or length checks failed
	CauseReadError     Cause = "read-error"     // GETs kept failing
	CauseReadTimeout   Cause = "read-timeout"   // object storage did not serve the log end within FallbackAfter
)

// degrades reports whether a fallback for cause may mean object storage
// itself is failing: the follower then stays on the leader until a probe
// GET is answered (see Config.FallbackAfter).
func (c Cause) degrades() bool {
	switch c {
	case CauseReadError, CauseReadTimeout, CauseMetadataLag, CauseMetadataGap:
		return true
	}
	return false
}

// Defaults.
const (
	DefaultHedgeDelay       = 30 * time.Millisecond // the Fast ACS paper's hedge
	DefaultMaxInFlight      = 8
	DefaultMaxRangeBytes    = 8 << 20
	DefaultMergeGapBytes    = 64 << 10
	DefaultReadAheadBytes   = 32 << 20
	DefaultGapTimeout       = 500 * time.Millisecond
	DefaultMaxReadAttempts  = 3
	DefaultRetryBackoff     = 20 * time.Millisecond
	DefaultRetryBackoffMax  = time.Second
	DefaultFallbackAfter    = time.Second
	DefaultLogEvery         = 10 * time.Second
	DefaultFallbackMaxBytes = 1 << 20
	DefaultPollInterval     = 100 * time.Millisecond
)

// Config configures a Follower. Validate fills defaults.
type Config struct {
	Store        ObjectReader     // required
	Index        Index            // required
	Leader       LeaderState      // required
	LeaderClient LeaderClient     // required
	Reporter     Reporter         // optional
	Transfers    TransferRecorder // optional
	// Rack is this broker's rack (broker.rack), for the ledger and tags.
	Rack string

	// MaxRangeBytes and MergeGapBytes shape GETs (see PlanConfig).
	MaxRangeBytes int64
	MergeGapBytes int64
	// MaxInFlight bounds the ranged reads in flight (each may have a hedge).
	MaxInFlight int
	// ReadAheadBytes bounds, per partition, the stored bytes read or being
	// read past the log end.
	ReadAheadBytes int64
	// HedgeDelay: a second GET of the same range is sent when the first has
	// not answered after this long; negative disables hedging.
	HedgeDelay time.Duration
	// CatchUpBytesPerSec caps the object-storage read rate (a token bucket
	// on Clock); 0 means no cap. CatchUpBurstBytes is the bucket size,
	// default one MaxRangeBytes or a tenth of a second, whichever is larger.
	CatchUpBytesPerSec int64
	CatchUpBurstBytes  int64
	// GapTimeout: a partition behind its leader with nothing readable at its
	// log end for this long fetches from the leader.
	GapTimeout time.Duration
	// MaxReadAttempts: after this many failed reads of the slice at the log
	// end (errors, corrupt bodies; hedges included), fetch from the leader.
	MaxReadAttempts int
	// FallbackAfter is the one budget in time of the slice at the log end:
	// once it has been wanted from object storage this long (reads in
	// flight, failed, waiting for a free read slot or for their retry,
	// whatever number of attempts the store client makes inside one read)
	// the follower fetches it from the leader. The fallback then covers
	// everything the leader has until a probe GET (every RetryBackoff,
	// doubling to RetryBackoffMax) shows object storage answers again, so
	// an outage costs one FallbackAfter per partition, not one per slice.
	// Keep it well under replica.lag.time.max.ms: the leader drops a
	// follower stalled for that long from the ISR.
	FallbackAfter time.Duration
	// RetryBackoff is the wait after the first failure of a read, a leader
	// fetch, an epoch query or a probe; it doubles per consecutive failure
	// up to RetryBackoffMax, less a random part of up to a half (jitter,
	// drawn from Jitter) so that partitions failing together do not retry
	// in step.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// Jitter returns uniform numbers in [0, 1) for the backoff; default a
	// PCG seeded from Clock. Called from the driver goroutine only.
	Jitter func() float64
	// LogEvery: a failure that goes on (a fallback, failing GETs, leader
	// fetches, epoch queries or appends) is logged once when it starts, at
	// most once per LogEvery after that with the count, and once when it
	// ends.
	LogEvery time.Duration
	// FallbackMaxBytes bounds one leader fetch.
	FallbackMaxBytes int
	// PollInterval: the driver re-reads LeaderState this often (Notify
	// wakes it at once).
	PollInterval time.Duration

	// Observer, if set, gets the get stage of every successful ranged GET
	// and the replication_lag stage of every append: the time since the
	// max timestamp of the last batch appended.
	Observer stagehist.Observer

	Clock  clock.Clock
	Logger *slog.Logger
}

// Validate fills defaults and rejects nonsense.
func (c *Config) Validate() error {
	if c.Store == nil || c.Index == nil || c.Leader == nil || c.LeaderClient == nil {
		return errors.New("follower: config needs Store, Index, Leader and LeaderClient")
	}
	def64 := func(p *int64, d int64) {
		if *p == 0 {
			*p = d
		}
	}
	defd := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	def64(&c.MaxRangeBytes, DefaultMaxRangeBytes)
	def64(&c.MergeGapBytes, DefaultMergeGapBytes)
	def64(&c.ReadAheadBytes, DefaultReadAheadBytes)
	defd(&c.HedgeDelay, DefaultHedgeDelay)
	defd(&c.GapTimeout, DefaultGapTimeout)
	defd(&c.RetryBackoff, DefaultRetryBackoff)
	defd(&c.RetryBackoffMax, max(DefaultRetryBackoffMax, c.RetryBackoff))
	defd(&c.FallbackAfter, DefaultFallbackAfter)
	defd(&c.LogEvery, DefaultLogEvery)
	defd(&c.PollInterval, DefaultPollInterval)
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxReadAttempts == 0 {
		c.MaxReadAttempts = DefaultMaxReadAttempts
	}
	if c.FallbackMaxBytes == 0 {
		c.FallbackMaxBytes = DefaultFallbackMaxBytes
	}
	if c.CatchUpBytesPerSec > 0 && c.CatchUpBurstBytes == 0 {
		c.CatchUpBurstBytes = max(c.MaxRangeBytes, c.CatchUpBytesPerSec/10)
	}
	switch {
	case c.MaxRangeBytes < 0 || c.MergeGapBytes < 0 || c.ReadAheadBytes < 0:
		return fmt.Errorf("follower: max range %d, merge gap %d, read-ahead %d bytes", c.MaxRangeBytes, c.MergeGapBytes, c.ReadAheadBytes)
	case c.MaxInFlight < 1 || c.MaxReadAttempts < 1 || c.FallbackMaxBytes < 1:
		return fmt.Errorf("follower: max in flight %d, read attempts %d, fallback bytes %d", c.MaxInFlight, c.MaxReadAttempts, c.FallbackMaxBytes)
	case c.CatchUpBytesPerSec < 0 || c.CatchUpBurstBytes < 0:
		return fmt.Errorf("follower: catch-up rate %d B/s, burst %d", c.CatchUpBytesPerSec, c.CatchUpBurstBytes)
	case c.GapTimeout < 0 || c.PollInterval <= 0 || c.FallbackAfter < 0 || c.LogEvery < 0:
		return fmt.Errorf("follower: gap timeout %v, poll interval %v, fallback after %v, log every %v", c.GapTimeout, c.PollInterval, c.FallbackAfter, c.LogEvery)
	}
	if err := c.backoff().Validate(); err != nil {
		return fmt.Errorf("follower: RetryBackoff %v, RetryBackoffMax %v: %w", c.RetryBackoff, c.RetryBackoffMax, err)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Jitter == nil {
		seed := uint64(c.Clock.Now().UnixNano())
		c.Jitter = rand.New(rand.NewPCG(seed, seed>>1|1)).Float64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func (c *Config) backoff() retry.Backoff {
	return retry.Backoff{Base: c.RetryBackoff, Max: c.RetryBackoffMax, Jitter: 0.5}
}

// StateIndex adapts *metadata.State (the index rebuilt from the metadata
// topic) to Index.
type StateIndex struct{ State *metadata.State }

var _ Index = StateIndex{}

func (s StateIndex) Slices(tp metadata.TopicPartition, fromOffset int64) []Located {
	in := s.State.Slices(tp, fromOffset)
	out := make([]Located, len(in))
	for i, x := range in {
		out[i] = Located{Key: x.ObjectKey, Entry: x.SliceEntry}
	}
	return out
}

func (s StateIndex) Changed() <-chan struct{} { return s.State.Changed() }

// Package follower is the follower side of KIP-1176's remote write-ahead
// log: it rebuilds, for every replica a broker follows, a log that is
// byte-identical to the leader's, from the slices the leader's combiner put
// in object storage, and falls back to fetching from the leader when object
// storage cannot serve a range.
//
// # What it owns
//
//   - reading the per-partition index of FINISHED slices (Index), once per
//     change of the index, and keeping each partition's slices at or above
//     its log end sorted in chain order, each marked idle, being read, or
//     read and verified (the ready ones wait there for their turn);
//   - planning ranged GETs (Plan, PlanChains: pure);
//   - hedged GETs (a second GET after Config.HedgeDelay, first good answer
//     wins) and the catch-up rate limit (a token bucket of bytes per second
//     on the injected clock);
//   - checking every slice's CRC32C (and, through kafkalog.AppendAsFollower,
//     every batch's CRC) before anything is appended, and appending each
//     batch exactly once, in offset order;
//   - reading GET bodies without copying them (objstore.GetBody): a
//     verified uncompressed slice points into its body, which goes back
//     to the store's buffer pool once every slice verified from it is
//     appended or dropped (buffers.go); consecutive ready slices are
//     appended together, one vectored write for up to 1 MiB of them
//     (apply.go, RunAppender);
//   - leader-epoch fencing and KIP-101/KIP-279 truncation on a leader change;
//   - the "recovery stream" fallback to the leader (LeaderClient), counted as
//     cross-rack bytes (TransferRecorder): after MaxReadAttempts failed
//     reads of the slice at the log end, or once it has been wanted for
//     FallbackAfter (one budget in time across every read and every retry
//     of the store client: each read's context ends there); after a failed
//     read, and after a gap whose probe GET fails, the partition is
//     degraded and the leader serves everything until a probe (backing
//     off, jittered, to RetryBackoffMax) is answered;
//   - backoff of every retry, and logging a failure that goes on as state
//     changes with counts (internal/retry), not a line per retry;
//   - reporting the log end (Reporter), status and metrics.
//
// It does not own leader election, the FollowerFetch protocol (LeaderState
// and LeaderClient are what it needs from it), the metadata topic (Index),
// nor the log format (kafkalog).
//
// # Exactly once, in order
//
// The local log is the only state that survives a restart. Every decision
// starts from the log end offset (LEO): slices entirely below it are
// skipped; a slice straddling it has its batches below the LEO dropped (the
// LEO must fall on a batch boundary of the slice, else ErrMisaligned);
// a slice above it waits until the gap below is filled. AppendAsFollower
// refuses anything that does not start exactly at the LEO, so duplicated or
// reordered index entries, hedged reads and fallback fetches racing each
// other can never append a batch twice or skip one.
//
//	index:   [0..9]o1  [10..19]o1  [10..19]o2(dup)  [30..39]o3
//	LEO=15:            └ trim 10..14, append 15..19
//	                               └ skipped (below LEO by then)
//	                                                 └ held: gap 20..29
//	gap open for GapTimeout ──► LeaderClient.Fetch(20) ──► append ──► o3
//
// # Epoch fencing
//
// A slice of leader epoch E is appended only if E is the current leader
// epoch, or the leader's history says epoch E ended after the slice's last
// offset (LeaderState.EndOffsetForEpoch(E) returns E and an end offset >
// LastOffset). A slice of an epoch newer than the known leader epoch waits.
// When the leader epoch changes (and once at start, since the follower may
// have appended from a deposed leader before it stopped) the follower walks
// its own leader-epoch cache from the latest entry down, asks the leader
// for the end of each epoch, and truncates its log to the first answer, as
// Kafka's follower does; nothing is appended until that check is done. The
// offset is decided by replica.TruncationOffset (decide.go calls it), the
// one truncation rule the classic fetcher uses too.
//
// # Concurrency
//
// One driver goroutine per Follower owns all per-partition state. It is
// woken by the Index's Changed channel, its clock timer, Notify, commands
// (AddPartition, RemovePartition) and completions. Its work per wake-up
// does not grow with a partition's backlog: it reads the index again only
// after Changed fired, and then only the partitions the change touched
// when the Index also says which (IndexChanges; every partition
// otherwise), the policy (decide, which is replica.PlanRemote:
// the one model of what a remote-WAL follower does next, with its
// data-driven scripts in replica/testdata/remote) walks the sorted slices from
// the log end only as far as the read-ahead, and the first partition that
// plans reads in a wake-up only to the first slice of an object past the
// free read slots (replica.RemoteLimits.MaxReadObjects), the facts that need every
// slice (the highest end known, the epochs to ask about) are kept until
// the slices, the epochs or the fence answers change, and only the slices
// of the objects the free read slots can serve are planned. GETs, leader fetches and
// epoch queries run off the driver (at most Config.MaxInFlight GET
// reads of at most two GETs each, one fallback and one epoch query per
// partition), on long-lived workers (workers.go: an idle one takes the
// job, else a new goroutine does, so no job waits for another; no
// goroutine is made, nor its stack grown, per read), and send their
// results back on a channel, which the driver drains before it plans
// again; slice CRC checks and
// decompression run there too, in parallel (an uncompressed slice's
// batches are checked as Kafka's follower checks a replicated batch, CRC
// and header: kafkalog.ValidateBatchesCRC32C). A read sends its first
// GET itself, with no hand-off to another worker, and a re-read after a
// bad answer too. The driver watches every read's hedge time and budget
// with its own timer (no timer per read): it sends the hedge of a read
// whose first GET has not answered, on a worker, and cancels a read
// whose budget is spent. Only the driver touches a
// partition's Log. Close stops everything and waits. Status and Metrics are
// safe to call from any goroutine.
package follower

// Package replica holds kwal's per-partition replication state machines,
// in the shape of etcd's raft: events in, actions out. Nothing here does
// I/O, starts a goroutine or reads a clock; time arrives as an argument of
// the event, and the leader's log end, the follower's log view and the
// leader's answers are passed in by the driver (package broker), which
// carries out the actions and holds each machine under its own lock.
//
// # Leader
//
// Leader keeps, per follower, the log end its last fetch reported and
// Kafka's lastCaughtUpTime (Partition.scala's updateFollowerFetchState),
// the committed ISR, the leader epoch and the high watermark.
//
//	FollowerFetch(now, replica, epoch, offset, leo) ─► error code, [ProposeISR expand]
//	FollowerFetchStamped(..., stamp)  (a fetch or report older than the LEO's is ignored)
//	MaybeAdvanceHW(leo)  (after an append or fetch) ─► [AdvanceHW]
//	HWApplied(hw)        (the driver set the log's HW)
//	Tick(now, leo)       (ISR expiration)           ─► [ProposeISR shrink]
//	ISRChanged / ISRRefused (controller's answer)   ─► [AdvanceHW]
//	CheckProduce(acks), AckDone(required)           ─► NOT_ENOUGH_REPLICAS(_AFTER_APPEND) or done
//	News(replica, answer)             ─► which of its HW, log start, log end are news
//	Told(replica, answer)             (the answer was written to the follower)
//
// News and Told take the values the answer carries (one reading of the
// log), never a fresh one, or a change between the two readings would
// count as told and the follower's next long poll would wait for it in
// vain; and Told comes only once the answer was written, never when it is
// built, since an answer on a connection the follower closed is never
// read.
// The high watermark advances only in Leader.MaybeAdvanceHW: to the
// smallest log end over the maximal ISR (the ISR plus a follower whose
// expansion is in flight), bounded by the leader's log end, never back,
// and not while an ISR member has not fetched from this leader yet. The
// driver turns AdvanceHW into kafkalog SetHighWatermark and purgatory
// CheckAndComplete calls, which answer the waiting acks=all produces and
// long-poll fetches, then report HWApplied. AckDone is the acks=all
// completion rule, the only one (the broker's produce operation asks it):
// done once the HW the log shows is past the produce, with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below
// min.insync.replicas meanwhile.
//
// The ISR shrinks only through Leader.Tick (the broker calls it at a
// fixed rate, every half replica.lag.time.max.ms: isrLoop): a member whose log end is not
// the leader's and that last caught up more than replica.lag.time.max.ms
// ago is proposed out (LaggingReplicas, Kafka's getOutOfSyncReplicas with
// isCaughtUp; a stopped follower of an idle partition is removed by the
// controller when its broker is fenced, testdata/leader/lag_idle). When a
// follower last caught up is decided in FollowerFetch (caughtUp): the
// latest time whose leader log end its fetch offset reaches, Kafka's
// definition of lastCaughtUpTimeMs, kept with a bounded history of fetch
// marks so that a remote-WAL follower trailing by an upload and a read
// is not dropped while it keeps up (testdata/leader/lag_steady). It
// expands in FollowerFetch once the follower's log end reaches both the HW
// and the start offset of this leader's epoch. One proposal is in flight
// at a time; the controller's answer ends it.
//
// # Follower
//
// Follower is one partition following one leader epoch (a leader change is
// a new Follower):
//
//	Next(now, log)                   ─► SendEpochQuery | [StartRemote] SendFetch
//	EpochAnswered(now, log, e, ans)  ─► [Truncate] (again SendEpochQuery until complete)
//	Fetched(now, log, answer)        ─► Append | SetHW | TruncateFully | ObserveLeaderLogEnd | Backoff
//	AppendDone(now, log, err)        ─► SetHW, or back to truncation on divergence
//	Report(log)                      ─► SendLogEndReport (RemoteWAL, a fetch in flight, the log end grew)
//	Reported(log, answer)            ─► [ObserveLeaderLogEnd] [SetHW]
//
// In Classic mode fetched records are appended; in RemoteWAL mode the fetch
// carries offsets, the HW and the leader's log end, and StartRemote hands
// the log to the remote-WAL reader (package follower). That reader appends
// while the fetch long-polls, so each growth of the log end is reported at
// once beside the fetch (Report), and the answer's HW applied (Reported):
// the follower learns the HW one round trip after its append, not one
// fetch round later. A follower's HW is min(leader HW, its log end).
//
// # Remote-WAL follower
//
// What the remote-WAL reader does next for a partition is decided here
// too, by PlanRemote (remote.go): which slices of the metadata index to
// read (the chain from the log end, up to the read-ahead or the first
// MaxReadObjects objects), which older epochs to ask the leader about,
// and when to fall back to fetching
// records from the leader (a hole, metadata lag, fenced or future-epoch
// slices at the log end past the gap timeout; repeated read failures).
// Per-slice fencing is JudgeSlice (JudgeRemote with the answers so far).
//
//	SummarizeRemote(slices, leo, epochs, answers) ─► target, epochs to ask, fenced
//	PlanRemote(now, view, slices, limits)          ─► read, ask, fallback, wake-up
//
// Truncation is decided in one place, Truncation (one step) and
// TruncationOffset (the steps to the end), KIP-101 with KIP-279's repeated
// queries: the classic fetcher calls Truncation through Follower, the
// remote-WAL follower calls TruncationOffset. See Truncation for the rules
// and where they differ from Kafka's UNDEFINED_EPOCH_OFFSET handling.
//
// # Concurrency
//
// None: a machine is a plain value for one goroutine at a time; drivers
// guard it with the partition's (or fetcher's) mutex.
package replica

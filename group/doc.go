// Package group is kwal's consumer-group coordinator for the classic
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
// OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete) and
// the keeper of __consumer_offsets, where a group's committed offsets and
// its last generation live.
//
// It owns the group state machine (Group), the records of
// __consumer_offsets and the Coordinator that drives groups for the
// partitions this broker leads. It does not own the wire protocol (the
// broker's api_*.go files translate), replication (Storage.Append answers
// after the ISR has the batch) nor leadership (the broker calls Elected
// and Resigned as the controller moves partitions).
//
// # State machine
//
//	Empty ──join──► PreparingRebalance ──all joined, or join deadline──► CompletingRebalance
//	 │ ▲                 ▲       │                                                  │
//	 │ └─ no member left ┼───────┘                                 leader's SyncGroup
//	 │                   │                                                          ▼
//	 │                   └── join (new member, changed protocols, leader), leave, ─ Stable
//	 │                       session or sync timeout (also from CompletingRebalance)
//	 └── DeleteGroups ──► Dead (also: the coordinator unloads the group)
//
// Group is pure: every call takes the time it happens at, reads no clock
// and does no I/O. A JoinGroup or SyncGroup that must wait passes a
// callback, called once, from within the call that completes it. Expire
// delivers the timeouts due (member sessions, pending member ids, the end
// of the join phase, members that never sent SyncGroup), and NextDeadline
// says when the next one falls. Errors are Kafka's: MEMBER_ID_REQUIRED
// (JoinGroup v4+, KIP-394), UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID (static membership, KIP-345),
// INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT. Protocols are
// opaque bytes: range, roundrobin, cooperative-sticky and anything else
// work alike; the protocol every member supports with the most first
// choices is chosen.
//
// # __consumer_offsets
//
// A group lives on partition abs(javaHashCode(group id)) % partitions
// (PartitionFor, as Kafka). Records (records.go) carry a key version
// (0 offset, 1 group) and a value version; a nil value is a tombstone.
// Batches are uncompressed RecordBatch v2 with their CRC32C; the loader
// checks every batch and skips (with a log line) a record it cannot read.
// A group's record is written when the leader's SyncGroup brings its
// assignment (the group turns Stable, and SyncGroups are answered, only
// once it is stored: Storing, Stored), and again when membership changes
// settle or the group empties; a commit is answered after its batch is
// replicated to the ISR, and only then becomes visible to OffsetFetch.
// The offsets of an empty group expire (tombstones) after the retention,
// counted from when the group emptied or the offset was committed,
// whichever is later (ExpireOffsets, KIP-211); the log cleaner of the
// broker compacts what is superseded.
//
// # Concurrency
//
// Coordinator.mu guards the led partitions and the loaded groups; the
// state machines run under it and their callbacks only hand results to
// buffered channels, on which the requests wait outside the lock. Each
// led partition has one writer goroutine: appends happen in the order
// they were queued, and a write's effect is applied after its append, so
// memory follows the log. Loading runs in its own goroutine; until it
// ends, the partition's groups answer COORDINATOR_LOAD_IN_PROGRESS, and
// groups of partitions not led here NOT_COORDINATOR. One timer loop, on
// the injected clock, calls ExpireDue at the earliest deadline. Close
// stops all of them.
package group

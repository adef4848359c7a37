// Package metadata owns kwal's remote-WAL metadata: the event types of
// KIP-1176 (RemoteWalCombinedLogSegmentMetadata and its updates, partition
// deletions), their versioned binary encoding, publishing them to and
// consuming them from the compacted topic __remote_wal_log_metadata with
// franz-go, the per-partition index rebuilt from the topic (State), the
// retention decisions and deletion events, and the embedded kfake cluster
// used when no Kafka is configured.
//
// It does not own object bytes (combiner, follower), the object-store
// backends (objstore), nor when a broker follows which partition (broker).
//
// # Life cycle
//
// States and transitions are Kafka's RemoteLogSegmentState:
//
//	COPY_SEGMENT_STARTED ──► COPY_SEGMENT_FINISHED ──► DELETE_SEGMENT_STARTED ──► DELETE_SEGMENT_FINISHED ──► tombstone
//	         └──────────────── (abandoned copy) ─────────────────┘
//
// kwal decision: the leader publishes an object's metadata only after its
// PUT succeeded (metadata follows data), and an unreachable Kafka must not
// stop uploads, so an object's first event is normally COPY_SEGMENT_FINISHED:
// the PUT plays the part of COPY_SEGMENT_STARTED. An upload whose metadata
// never arrives is an orphan, found by listing the store (combiner). State
// accepts either first event.
//
// # Partitioning and keys
//
// One combined object holds slices of many user partitions; the entries of a
// user partition always go to metadata partition
// toPositive(murmur2("topic-partition")) % partitions (MetadataPartition;
// Kafka's RemoteLogMetadataTopicPartitioner hashes the topic id instead,
// which kwal does not have). Split turns one object into one event per
// metadata partition holding only the entries mapping there. The record key
// is (object id, metadata partition); every state change is published as a
// full snapshot under that key, so compaction keeps each part's latest
// state with its entries, and a nil value (tombstone) removes the part.
//
//	object part key:       'o' | object id [16] | metadata partition u32 BE
//	partition delete key:  'p' | partition u32 BE | topic bytes
//	dead range key:        'd' | partition u32 BE | leader epoch u32 BE | topic bytes
//	replicated offset key: 'v' | partition u32 BE | topic bytes
//
// Dead ranges and replicated offsets go to their user partition's metadata
// partition, like its entries, so a follower sees them in order with them.
//
// # Leader changes (the KIP's reconciliation)
//
// A broker elected leader at epoch E with log end S publishes a DeadRange
// (E, S): every entry of an epoch below E at or past S is dead ("B2
// publishes DELETE for 6–10"). An entry of epoch e is dead from the least S
// of the dead ranges with E > e; State drops dead entries from the index,
// whether the dead range arrives before or after them, so a deposed leader
// that keeps uploading is never indexed. Retention deletes an object whose
// entries are all dead at once, and counts only the live part of an entry
// straddling S. Leaders also publish ReplicatedOffset (their high
// watermark), so any broker can tell that an object is no longer needed,
// whoever uploaded it.
//
// # Event encoding (Versions 1 and 2)
//
// Integers are unsigned LEB128 varints (uv), zig-zag varints (v) or fixed
// big-endian; str is uv length then bytes.
//
//	┌─────────┬──────┬──────────────────────────────┬──────────────┐
//	│ version │ type │ payload                      │ CRC32C (BE)  │
//	│ u8 = 1  │ u8   │ by type, below               │ of version.. │
//	│         │      │                              │ ..payload    │
//	└─────────┴──────┴──────────────────────────────┴──────────────┘
//
//	type 1 object:  id[16] mp:uv broker:v state:u8 timestamp_ms:v bucket:str key:str
//	                ntopics:uv topic:str × ntopics
//	                nentries:uv entry × nentries
//	     entry:     topic_index:uv partition:uv leader_epoch:v base_offset:uv
//	                last_minus_base:uv position:uv length:uv raw_length:uv
//	                codec:u8 crc32c:u32
//	type 2 update:  id[16] mp:uv state:u8 timestamp_ms:v broker:v
//	type 3 pdelete: topic:str partition:uv state:u8 timestamp_ms:v broker:v
//	type 4 dead range (version 2):
//	                topic:str partition:uv leader_epoch:uv start_offset:uv broker:v timestamp_ms:v
//	type 5 replicated offset (version 2):
//	                topic:str partition:uv leader_epoch:uv offset:uv broker:v timestamp_ms:v
//
// Version 2 only added types 4 and 5. Each event is written with the lowest
// version that has its type (EventVersion), so a version-1 reader still
// reads every object event and refuses the new ones as unsupported; a type
// 4 or 5 under version byte 1 is malformed.
//
// A reader refuses a version byte it does not know with
// *UnsupportedVersionError (checked before the CRC, so a future layout can
// move it), and anything truncated, failing the CRC, out of bounds, with
// trailing bytes or an impossible value with an error wrapping
// ErrMalformedEvent. Every count is checked against the bytes left before
// allocating.
//
// # Consuming
//
// A Consumer reads its metadata partitions from the earliest offset into a
// State and is Ready once it has read up to the end offsets listed at start;
// the time that takes is logged and returned by BootstrapDuration. Malformed
// records and refused events are logged and counted and the consumer goes on.
// State is the pure state machine (no I/O, no clock) the follower queries
// (Slices, Changed) and the orphan collector asks (ObjectState); its rules
// for duplicates, unknown objects and illegal transitions are on State.
//
// # Retention
//
// DecideRetention is the pure decision (age since COPY_SEGMENT_FINISHED past
// RetentionPolicy.Retention, every in-sync replica past the live part of
// every entry; objects whose entries are all dead at once; the broker
// that deletes an object is RetentionPolicy.Deletes);
// Retainer is its driver: DELETE_SEGMENT_STARTED, Delete from the store,
// DELETE_SEGMENT_FINISHED, tombstones, each step idempotent and resumable.
//
// # Concurrency
//
// State, Publisher, Consumer and Retainer are safe for concurrent use.
// A Consumer owns one goroutine, stopped by Close. Publisher calls return
// when every record is acknowledged or ctx ends; order per metadata
// partition holds across retries (idempotent producer). Time comes from an
// injected clock.Clock; loggers are passed in; there is no package state
// but constant tables.
package metadata

// Package kafkalog is one Kafka partition's log on disk: segments of
// RecordBatch v2 bytes in Kafka's layout, the sparse offset index, the
// leader-epoch cache, the high-watermark and recovery-point checkpoints,
// recovery of a torn tail at open, truncation, retention and the producer
// table of idempotent producers with its snapshots. It also
// exports the RecordBatch v2 codec (ParseBatchHeader, ValidateBatch,
// SplitBatches) for the follower, combiner and broker, and the leader's
// check of a client's batch (BatchValidator, validate.go).
//
// It does not own networking or replication policy (who is leader, when
// the high watermark moves). Compressed batches are stored as the client
// compressed them; the log never recompresses.
//
// # Validation
//
// Three levels. ValidateBatchesCRC32C (a remote-WAL follower's slices,
// appended with AppendVerifiedAsFollower): what Kafka's follower checks of
// a replicated batch, framing, size, CRC32C, attributes, codec and the
// header's record count and lastOffsetDelta, not the records (the leader
// walked them; the CRC covers them). ValidateBatch (every other append,
// recovery, classic follower bytes): that, and for uncompressed batches
// every record. BatchValidator.Validate (the produce path, once per batch;
// Log.AppendValidatedAsLeader then appends without looking again): that,
// plus Kafka's client-batch rules (recordCount >= 1 and equal to
// lastOffsetDelta+1, no control batch, a producer id with a sequence:
// *InvalidRecordError, INVALID_RECORD on the wire, except that a
// compressed batch whose lastOffsetDelta disagrees with its count is
// corrupt, CORRUPT_MESSAGE, like every other corrupt compressed batch;
// no LogAppendTime:
// ErrInvalidTimestamp, INVALID_TIMESTAMP) and every record of a
// compressed batch, streamed through gzip, snappy (raw or xerial-framed),
// lz4 (frame) or zstd with a bound on the decompressed bytes, holding one
// record at a time (a snappy block is decoded whole, within the bound):
// varint framing, offsetDelta i for record i, exactly recordCount records,
// nothing after them, and the codec's own checksum (*CorruptBatchError,
// CORRUPT_MESSAGE). As Kafka's leader does, the appended batch's
// maxTimestamp is set from the records when the client's differs.
//
// # Directory
//
//	<dir>/00000000000000000000.log       batches, back to back, as appended
//	<dir>/00000000000000000000.index     sparse offset index (see below)
//	<dir>/00000000000000004711.log       next segment: base offset 4711
//	<dir>/leader-epoch-checkpoint        "0\n<n>\n<epoch> <startOffset>\n"...
//	<dir>/replication-offset-checkpoint  "0\n1\n<high watermark>\n"
//	<dir>/recovery-point-offset-checkpoint "0\n1\n<offset>\n"
//	<dir>/log-start-offset-checkpoint    "0\n1\n<offset>\n": a log start inside the first segment (DeleteRecords)
//	<dir>/00000000000000004711.snapshot  producer state as of offset 4711 (below)
//
// Checkpoints are Kafka's text format, written atomically: temp file,
// fsync, rename, directory fsync.
//
// # RecordBatch v2 (all integers big-endian)
//
//	 0      8      12         16    17    21    23          27       35       43      51    53      57      61
//	+------+------+----------+-----+-----+-----+-----------+--------+--------+-------+-----+-------+-------+---------+
//	|base  |batch |partition |magic|crc  |attrs|lastOffset |base    |max     |produ- |prod.|base   |record |records  |
//	|Offset|Length|LeaderEp. |=2   |32c  |     |Delta      |Timest. |Timest. |cerId  |Epoch|Seq    |Count  |...      |
//	|int64 |int32 |int32     |int8 |u32  |i16  |int32      |int64   |int64   |int64  |i16  |int32  |int32  |         |
//	+------+------+----------+-----+-----+-----+-----------+--------+--------+-------+-----+-------+-------+---------+
//	 \___ not covered by the CRC ___/          \_______ CRC32C (Castagnoli) covers byte 21 to the end ________________/
//
// batchLength counts the bytes after itself (size = 12 + batchLength).
// Assigning the base offset and stamping the leader epoch touch bytes
// 0..7 and 12..15 only, so the CRC stays valid. Uncompressed records are
// varint-framed: length | attributes | timestampDelta | offsetDelta |
// key | value | headers (see checkRecord).
//
// # Offset index (.index), Kafka's
//
//	+----------------------+----------------------+
//	| relativeOffset int32 | position int32       |  x N, 8 bytes each
//	+----------------------+----------------------+
//
// relativeOffset is the last offset of a batch minus the segment base;
// position is where that batch starts. An entry is added before a batch
// when more than IndexIntervalBytes were appended since the last entry.
// A lookup takes the last entry at or below the target and walks batch
// headers from there. The index is kept in memory and written at roll and
// Close; at Open it is rebuilt from the segment (the recovery scan reads
// every header anyway), so a stale or missing .index file is harmless.
//
// # Time index (Kafka's .timeindex, in memory)
//
//	per segment: (max timestamp so far, last offset of its batch) x N, sparse
//
// An entry is added after a batch when more than IndexIntervalBytes were
// appended since the last entry and the segment's largest timestamp grew.
// TimestampSearchStart(target) skips segments whose largest timestamp is
// below target and, in the first that reaches it, starts after the last
// entry below target: no batch before that point can hold the answer.
// Like the offset index it is rebuilt by the scan at Open, truncation and
// compaction, so it needs no file.
//
// # Tunables and LogAppendTime
//
// Retune changes segment.bytes, segment.ms, retention.ms, retention.bytes
// and max.message.bytes of an open log (AlterConfigs); appends and
// retention read them under the write lock. ValidBatch.WithLogAppendTime
// is the leader's stamping for message.timestamp.type=LogAppendTime: the
// attribute bit 3, the max timestamp and the CRC.
//
// # Producer state (Kafka's ProducerStateManager, without transactions)
//
// The log keeps, per producer id, its latest epoch and its last
// ProducerBatchWindow (5) batches: sequences and offsets, what a leader
// needs to find a resent batch and to check the next sequence. Every
// append updates it (leader and follower alike, from the headers the
// append already parsed; AppendInfo.Batches hands the same headers to the
// caller). It is snapshotted at each roll (named by the new segment's
// base offset) and at Close (named by the log end), keeping the newest
// ProducerSnapshots files. Open deletes snapshots outside [log start, log
// end], loads the newest one that decodes (a corrupt one is logged with
// slog.Warn, deleted, and the next older one tried; with none the whole
// log is replayed) and replays batch headers from its offset to the log
// end. Truncate deletes snapshots above the truncation point and rebuilds
// the same way; retention deletes snapshots below the new log start (the
// one at the log start stays, so producers whose batches were all deleted
// survive); TruncateFullyAndStartAt forgets every producer. A producer
// whose latest batch timestamp is ProducerIDExpirationMs old (Kafka's
// producer.id.expiration.ms, 1 day) is dropped by RemoveExpiredProducers,
// which the broker runs periodically, and when the table is loaded, so
// the table holds the producers active within that time.
//
// Snapshot file, version 1 (big-endian):
//
//	+-------+---------+--------+--------+-------+------------------------------------------+
//	| "KWPS"| version | crc32c | offset | count | entries (ascending producer id) ...      |
//	| 4 B   | u16 = 1 | u32    | i64    | u32   |                                          |
//	+-------+---------+--------+--------+-------+------------------------------------------+
//	 entry: producerId i64 | epoch i16 | lastTimestamp i64 | n u8 (0..5) | n x batch
//	 batch: firstSeq i32 | lastSeq i32 | firstOffset i64 | lastOffset i64 | maxTimestamp i64
//
// The CRC32C (Castagnoli) covers everything after itself. A decoder
// refuses an unknown version, a bad CRC, a wrong length, ids not
// ascending, more than 5 batches, or batches out of order or at or above
// the snapshot's offset (*CorruptSnapshotError).
//
// # Durability and recovery
//
// Appends are written with one WriteAt per segment touched.
// AppendVerifiedRunAsFollower (a remote-WAL follower's run of slices, each
// in its own GET buffer) writes each segment's share of its buffers with
// one vectored write instead: pwritev(2) on Linux's OSFS, one write on
// MemFS, one WriteAt per buffer on a File that wraps another (so fault
// injection sees every byte). fsync follows
// FlushMessages / FlushMs (checked at append), Flush, roll (the old
// segment is fsynced and the recovery point moved to the new segment's
// base) and Close. At Open, segments from the one holding the recovery
// point to the end are validated batch by batch (CRC, record framing,
// contiguous offsets starting at the segment base); the first bad or torn
// batch and everything after it are cut, with a slog.Warn saying the
// position and the bytes dropped. Earlier segments get a header walk.
//
// The leader-epoch checkpoint is not written on the append path (a new
// epoch costs a temp file, two fsyncs and a rename: on a follower, once
// per new log and per leader change). An append records a new epoch in
// memory; the checkpoint is written (fsynced, renamed into place) before
// the recovery point passes it (roll, Close), at Flush, and at once by
// truncation and log-start moves. At Open the cache is the checkpoint
// trimmed to the log end plus the epochs of the batches in the segments
// recovered (Kafka's LogSegment.recover assigns them the same way): every
// epoch that starts below the recovery point is in the checkpoint, and
// every one past it is in a segment that recovery walks, so a crash
// between an append and the checkpoint write loses no epoch and keeps
// none of data it lost.
//
// # Concurrency
//
// One writer, many readers; all methods are safe for concurrent use.
// writeMu serialises appends, truncation, retention, flush and close.
// mu (an RWMutex) guards what readers see: the segment list, each
// segment's published size and index, log end offset, high watermark and
// epoch cache. An append writes the file without mu, then publishes the
// new size and log end offset under mu's write lock, so a reader (which
// holds the read lock while it reads the file) never sees part of a
// batch. Truncation and segment deletion hold the write lock while they
// change what readers could reach. AppendNotify hands out a channel closed
// at the next publish, truncation or Close.
package kafkalog

// Package combiner is the leader side's RLMWalCombinerTask: it takes slices
// of many partitions from the remote-WAL tasks, packs them into combined
// objects, PUTs each object create-only, and publishes its metadata only
// after the PUT succeeded, in the order objects were cut. It also finds and
// deletes orphans: objects whose metadata never got published.
//
// It owns the queue, the packing policy (Pack, a pure function), the upload
// with retries, the publish ordering, back-pressure, object keys and orphan
// collection. The byte format lives in combiner/objformat. It does not own
// how slices are cut (remotewal), the metadata encoding or topic
// (metadata), or how followers read.
//
// # Pipeline
//
//	Submit ──► queue ──► cutter ──jobs(seq)──► workers ×ThreadPoolSize ──results──► publisher
//	 blocks     │      (Pack over the queue)   encode, PUT If-None-Match,            in seq order:
//	 when held  │                              retry with backoff+jitter             PublishObject (retry),
//	 ≥ bound    └──────── budget: slices and bytes held from Submit until ◄──────── then Done, release
//	                      published or given up
//
// The bound (QueueSlices, QueueBytes) covers every slice from Submit until
// its object is published or given up, so memory stays bounded whether
// storage or Kafka is slow: uploads go on while publishing is down until
// the bound is reached, then Submit blocks (and an acks=all produce times
// out rather than piling up). Within it each partition may hold at most
// PartitionQueueSlices and PartitionQueueBytes (a quarter by default), so
// one partition's backlog cannot take the room the others need.
//
// Ordering: objects are runs from the head of the FIFO queue, numbered as
// they are cut; the publisher publishes object n only after n-1 is done, so
// each partition's entries are published contiguous and in offset order
// however uploads finish. An object whose PUT failed gives its slices
// Done(err); the caller re-submits from their base offset (a follower
// never skips a gap, so later entries wait for the re-upload).
//
// No head-of-line blocking across partitions: the publisher judges each
// slice of an uploaded object for its own partition and leader epoch. A
// slice after a given-up one of its partition and epoch that was not
// re-submitted since (ErrEarlierSliceFailed), or one the encoder refused
// (ErrRefused: within one object a partition's base offsets must rise), is
// given up; the object is published with the other slices' entries only.
// The given-up slices' bytes stay in the object unreferenced (dead bytes:
// kwal audit counts them; retention deletes them with the object), and an
// object with nothing left to publish is an orphan for the collector.
//
//	object n:  [ P@10 | Q@0 | R@4 ]   P@0 given up earlier, not re-submitted
//	published:   ----   Q@0   R@4      P@10: ErrEarlierSliceFailed, for P only
//
// # Pacing and held bytes
//
// Objects not cut for size are paced by a budget (Policy.Interval,
// Pending.Last and Next, a token bucket of two kept as one time): over
// time at most one per Interval, one more early after a quiet spell, and
// each as soon as its oldest byte exists and the budget allows. Under
// steady traffic objects go every Interval and a byte waits Interval/2
// on average before its PUT starts; a batch after a quiet spell goes at
// once, and a producer that sends about once per Interval is not held to
// a fixed phase. (An interval counted from each object's oldest byte made
// such a producer's every batch wait all of it; a fixed cadence made it
// wait whatever phase the run started at.)
//
//	budget    Next-I allows one object; a mark at t: Next = max(Next, t) + I
//	steady    |──I──|──I──|──I──|   objects every I, bytes wait I/2
//	sparse    b    b     b    b     each goes at once (≤ 2 within any I)
//
// A remote-WAL task below the upload size does not submit its bytes: it
// announces them (Announce, with the time of its oldest byte) and holds
// them in its log. When they are due, the cutter closes the announced
// tickets' Called channel and waits until every called task has
// submitted and withdrawn, for at most half an interval; then it cuts, so
// the object carries one slice per partition (a late one missed the
// object and goes at once in the next). Bytes announced after the call
// are not called into this object; the budget paces them. A Submit that
// has to wait for room ends that wait (a called task may be the one
// blocked), and the queue is cut without it.
//
// # Keys
//
//	<prefix>wal/<broker-id>/<yyyymmddhh UTC>/<uuid>.kwal
//
// Fixed depth, leaf names only, so no key is a "/"-prefix of another. A
// retry after an ambiguous PUT that finds the key taken reads the 16-byte
// trailer back: equal to ours means our earlier attempt landed (success);
// otherwise the object is someone else's and the upload moves to a new key.
//
// # Orphans
//
// An object is an orphan when no live metadata references it
// (ReferenceChecker), this broker is not still uploading or publishing it
// (Combiner.InFlight), and it is older than the grace period, which
// Validate requires to exceed UploadTimeout. ChooseOrphans is the pure
// decision; OrphanCollector.RunOnce lists and deletes.
//
// # Concurrency
//
// Submit, Metrics, InFlight and Close are safe for concurrent use. One
// cutter goroutine owns cutting, ThreadPoolSize workers own uploads, one
// publisher goroutine owns publishing and Done callbacks; shared state is
// under Combiner.mu. Every goroutine stops on Close; Close with an ended
// context aborts retries. Time comes from the injected clock (backoff,
// interval, upload timeout); only per-attempt deadlines are real-time
// contexts.
//
// # Cost per slice
//
// The ingest path is built so that a small slice costs little more than
// copying and checksumming its bytes once:
//
//   - Submit appends to the queue under Combiner.mu and wakes the cutter
//     only when Pack's answer may change: the queue was empty, an object
//     just became complete, or the slice is older than the last paced
//     object (it missed it, so it is due at once). To know when an object is complete it
//     runs the same step as Pack (Policy.place) as slices arrive.
//   - A slice without AppendedAt is stamped at Submit, but the clock is
//     read once per object: later slices of the object Pack leaves open
//     share its first stamp, which is always the oldest there, so Pack
//     decides exactly as with a stamp per slice.
//   - A cut object's slices are copied out of the queue into a batch that
//     is recycled after the publisher released it; the queue's arrays are
//     compacted in place. Released batches are cleared, so nothing keeps a
//     published slice's data alive.
//   - Each worker encodes into its own buffer, copying each slice once and
//     computing its CRC32C over the copy. The buffer is reused for the
//     worker's next object only after upload returned, after the last PUT
//     attempt of the object: ObjectWriter must not retain or read body
//     after PutObject returns (objstore.Store's contract).
package combiner

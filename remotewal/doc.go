// Package remotewal is the leader side of KIP-1176's remote write-ahead log:
// one task per leader partition watches the partition's log end and cuts
// slices of the active segment, which it hands to the combiner.
//
// A slice is the exact bytes of whole RecordBatch v2 batches of one
// partition and one leader epoch, [BasePosition, EndPosition) of one
// segment, with its first and last offsets. A slice never crosses a segment
// roll or a leader-epoch change, so a follower can append it as it is.
//
//	leader log  ┌──────── segment 0 ────────┐┌──── segment 1 (active) ───┐
//	            │ b0 b1 b2 │ b3 b4 │ b5 (e=7)││ b6 b7 b8 ...              │
//	            └──────────┴───────┴─────────┘└───────────────────────────┘
//	slices         [b0..b2]  [b3,b4]  [b5]      [b6..b8]
//	               size cut  called   epoch     segment roll
//
// A task cuts when the bytes pending past its last cut reach UploadBytes,
// at a segment roll or leader-epoch change, or when the combiner calls for
// them. Below UploadBytes a task holds its bytes in the log and announces
// them to the combiner (PackCaller: Combiner.Announce), whose pacing
// counts them as if queued; when they are due it calls every announced
// task (Ticket.Called), each cuts what it holds and withdraws,
// and the object goes out with one slice per partition. So no task runs a
// timer, an idle task only waits on its log's append notification, and a
// task knows where its next offset lies in the log after each cut
// (kafkalog.Log.EndPosition gives the bytes pending without a lookup). With
// a Sink that is not a PackCaller a task cuts after Interval instead.
// Tasks run on a pool of ThreadPoolSize workers
// (remote.wal.log.manager.thread.pool.size): a task takes a worker slot to
// read and submit. Submit blocks when the combiner's queue is full; that
// back-pressure holds the task, which is what bounds memory.
//
// The package also assembles the leader's write path (NewWritePath: tasks,
// combiner and metadata publisher). What KIP-1176 names the
// RemoteWalStorageManager is objstore.Store itself: the combiner writes
// through combiner.StoreWriter (create-only PUTs tagged "combiner" in the
// ledger), followers read ranges and retention deletes through the store.
//
// A task submits every slice in its own leader epoch, the uploader's. A
// new leader's task may start below its log end (UploadStart: where the
// partition's live published entries end), to upload the range an older
// leader appended and never uploaded; those slices hold batches of older
// epochs but are entries of the new leader's epoch, so a deposed leader's
// late entries (of its own epoch) never overlap another uploader's entries
// of one epoch (invariant 4). A task started again in the epoch of the
// partition's last stopped task never cuts below where that one ended.
//
// What it does not own: packing slices into objects (combiner), metadata
// (metadata), and reading slices back (follower).
//
// Concurrency: a Manager is safe for concurrent use. Each partition task is
// one goroutine that owns its cut position; StopPartition and Close stop
// tasks and wait for them.
package remotewal

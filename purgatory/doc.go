// Package purgatory holds delayed operations — produce requests with
// acks=all, long-polling fetches — until their condition holds or they time
// out. It owns a hierarchical timing wheel (Timer) and the delayed-operation
// purgatory over it (Purgatory), generic in the watch key; the broker uses
// topic-partitions. It does not know what the operations do: that is the
// Operation's business. It depends on the standard library only.
//
// # Timing wheel
//
// Each level has WheelSize buckets of Tick each; a level that cannot hold a
// deadline passes it to an overflow level, created on demand, whose tick is
// the whole span of the level below (Kafka's TimingWheel, KIP seed 004):
//
//	level 0  tick 1ms   |b0|b1|...|b19|   spans 20ms
//	level 1  tick 20ms  |b0|b1|...|b19|   spans 400ms   (created on demand)
//	level 2  tick 400ms |b0|b1|...|b19|   spans 8s      ...
//
// A bucket is an intrusive, circular, doubly linked list of TimerEntry, so
// Schedule and Cancel are O(1) and allocate nothing when the entry is
// embedded in the caller's struct. Non-empty buckets sit in a min-heap keyed
// by their expiry; one driver goroutine sleeps on a single runtime timer
// until the earliest bucket is due and is woken only when a bucket with an
// earlier expiry appears, so an idle wheel costs no CPU. A due bucket of a
// higher level is cascaded (its entries re-inserted lower); a due bucket of
// level 0 hands its entries to a bounded executor (Workers goroutines
// sharing one intrusive queue), never a goroutine per timer.
//
// Level 0 files a deadline d in the bucket that expires at ceil(d/Tick)*Tick,
// so a timer never fires before its deadline and at most one tick after it,
// plus the driver's wake-up latency. (Kafka files by floor and may fire up to
// a tick early.)
//
// # Purgatory
//
// TryCompleteElseWatch tries an operation, watches it under its keys, tries
// again, and arms its timeout. CheckAndComplete(key) retries the operations
// watching key. An operation completes exactly once, by the first of
// completion, expiry or Shutdown (a compare-and-swap on its outcome); at
// that moment it is cancelled in the wheel and unlinked from every watcher
// list, so completed operations hold no memory in the purgatory. Watcher
// lists are striped by a hash of the key: each stripe is a mutex and a map
// from key to an intrusive list of watch nodes embedded in the Op.
//
// # Concurrency
//
// Timer and Purgatory are safe for concurrent use. Lock order: Op.mu before
// stripe locks before the wheel lock; no user callback runs under a stripe
// or wheel lock. TryComplete is serialised per operation by Op.mu, and
// OnComplete runs under it when completion came from TryComplete.
//
// # Time
//
// Time is a Clock in nanoseconds. With a ManualClock set Manual: no driver
// and no executor goroutines exist, and expired tasks run inside Poll on the
// caller's goroutine, so tests are deterministic and never sleep.
package purgatory

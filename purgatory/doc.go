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
// the whole span of the level below (Kafka's TimingWheel, KIP seed 004).
// Kafka uses 20 buckets; the default here is 512, so the timeouts of
// fetches and most produce requests sit in level 0 and never cascade:
//
//	level 0  tick 1ms     |b0|b1|...|b511|   spans 512ms
//	level 1  tick 512ms   |b0|b1|...|b511|   spans 262s   (created on demand)
//	level 2  tick 262s    |b0|b1|...|b511|   spans 37h    ...
//
// A bucket is an intrusive, circular, doubly linked list of TimerEntry, so
// Schedule and Cancel are O(1) and allocate nothing when the entry is
// embedded in the caller's struct. Non-empty buckets sit in a min-heap keyed
// by their expiry; one driver goroutine sleeps on a single runtime timer
// until the earliest bucket is due and is woken only when a bucket with an
// earlier expiry appears, so an idle wheel costs no CPU. A due bucket of a
// higher level is cascaded (its entries re-inserted lower); a due bucket of
// level 0 is handed whole to a bounded executor (Workers goroutines sharing
// one queue of buckets), never a goroutine per timer: the driver swaps a
// fresh bucket into the slot, so expiring a bucket costs O(1) under the
// timer lock however many entries it holds, and the executor walks it. A
// worker runs up to 128 entries of the bucket at the head of the queue and
// puts the rest back for whichever worker is free, so a burst spreads over
// the workers. An entry in a bucket handed over stays Scheduled until its
// task starts: Cancel fails and Schedule says ErrBusy, as for a task that
// is running.
//
// Level 0 files a deadline d in the bucket that expires at ceil(d/Tick)*Tick,
// so a timer never fires before its deadline and at most one tick after it,
// plus the driver's wake-up latency. (Kafka files by floor and may fire up to
// a tick early.) A deadline already passed is filed in the bucket due now,
// so it runs at the next poll, on the executor, and can be cancelled until
// then.
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
// from key to a slice of (op, key index); each Op records its position in
// each of its keys' slices, and removal moves the slice's last watcher into
// the hole. Unlike an intrusive linked list, removing touches no other
// operation but the one last added, which is usually still in cache; the
// order of watchers is not kept (CheckAndComplete tries them all). A list
// left empty stays in its map, so a key going between one watcher and none
// allocates nothing; empty lists are swept when they are more than half of
// a stripe's. The pending and expired counts live in the stripe of each
// Op's first key, beside a lock already taken, not in one shared counter.
//
// CheckAndComplete costs one TryComplete per watcher of the key, as in
// Kafka: call it when the key's state changed. A caller that knows which
// operation became completable calls ForceComplete on it, which costs O(1)
// plus one unlink per key.
//
// Config.Timeouts replaces the purgatory's own Timer with another timer
// behind a three-method interface (Arm, Disarm, Close); `kwal bench
// purgatory` uses it to put Go's runtime timers and RussellLuo/timingwheel
// under this same watcher layer. The broker leaves it nil.
//
// # Concurrency
//
// Timer and Purgatory are safe for concurrent use. Lock order: Op.mu before
// stripe locks before the wheel lock; no user callback runs under a stripe
// or wheel lock. A bucket handed to the executor belongs to it: only the
// executor writes its list and its entries' links and tasks, and it never
// writes an entry's bucket pointer, which Cancel reads under the wheel lock
// to tell a live entry from a due one. TryComplete is serialised per operation by Op.mu, and
// OnComplete runs under it when completion came from TryComplete.
//
// # Time
//
// Time is the module's clock (package clock) read as nanoseconds: Of adapts
// any clock.Clock, and the wheel's driver sleeps on that clock's timers, so
// a purgatory on a clock.Manual expires its operations when the clock is
// advanced (the broker builds both of its purgatories with Of(cfg.Clock)).
// RealClock is clock.Real with a one-reading Now. With a ManualClock set
// Manual: no driver and no executor goroutines exist, and expired tasks run
// inside Poll on the caller's goroutine, so tests are deterministic and
// never sleep.
//
// An operation's timeout counts from its Op.Start when set (an instant of
// the module clock, taken to the purgatory's scale by Clock.Reading), else
// from TryCompleteElseWatch. A handler that read the clock when its
// request arrived sets Start to that reading, so the deadline does not
// depend on how long the handler took to arm it: on a manual clock a test
// that advanced past a request's timeout while the handler ran would
// otherwise wait a whole timeout more (TestStartCountsFromArrival,
// TestStartInterleavings).
package purgatory

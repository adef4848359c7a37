// Package ledger counts what kwal asks of the object store and what it sends
// between racks, so that benchmarks report measured request counts and
// bytes and the cost package can turn them into money.
//
// A Ledger keeps counters per (request kind, component, topic-partition,
// rack), read from objstore.Tags in the request context, and per
// (component, from rack, to rack, topic-partition) for network transfers
// recorded with RecordTransfer. Snapshot returns plain, JSON-serialisable
// totals. Store is the objstore.Store decorator that records every request:
// one count, the bytes written (PUT bodies) and read (GET bodies), and
// whether it failed.
//
// It does not price anything (see package cost) and does not reset: take
// two snapshots and subtract with Snapshot.Sub to measure an interval.
//
// Concurrency: safe for concurrent use. The per-key counters are atomics
// found through a sync.Map, so recording on a known key takes no lock and
// allocates nothing.
package ledger

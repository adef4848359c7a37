// Package mem is an in-memory objstore.Store: the reference backend the
// acceptance suite runs first, and the store of unit tests and benchmarks
// that want I/O replaced by memory.
//
// It owns its objects and copies every body in (Put) and out (GetRange), so
// callers may reuse their slices. It does not model latency or faults; wrap
// it with objstore/latency and objstore/fault for that.
//
// Concurrency: safe for concurrent use; one mutex guards the key map and the
// sorted key index.
package mem

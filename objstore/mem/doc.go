// Package mem is an in-memory objstore.Store: the reference backend the
// acceptance suite runs first, and the store of unit tests and benchmarks
// that want I/O replaced by memory.
//
// It owns its objects and copies every body in (Put) and out (GetRange), so
// callers may reuse their slices. GetRangeBody (objstore.BodyGetter) lends
// a read-only view of a stored object instead, with no copy: a stored
// object is never changed, only replaced, so the view stays valid. It does
// not model latency or faults; wrap it with objstore/latency and
// objstore/fault for that.
//
// Standing in for a remote store in a benchmark, it can charge the
// process what a client of a remote store pays and no more: WithArena
// keeps bodies in memory faulted in when the store is made (the remote
// store's memory is not the client's), and WithPooledGets copies each GET
// into a pooled buffer, as a client reads a body from its socket.
//
// Concurrency: safe for concurrent use; one mutex guards the key map and the
// sorted key index.
package mem

// Package fault is a fault-injecting objstore.Store decorator: seeded,
// replayable, rule-driven.
//
// Each request gets a sequence number n (in arrival order). Whether rule i
// fires for request n depends only on (Seed, n, i), through a splitmix64
// hash, so a single-threaded run with the same seed and the same requests
// injects the same faults; in concurrent runs the set of faulty sequence
// numbers is the same and only their assignment to goroutines varies.
//
// Rules are tried in order. Latency rules that fire add their delay and
// evaluation goes on; the first other rule that fires decides the fault and
// ends evaluation. Kinds:
//
//	InternalError  return *Error{Code: 500, Retriable: true}; inner store untouched
//	SlowDown       return *Error{Code: 503, Retriable: true}; inner store untouched
//	Timeout        block until ctx is done or Rule.Delay passes on the clock,
//	               then return an error wrapping context.DeadlineExceeded
//	Latency        wait Rule.Delay on the clock before forwarding
//	Truncate       GetRange returns a strict prefix of the body (GET only)
//	Corrupt        GetRange returns the body with one byte flipped (GET only)
//	AmbiguousPut   the Put reaches the inner store, then *Error{Code: 500,
//	               Applied: true} is returned, as when a response is lost
//
// It owns the counters of what it injected (Stats). It does not retry.
//
// Concurrency: safe for concurrent use; counters are atomic and the rules
// are read-only after New.
package fault

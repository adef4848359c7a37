// Package purgbench is the side-by-side benchmark behind `kwal bench
// purgatory`. It owns the workloads (T1 steady state, T2 burst expiry, P
// Kafka's TestPurgatoryPerformance, I idle), the contestant timers and the
// report. It does not own the purgatory: it drives purgatory.Timer as one
// contestant among Go's runtime timers, RussellLuo/timingwheel (the only
// importer of it in kwal) and a null timer.
//
// T1 and T2 drive each bare timer. P and I run the real purgatory.Purgatory
// for every contestant: kwal's with its own Timer, the others with their
// timer plugged in through purgatory.Timeouts (timers.go), so the watcher
// layer is the same code and only the timer differs. Runs of one workload
// use the same seeds for every contestant.
//
// P follows Kafka's TestPurgatoryPerformance: a generator issues Poisson
// arrivals (it sleeps while ahead, never spins, and issues the arrivals that
// fell due meanwhile together, as Kafka's does at millisecond granularity);
// each request is Kafka's FakeOperation (TryComplete is true once its
// log-normal latency has passed); a completer goroutine, Kafka's
// CompletionQueue, calls ForceComplete on each request when its latency has
// passed, if that is before its timeout. Kafka draws one set of 3 keys for
// all requests; P draws 3 of 100 per request. "P check" rows (kwal only)
// complete through CheckAndComplete on the request's first key instead,
// which is the broker's path and costs one TryComplete per watcher of that
// key. The load-only row runs the generator, requests and completer without
// a purgatory; net CPU subtracts it.
//
// Figures: wall-clock ns/op; allocs/op from runtime.MemStats.Mallocs;
// CPU from getrusage(RUSAGE_SELF), so it includes GC and the harness;
// lateness is fire time minus deadline on one monotonic clock (in P the
// deadline is Op.Deadline, set when the timeout is armed); peak goroutines
// are sampled every millisecond.
//
// Concurrency: a Run is sequential; each workload starts and stops its own
// goroutines before returning.
package purgbench

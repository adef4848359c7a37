// Package purgbench is the side-by-side benchmark behind `kwal bench
// purgatory`. It owns the workloads (T1 steady state, T2 burst expiry, P
// Kafka's TestPurgatoryPerformance, I idle), the contestant timers and the
// report. It does not own the purgatory: it drives purgatory.Timer as one
// contestant among Go's runtime timers, RussellLuo/timingwheel (the only
// importer of it in kwal) and a null timer.
//
// Every contestant is plugged under the same watcher layer (watch.go), a copy
// of the purgatory's algorithm over an interface timer, so only the timer
// differs. Runs of one workload use the same seeds for every contestant.
//
// Figures: wall-clock ns/op; allocs/op from runtime.MemStats.Mallocs;
// CPU from getrusage(RUSAGE_SELF), so it includes GC and the harness;
// lateness is fire time minus deadline on one monotonic clock; peak
// goroutines are sampled every millisecond.
//
// Concurrency: a Run is sequential; each workload starts and stops its own
// goroutines before returning.
package purgbench

// Package latbench is `kwal bench latency`: the remote write-ahead log
// (KIP-1176) against classic replication on the workloads of the KIP's
// performance appendix, measured side by side on one in-process cluster,
// with modelled object-store and cross-AZ latencies, and priced from the
// brokers' ledgers with package cost.
//
// It owns the workloads (end-to-end latency, producer and consumer perf
// tests, each with acks=1 and acks=all; a paced stream for the sweep of
// the combiner interval and object size), the plan that alternates the two
// modes over repetitions, the network model between racks, and the
// report: markdown, JSON and PNG plots (latency CDFs per mode; cost
// against p99 latency). For the end-to-end workloads it also splits each
// record's latency where its offset reached the leader's log, the
// follower's log and the follower's high watermark (trace.go: one watcher
// per broker on its change feed), times the store's PUTs and GETs
// (timedStore, under the latency model), and states issue 14's target 1
// for acks=1 from those figures of the same run (TargetOf). For the
// producer perf tests it records every Produce request's round trip on
// the wire (wireRecorder, a franz-go hook) and applies Little's law to the
// producer's in-flight window (InFlightOf): the bound max.in.flight ×
// request bytes / round trip, the fraction of it achieved, and the round
// trip the remote WAL would need for half of classic's throughput. It
// states issue 14's target 2 from the same runs (ParityOf): the remote
// WAL's median records/s over classic's at acks=1 (wanted ≥ 0.9) and
// acks=all (≥ 0.5), with each repetition's pair, which ran back to back,
// so that the report shows how far one run moves.
//
// It does not own the cluster (localcluster.Start), the object-store
// latency model (objstore/latency), the counts (objstore/ledger) or the
// prices (cost).
//
// Layout of a run:
//
//	          az1                    │                 az2
//	producer ──► broker 1 (leader) ──┼── classic: replica fetch ──► broker 2 (follower) ──► consumer
//	                │                │                                    ▲
//	                └─ remotewal: PUT ──► object store ──► range GET ─────┘
//	                                 │                                  broker 3 (RF 3 only)
//
// Every byte sent across the │ (broker to broker through broker.Config.Dial,
// client to broker through kgo.Dialer) is delivered one configured one-way
// delay later; the store adds its first-byte latency.
//
// Pure parts: Plan, TopicName, the statistics (Percentile, Summarize,
// Median, CDF), Report.Aggregate, InFlightOf, ParityOf and the renderers. Run is
// the driver.
//
// Concurrency: Run is sequential, one step at a time; inside a step the
// producer's callbacks and one consumer goroutine share only atomics and a
// result channel (a perf test's wireRecorder has its own mutex, for
// franz-go's hook goroutines); an end-to-end step's offsetTracer has one watcher per
// broker watched, stopped by its Close. A delayConn has one delivering goroutine, stopped by
// Close; the progress display has one redrawing goroutine, stopped at the
// end of Run.
package latbench

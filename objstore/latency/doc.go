// Package latency is an objstore.Store decorator that makes requests take
// as long as they would on a real object store: a first-byte latency drawn
// from a per-operation log-normal distribution, plus transfer time at a
// per-request bandwidth. Benchmarks of the remote-WAL path wrap the mem or
// fs backend with it to model S3 Express One Zone or S3 Standard.
//
// Presets (medians and p99s of first-byte latency, milliseconds):
//
//	preset      PUT        GET        HEAD       DELETE     LIST       bandwidth/request
//	s3express   4 / 10     3 / 8      3 / 8      4 / 10     5 / 15     200 MB/s
//	s3standard  50 / 200   30 / 150   20 / 100   30 / 150   50 / 200   90 MB/s
//	none        0          0          0          0          0          unlimited
//
// Sources and how firm each figure is:
//   - S3 Express One Zone: AWS describes it as delivering "consistent
//     single-digit millisecond data access" (S3 Express One Zone product
//     page and User Guide, "What is S3 Express One Zone?"). The medians of
//     3-5 ms and p99s of 8-15 ms are our reading of that claim; AWS
//     publishes no percentile table.
//   - S3 Standard: the S3 User Guide's performance design patterns state
//     that small-object and first-byte latencies are "roughly 100-200
//     milliseconds" for latency-sensitive workloads; we use that range as
//     p99 and take medians of 20-50 ms, typical of measurements reported by
//     users in the same region. Treat them as a model, not a measurement.
//   - Bandwidth: the same performance guidelines cite about 85-90 MB/s per
//     request (single connection) from EC2 to S3 Standard; 200 MB/s for S3
//     Express is an assumption (AWS claims higher per-connection throughput
//     for it without a figure).
//
// A log-normal with median m and 99th percentile p has sigma =
// ln(p/m)/2.326 (2.326 is the standard normal's 99th percentile). Samples
// are capped at 10x p99 so one draw cannot stall a benchmark.
//
// It does not inject errors (see objstore/fault) and does not count
// requests (see objstore/ledger).
//
// Concurrency: safe for concurrent use; the random source is under a mutex
// and each request waits on its own timer from the injected clock.
package latency

// Package brokerbench is `kwal bench broker`, two cases.
//
// In process (Run): produce throughput of the kwal broker harness with a
// real client (franz-go), at acks=1 and acks=all, in the classic and
// remotewal replication modes, RF 3, measured in the same process against
// two anchors: franz-go's in-process kfake cluster (which serves every
// request from one goroutine), and the loopback TCP bandwidth of this
// machine, the ceiling of any broker here.
//
// One broker (RunOneBroker): one broker, RF 1, with the server (kfake via
// `kwal bench kfake-server`, or `kwal broker` in classic or remotewal mode)
// and the franz-go producer and consumer (`kwal bench broker-client`) each
// in its own process, so no two share a Go runtime: produce and consume
// MB/s, and the server's CPU-seconds per GB produced and consumed from
// /proc/<pid>/stat, with ratios to kfake per run and of the medians.
package brokerbench

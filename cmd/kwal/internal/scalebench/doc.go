// Package scalebench is `kwal bench scale`: one broker leading 1,000 and
// then 10,000 remotewal partitions at a fixed total rate, to put numbers on
// the objection raised against KIP-1176, the size of the metadata topic.
//
// Each partition count runs the production remote-WAL node
// (rwnode.NewRemoteWALReplicatorFor over broker defaults: slice tasks,
// combiner, metadata publisher, the broker's own metadata consumer and
// maintenance) against an fs or mem object store behind an objstore/latency
// model and an embedded kfake holding __remote_wal_log_metadata. Producing
// goroutines append RecordBatch v2 batches straight to the leader logs
// (kafkalog.AppendAsLeader), bypassing the Kafka wire protocol, at the
// target rate split evenly over the partitions. After a warm-up it measures
// over a window: PUTs/s and bytes (the store's ledger), metadata events and
// bytes per second (a census of the topic: records whose timestamp falls in
// the window), the process's heap in use and RSS, and its CPU-seconds per
// second (getrusage). At the window's end a follower node starts a metadata
// consumer with a fresh index while the leader keeps producing; its
// bootstrap time runs from the start of the consumer to caught up with the
// end offsets it listed, and its index must hold, gap-free, every slice the
// leader had published before it started. The GETs the followers would
// issue (one ranged GET per partition per object, times the reading
// followers) are derived from that index, and the cost model
// (cost.Model.MonthlyCost) prices PUTs, GETs, their bytes and the metadata
// bytes times the AZ boundaries they cross, per broker-month.
//
// It does not run the Kafka protocol, follower logs or consumers: those
// are measured by the broker, latency and replication benchmarks.
package scalebench

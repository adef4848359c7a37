// Package localcluster runs an in-process kwal cluster on loopback, as
// `kwal demo`, the benchmarks and end-to-end tests do: n brokers in the
// racks given, sharing one broker.MemController, one object store (behind
// an objstore/latency model) and one metadata Kafka (an embedded kfake
// unless one is named), each broker with its own ledger and its own
// remote-WAL node (rwnode).
//
// It is a package of its own because it depends on both broker and rwnode,
// and broker must not depend on rwnode.
//
// It does not own any behaviour of the cluster, only its assembly and
// Close, which stops the brokers, then their remote-WAL nodes, then the
// shared parts. Cluster is not safe for concurrent Close.
package localcluster

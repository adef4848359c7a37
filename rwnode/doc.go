// Package rwnode assembles one broker's remote-WAL node: the parts of
// KIP-1176 a broker runs when remote.log.wal.storage.system.enable is set,
// wired to each other and to the broker through the broker.Replicator seam.
//
//	                 broker (partitions, fetcher)
//	StartLeader(log) │          ▲ FollowerReplica: append as follower,
//	StopLeader       │          │ truncate, log end, epochs, leader, notify
//	                 ▼          │
//	  remotewal.WritePath    follower.Follower ◄── metadata.Consumer + State
//	  (tasks → combiner) ──►  (range GETs, apply)      ▲
//	        │ PUT                  ▲ GET               │ events
//	        ▼                      │                   │
//	     object store ─────────────┘     metadata.Publisher ──► __remote_wal_log_metadata
//
//	  maintenance loop: metadata.Retainer (DELETE events, deletes) and
//	  combiner.OrphanCollector, every MaintenanceInterval
//
// It owns the assembly and its lifetime (NewRemoteWALReplicator waits for
// the metadata consumer to catch up before anything follows; Close drains
// the write path), the follower's connections to leaders for
// OffsetForLeaderEpoch and fallback fetches, opening the shared parts from
// a broker config (OpenRemoteWALParts: the store of remote.wal.storage.url,
// the Kafka of remote.wal.metadata.bootstrap.servers or an embedded kfake),
// and the node's Prometheus metrics (RemoteWALReplicator is a
// prometheus.Collector the broker's collector includes).
//
// It does not own the decisions: cutting slices (remotewal), packing and
// uploading (combiner), metadata and retention (metadata), what a follower
// reads and appends next (follower), nor partitions, the high watermark or
// the ISR (broker). It holds no pointer to a broker: the leader side gets a
// partition's log in StartLeader (its high watermark is the retention's
// safe offset while this broker leads), the follower side a
// broker.FollowerReplica handle in StartFollower.
//
// It is its own package, not part of broker, so that the broker is only
// the Kafka harness and does not depend on the remote-WAL parts; broker
// tests run without them and this package's tests run real brokers.
//
// Concurrency: a RemoteWALReplicator is safe for concurrent use; mu guards
// the led and followed partitions and the leader connections; each leader
// connection carries one request at a time under its own lock. The
// maintenance goroutine stops in Close.
package rwnode

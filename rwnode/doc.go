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
//	  maintenance loop: metadata.Retainer (DELETE events, deletes), the
//	  dead objects of deleted partitions (delete.go) and
//	  combiner.OrphanCollector, every MaintenanceInterval
//
// It owns the assembly and its lifetime (NewRemoteWALReplicator waits for
// the metadata consumer to catch up before anything follows; Close drains
// the write path), the follower's connections to leaders for
// OffsetForLeaderEpoch and fallback fetches, opening the shared parts from
// a broker config (OpenRemoteWALParts: the store of remote.wal.storage.url,
// proved reachable by a listing within remote.wal.storage.check.timeout.ms
// (CheckStore), the Kafka of remote.wal.metadata.bootstrap.servers or an
// embedded kfake, waited for at most remote.wal.metadata.bootstrap.timeout.ms),
// and the node's Prometheus metrics (RemoteWALReplicator is a
// prometheus.Collector the broker's collector includes).
//
// # A metadata topic hosted by the cluster itself (deferred.go)
//
// When remote.wal.metadata.bootstrap.servers names the cluster's own
// brokers (OpenRemoteWALParts sets SelfHosted and a replication factor of
// min(3, cluster.brokers)), the replicator cannot be built before the
// broker listens: it would wait for a metadata topic that its own cluster,
// not up yet, serves. DeferredReplicator is the broker.Replicator then: it
// builds the RemoteWALReplicator in the background, retrying until the
// cluster answers, remembers the leaders and follows started meanwhile
// (and forgets stopped ones), and replays the current ones into it when
// ready. kwal broker uses it; the metadata topic itself is an ordinary
// classic, compacted topic of the cluster, created by the first replicator
// that reaches it (metadata.EnsureTopic through CreateTopics).
//
// # Leader changes (remotewal_reconcile.go)
//
// StartLeader restarts the partition's slice task with the new leader
// epoch once the metadata consumer has caught up with the topic
// (leaderstart.go; concurrent starts share one catch-up): at the log end,
// or lower, where the live published entries that agree with its log end
// (remotewal.UploadStart), so the range a deposed leader appended but
// never uploaded is uploaded now, in the new epoch, instead of reaching
// followers only through the leader fallback. It publishes a
// metadata.DeadRange (epoch, start of the
// epoch in the log), retried until published or the leadership ends: every
// entry of an older epoch past it is dead (the KIP's "B2 publishes DELETE
// for 6–10"), including what a deposed leader still uploads. Each
// maintenance run vouches for the high watermarks of the partitions this
// broker leads (metadata.ReplicatedOffset); retention reads the vouches
// as its safe offsets, and deletes an object on the broker that vouched
// last for the object's least partition (its latest leader, as the
// metadata says), whoever uploaded it.
//
// # One store per rack (storeset.go)
//
// StoreSet resolves store ids, the racks of remote.wal.storage.url.<rack>
// or of a {rack} template, "" for the default store. A leader uploads to
// its rack's store and writes its id in the events' bucket field; the
// follower reads through storeRouter, which sends each slice's ranged GET
// to the store its event names (routedIndex carries the id in the key it
// hands the follower); an id this broker cannot resolve is an
// *UnknownStoreError, so the follower falls back to the leader. Retention
// deletes each object from its own store; orphan collection lists only
// this broker's own store.
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

// Package replbench measures remote-WAL replication lag end to end, in one
// process, and breaks it down by stage: a leader's appends go through the
// real write path (remotewal tasks, combiner, object store behind a
// latency model, metadata on an embedded Kafka) and a real follower
// rebuilds the logs. Every stage is timed by decorators of the interfaces
// the packages already take (sink, store, publisher, index, log), so the
// measured code is the production code.
//
// Stages of one slice, from the leader's append of its first batch to the
// follower's append of it:
//
//	cut       append → remotewal task submits the slice (task interval)
//	queue     submit → combiner starts the object's PUT (packing interval)
//	put       PUT start → PUT done
//	publish   PUT done → metadata acknowledged by Kafka
//	delivery  metadata acknowledged → the follower's index holds it
//	issue     in the index → the follower's ranged GET started
//	get       GET started → returned (the store's latency model)
//	append    GET returned → the follower appended the batches
package replbench

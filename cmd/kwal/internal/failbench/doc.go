// Package failbench is `kwal bench failover`: an in-process cluster of
// three brokers (one per rack, RF 3, min.insync.replicas 2, the remote
// WAL on the S3 Express latency model by default) with liveness on; one
// partition takes an idempotent acks=all producer and an acks=1 producer
// at once, and its leader is stopped, as a crash, N times under that
// load, once per replication mode.
//
// Per kill it measures the time to a new leader (the controller's state
// shows another leader at a higher leader epoch) and to the first
// successful acks=all produce sent after the kill (its acknowledgement). Over a run it counts
// acknowledged records lost: for acks=all (idempotent) it must be 0; for
// acks=1 it is the records acknowledged by the stopped leader that no
// replica had, and how many milliseconds of that producer's traffic they
// are (lost records / that producer's acknowledgements per ms in the
// second before the kill). The stopped broker
// restarts (a new broker epoch) and rejoins the ISR before the next kill.
//
// The session timeout dominates the time to a new leader by design: a
// crash is noticed only when a session expires.
package failbench

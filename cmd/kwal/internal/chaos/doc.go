// Package chaos is `kwal chaos`: seeded fault schedules run against a
// whole cluster, with a history of every send and read checked afterwards
// in the manner of Jepsen's queue checker.
//
// It owns:
//   - Generate, a pure schedule generator: the same seed and Options give
//     the same list of timed faults (schedule.go);
//   - Check, the checker over a History of sends (with their outcomes)
//     and reads (checker.go); a consumer that stopped short of the high
//     watermarks is a Stall, and what it did not reach is reported
//     unread (a liveness failure), not lost;
//   - Run, which drives one schedule on one of two runners behind the
//     small cluster interface (runner.go), with idempotent acks=all and
//     plain acks=1 producers over classic and remotewal topics, consumers
//     in both racks that read from the start while the faults run, and
//     after the schedule the checks: history, replicas byte-identical over
//     their common offsets and holding the high watermark, metadata in
//     offset order, the remote WAL healed, `kwal audit` clean, no log flood.
//
// The runners:
//
//   - in process (inprocess.go): a localcluster with a partitionable
//     broker-to-broker dialer, pausable heartbeats, a switchable
//     object-store fault decorator, a gate per broker in front of the
//     store, a kafkalog file layer per broker that can run out of space
//     (ENOSPC) and an embedded metadata Kafka that can go down;
//   - across processes (process.go): three `kwal broker` processes, one
//     versitygw with a bucket per rack, the metadata Kafka (kfake) in this
//     process, and loopback proxies from internal/faultnet: a TCP proxy per
//     ordered broker pair (each broker's static cluster.brokers list names
//     its peers by their proxies), a TCP proxy between each broker and the
//     store, and one S3 proxy that injects latency, 503 SlowDown and
//     ambiguous PUTs. Faults are real: SIGKILL and restart, SIGSTOP and
//     SIGCONT past the session timeout, stalled proxies (a partition),
//     versitygw killed and restarted (store down), RLIMIT_FSIZE lowered to
//     0 with prlimit(2) (disk full: writes fail with EFBIG; no root needed,
//     unlike a size-limited file system), and the metadata Kafka closing
//     every connection. Replicas are compared from their log files once
//     the brokers have stopped.
//
// In process, a schedule's time is compressed: its Length (default 1 s)
// sets every fault's length and gap, and the session timeout (4/15 of
// it), from which heartbeats, replica.lag.time.max.ms, the
// leader-imbalance check and the pauses follow, so a pause still outlasts
// the session timeout and a fault still outlasts the lag limit. Brokers
// listen on ports below the kernel's ephemeral range (ports.go), handed
// out per process, so that several clusters run at once (`kwal chaos
// --parallel N`) and a killed broker's port stays free for its restart.
// Report.Phases says where a run's wall time went.
//
// The self-test (TestHarnessCatchesAcksAllBeforeISR) plants a bug, acks=all
// answered at the leader's append, and requires the runs to report the
// acknowledged records lost.
//
// Fault kinds are grouped in lanes (schedule.go): faults of one lane never
// overlap, and each lane is injected on its own goroutine, so a slow
// recovery in one (a broker that cannot start while the metadata Kafka is
// down) does not hold back the end of a fault in another.
//
// A seed replays its schedule exactly, but not the cluster's interleaving:
// brokers, clients and faults run on the real clock over loopback sockets
// (franz-go clients cannot run on a manual clock), so a failure found once
// may take several replays to recur.
//
// It is under cmd/kwal/internal because it runs cmd/kwal/internal/audit.
// It changes no behaviour of the code under test: faults enter only
// through the broker's injectable Dial, Controller and LogFS, the
// localcluster store wrappers, and, across processes, signals, resource
// limits and proxies.
//
// Concurrency: History is safe for concurrent use; a runner drives one
// cluster at a time and stops every goroutine and process it starts
// before Run returns.
package chaos

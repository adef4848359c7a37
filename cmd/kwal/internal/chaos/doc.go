// Package chaos is `kwal chaos`: seeded fault schedules run against a
// whole in-process cluster, with a history of every send and read checked
// afterwards in the manner of Jepsen's queue checker.
//
// It owns three things:
//   - Generate, a pure schedule generator: the same seed and Options give
//     the same list of timed faults (schedule.go);
//   - Check, the checker over a History of sends (with their outcomes)
//     and reads (checker.go);
//   - Run, the in-process runner: a localcluster with a partitionable
//     broker-to-broker dialer, pausable heartbeats and a switchable
//     object-store fault decorator, idempotent acks=all and plain acks=1
//     producers over classic and remotewal topics, consumers in both racks,
//     and after the schedule the replica-log and `kwal audit` checks
//     (runner.go, faults.go).
//
// A seed replays its schedule exactly, but not the cluster's interleaving:
// brokers, clients and faults run on the real clock over loopback sockets
// (franz-go clients cannot run on a manual clock), so a failure found once
// may take several replays to recur.
//
// It is under cmd/kwal/internal because it runs cmd/kwal/internal/audit.
// It changes no behaviour of the code under test: faults enter only
// through the broker's injectable Dial and Controller and a store
// decorator (localcluster.Config.WrapStore).
//
// Concurrency: History is safe for concurrent use; a runner drives one
// cluster at a time and stops every goroutine it starts before Run returns.
package chaos

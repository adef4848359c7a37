// Package retry holds the two pieces every retrying component of kwal
// shares so that a long outage neither spins nor floods the log:
//
//   - Backoff: exponential delays with a cap and jitter. It reads no
//     clock and no global random source: the caller passes the failure
//     count and a uniform number in [0, 1) from its own seeded source.
//   - Episode: a run of failures seen as one state change. The first
//     failure is reported once (log it as "entered ..."), later ones at
//     most once per Every with the count since the last report ("still
//     ..., N more"), and the first success after them once with the total
//     ("left ... after N"). It reads no clock: the caller passes the time.
//
// Neither is safe for concurrent use; the owner of the retrying state
// (a driver goroutine, or a mutex beside it) owns them.
package retry

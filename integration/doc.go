// Package integration holds kwal's tests across packages, processes and
// real servers: the write path into versitygw with metadata on a compacted
// topic, the follower rebuilding logs from it, faults and crashes, kwal
// broker processes with TLS and SASL listeners (security_test.go). Tests
// that need a server run when the environment provides it
// (scripts/test-env.sh sets KWAL_S3_ENDPOINT) and say loudly when skipped.
//
// Unit tests live beside their code; this package has no non-test code
// beyond shared helpers.
package integration

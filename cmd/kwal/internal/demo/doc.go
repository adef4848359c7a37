// Package demo is `kwal demo`: a three-broker, two-rack cluster in one
// process, a remotewal topic, an acks=all franz-go producer and a consumer
// in the follower's rack, live progress and a summary whose every figure is
// measured (latencies from the clients, requests and bytes from the
// brokers' ledgers, byte identity from the logs themselves).
package demo

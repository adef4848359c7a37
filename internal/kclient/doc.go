// Package kclient holds the small Kafka client helpers kwal's commands and
// benchmarks share.
package kclient

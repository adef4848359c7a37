// Package brokerbench is `kwal bench broker`: produce throughput of the
// kwal broker harness with a real client (franz-go), at acks=1 and
// acks=all, in the classic and remotewal replication modes, measured in the
// same process against two anchors: franz-go's in-process kfake cluster
// (which serves every request from one goroutine), and the loopback TCP
// bandwidth of this machine, the ceiling of any broker here.
package brokerbench

// Package kafkalogtest builds valid RecordBatch v2 bytes for tests of
// kafkalog and of the packages that use it (follower, combiner, broker).
//
// It does not import kafkalog, so kafkalog's own internal tests can use it.
// Nothing here is for production use.
package kafkalogtest

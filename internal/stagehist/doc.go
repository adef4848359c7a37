// Package stagehist holds the latency histograms users tune the remote WAL
// by, one per stage of the data path, and the Observer interface the
// packages on that path report durations through.
//
// Stages (metric names in /metrics, all in seconds):
//
//	cut_to_put        kwal_remotewal_cut_to_put_seconds       a slice submitted by its task → the PUT of its object done
//	put               kwal_objstore_put_seconds               one combined-object PUT (each attempt)
//	publish           kwal_remotewal_publish_seconds          PUT done → the object's metadata acknowledged by Kafka
//	metadata_delivery kwal_metadata_delivery_seconds          metadata record produced → applied by this broker's consumer
//	get               kwal_objstore_get_seconds               one follower ranged GET (each, hedges included)
//	replication_lag   kwal_replication_lag_seconds            a batch's max timestamp → appended by a follower
//	acks_all_wait     kwal_produce_acks_all_wait_seconds      an acks=all produce appended → answered (HW passed or timed out)
//
// replication_lag is measured against the batch's max timestamp: the
// producer's clock for CreateTime topics, the leader's for LogAppendTime;
// across hosts it includes their clock offset. metadata_delivery uses the
// record's timestamp, which the publishing broker's Kafka client sets.
//
// The buckets are for millisecond-scale latency: from 0.5 ms to 10 s, dense
// between 1 and 50 ms where S3 Express One Zone PUTs and GETs and the
// combiner's interval live.
//
// A *Histograms is safe for concurrent use; a nil *Histograms observes
// nothing. Observers must not block: they are called on the data path.
package stagehist

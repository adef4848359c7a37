package rwnode

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kwal/kwal/broker"
)

// The remote-WAL node's metrics; the broker's Collector includes them
// because RemoteWALReplicator is a prometheus.Collector.
var (
	descCombiner   = prometheus.NewDesc("kwal_combiner", "Combiner state and counters.", []string{"what"}, nil)
	descTasks      = prometheus.NewDesc("kwal_remotewal_slices_total", "Slices cut by the leader's remote-WAL tasks, by reason.", []string{"reason"}, nil)
	descFollower   = prometheus.NewDesc("kwal_follower_total", "Follower read-path counters.", []string{"what"}, nil)
	descLagOffsets = prometheus.NewDesc("kwal_follower_lag_offsets", "Offsets the follower's log is behind the leader.", []string{"topic", "partition"}, nil)
	descLagMs      = prometheus.NewDesc("kwal_follower_lag_ms", "How far the follower's log is behind the leader's appends, in ms.", []string{"topic", "partition"}, nil)
	descReconcile  = prometheus.NewDesc("kwal_remotewal_reconcile_total", "Leader-change events this broker published: dead ranges, their publish retries, replicated-offset vouches.", []string{"what"}, nil)
)

var _ prometheus.Collector = (*RemoteWALReplicator)(nil)

// Describe sends the descriptors of the node's metrics.
func (r *RemoteWALReplicator) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCombiner, descTasks, descFollower, descLagOffsets, descLagMs, descReconcile} {
		ch <- d
	}
}

// Collect reads the combiner's, the tasks' and the follower's counters
// and each followed partition's lag.
func (r *RemoteWALReplicator) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	cm := r.wp.Combiner.Metrics()
	for what, v := range map[string]int64{
		"queued_slices": int64(cm.QueuedSlices), "queued_bytes": cm.QueuedBytes,
		"held_slices": int64(cm.HeldSlices), "held_bytes": cm.HeldBytes,
		"submits_blocked": cm.SubmitsBlocked, "objects_cut": cm.ObjectsCut, "objects_uploaded": cm.ObjectsUp,
		"objects_published": cm.ObjectsPub, "bytes_uploaded": cm.BytesUploaded, "upload_retries": cm.UploadRetries,
		"publish_retries": cm.PublishRetries, "objects_failed": cm.ObjectsFailed,
		"objects_partial": cm.ObjectsPartial, "slices_given_up": cm.SlicesGivenUp,
	} {
		gauge(descCombiner, float64(v), what)
	}
	tm := r.wp.Manager.Metrics()
	counter(descTasks, float64(tm.CutsBySize), "size")
	counter(descTasks, float64(tm.CutsByInterval), "interval")
	counter(descTasks, float64(tm.CutsByBoundary), "boundary")
	fm := r.fol.Metrics()
	for what, v := range map[string]int64{
		"reads": fm.Reads, "gets": fm.GETs, "hedges": fm.Hedges, "hedge_wins": fm.HedgeWins, "read_errors": fm.ReadErrors,
		"corrupt_slices": fm.CorruptSlices, "bytes_read": fm.BytesRead, "slices_applied": fm.SlicesApplied,
		"bytes_applied": fm.BytesApplied, "duplicates": fm.Duplicates, "fenced": fm.Fenced, "fallbacks": fm.Fallbacks,
		"leader_fetches": fm.LeaderFetches, "leader_bytes": fm.LeaderBytes, "truncations": fm.Truncations,
		"appends": fm.Appends,
	} {
		counter(descFollower, float64(v), what)
	}
	counter(descReconcile, float64(r.recon.deadRanges.Load()), "dead_ranges")
	counter(descReconcile, float64(r.recon.deadRangeRetries.Load()), "dead_range_retries")
	counter(descReconcile, float64(r.recon.vouches.Load()), "vouches")
	r.mu.Lock()
	var follows []broker.TopicPartition
	for _, v := range r.mu.follows {
		follows = append(follows, v.tp)
	}
	r.mu.Unlock()
	for _, tp := range follows {
		if st, ok := r.fol.Status(mtp(tp)); ok {
			p := strconv.Itoa(int(tp.Partition))
			gauge(descLagOffsets, float64(st.LagOffsets), tp.Topic, p)
			gauge(descLagMs, float64(st.LagMs), tp.Topic, p)
		}
	}
}

package stagehist

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stage names one measured step of the data path.
type Stage int

const (
	CutToPut Stage = iota
	Put
	Publish
	MetadataDelivery
	Get
	ReplicationLag
	AcksAllWait
	numStages
)

// Stages lists every stage, in data-path order.
var Stages = []Stage{CutToPut, Put, Publish, MetadataDelivery, Get, ReplicationLag, AcksAllWait}

var stageInfo = [numStages]struct{ name, metric, help string }{
	CutToPut:         {"cut_to_put", "kwal_remotewal_cut_to_put_seconds", "Remote WAL: a slice submitted by its partition task until the PUT of the object holding it finished."},
	Put:              {"put", "kwal_objstore_put_seconds", "Remote WAL: one combined-object PUT attempt."},
	Publish:          {"publish", "kwal_remotewal_publish_seconds", "Remote WAL: an object's PUT done until its metadata was acknowledged by the metadata Kafka."},
	MetadataDelivery: {"metadata_delivery", "kwal_metadata_delivery_seconds", "Remote WAL: a metadata record produced until this broker's consumer applied it."},
	Get:              {"get", "kwal_objstore_get_seconds", "Remote WAL: one follower ranged GET (hedges included)."},
	ReplicationLag:   {"replication_lag", "kwal_replication_lag_seconds", "Remote WAL: a batch's max timestamp until a follower appended it."},
	AcksAllWait:      {"acks_all_wait", "kwal_produce_acks_all_wait_seconds", "An acks=all produce: appended by the leader until answered (high watermark passed, or timed out)."},
}

// String is the stage's short name.
func (s Stage) String() string {
	if s < 0 || s >= numStages {
		return "unknown"
	}
	return stageInfo[s].name
}

// Metric is the stage's histogram name in /metrics.
func (s Stage) Metric() string {
	if s < 0 || s >= numStages {
		return ""
	}
	return stageInfo[s].metric
}

// Buckets are the upper bounds, in seconds, of every stage's histogram.
var Buckets = []float64{
	0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03,
	0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5, 5, 10,
}

// Observer receives one duration of a stage. It must not block.
type Observer interface {
	Observe(s Stage, d time.Duration)
}

// Histograms is one Prometheus histogram per stage; a prometheus.Collector
// and an Observer.
type Histograms struct {
	h [numStages]prometheus.Histogram
}

var (
	_ Observer             = (*Histograms)(nil)
	_ prometheus.Collector = (*Histograms)(nil)
)

// New returns empty histograms.
func New() *Histograms {
	h := &Histograms{}
	for s := range numStages {
		h.h[s] = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: stageInfo[s].metric, Help: stageInfo[s].help, Buckets: Buckets,
		})
	}
	return h
}

// Observe records d for s; negative durations (clocks of two hosts) count
// as zero. A nil *Histograms does nothing.
func (h *Histograms) Observe(s Stage, d time.Duration) {
	if h == nil || s < 0 || s >= numStages {
		return
	}
	h.h[s].Observe(max(0, d).Seconds())
}

// Describe implements prometheus.Collector.
func (h *Histograms) Describe(ch chan<- *prometheus.Desc) {
	if h == nil {
		return
	}
	for _, x := range h.h {
		x.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (h *Histograms) Collect(ch chan<- prometheus.Metric) {
	if h == nil {
		return
	}
	for _, x := range h.h {
		x.Collect(ch)
	}
}

// Observe calls o.Observe when o is not nil: for packages whose Observer
// is optional.
func Observe(o Observer, s Stage, d time.Duration) {
	if o != nil {
		o.Observe(s, d)
	}
}

package broker

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kwal/kwal/purgatory"
)

// requestCounters count requests by API; bytes come from the ledger.
type requestCounters struct {
	produce, fetchConsumer, fetchReplica, fetchFallback atomic.Int64
}

// connCounters count what the connection layer did on its own.
type connCounters struct {
	reapedIdle, reapedSlow, acceptErrors atomic.Int64
}

// eventCounters count things worth watching that are not requests.
type eventCounters struct {
	// idempotentDuplicates: batches answered with their original offsets
	// because the producer had appended them already (resends).
	idempotentDuplicates atomic.Int64
	// retentionSegments: segments deleted by local retention.
	retentionSegments atomic.Int64
	// zeroCopyBytes, zeroCopySections: fetched record bytes sent from a
	// segment file with sendfile, and the sections fully sent so.
	zeroCopyBytes, zeroCopySections atomic.Int64
	// isrShrinks, isrExpands: ISR changes this broker proposed as leader
	// (AlterPartition), whether the controller took them or not.
	isrShrinks, isrExpands atomic.Int64
}

// Collector exposes a broker's state as Prometheus metrics, read at scrape
// time from the components' own counters: produce and fetch rates,
// purgatory sizes, object-store requests, replicas' log ends and high
// watermarks, bytes by component and rack crossing, and the data path's
// latency histograms (Config.Stages, package stagehist). A Replicator that
// is a prometheus.Collector (rwnode's: the combiner queue and uploads,
// follower lag and fallbacks) is collected with it.
type Collector struct{ b *Broker }

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns the collector of b.
func NewCollector(b *Broker) *Collector { return &Collector{b: b} }

var (
	descRequests   = prometheus.NewDesc("kwal_requests_total", "Requests served, by API and kind.", []string{"api", "kind"}, nil)
	descTransfer   = prometheus.NewDesc("kwal_network_bytes_total", "Record bytes moved over the network, by component and whether they crossed racks.", []string{"component", "cross_rack"}, nil)
	descPurgatory  = prometheus.NewDesc("kwal_purgatory_pending", "Delayed operations waiting.", []string{"purgatory"}, nil)
	descWatchers   = prometheus.NewDesc("kwal_purgatory_watchers", "Watch-list entries.", []string{"purgatory"}, nil)
	descExpired    = prometheus.NewDesc("kwal_purgatory_expired_total", "Delayed operations that expired.", []string{"purgatory"}, nil)
	descStore      = prometheus.NewDesc("kwal_objstore_requests_total", "Object-store requests, by kind and component.", []string{"kind", "component"}, nil)
	descStoreBytes = prometheus.NewDesc("kwal_objstore_bytes_total", "Object-store bytes, by direction.", []string{"direction"}, nil)
	descLogEnd     = prometheus.NewDesc("kwal_partition_log_end_offset", "Log end offset of each local replica.", []string{"topic", "partition", "role"}, nil)
	descConns      = prometheus.NewDesc("kwal_connections", "Client connections open now.", nil, nil)
	descConnEvents = prometheus.NewDesc("kwal_connection_events_total", "Connections closed or refused by the broker, and failed accepts, by what.", []string{"what"}, nil)
	descHW         = prometheus.NewDesc("kwal_partition_high_watermark", "High watermark of each local replica.", []string{"topic", "partition", "role"}, nil)
	descDuplicates = prometheus.NewDesc("kwal_idempotent_duplicate_batches_total", "Idempotent batches already in the log, answered with their original offsets.", nil, nil)
	descRetention  = prometheus.NewDesc("kwal_retention_deleted_segments_total", "Segments deleted by local retention (retention.ms, retention.bytes).", nil, nil)
	descISR        = prometheus.NewDesc("kwal_isr_proposals_total", "ISR changes proposed by this broker as leader, by kind (shrink: lagging followers out; expand: a caught-up follower in).", []string{"kind"}, nil)
	descZeroCopy   = prometheus.NewDesc("kwal_fetch_zero_copy_bytes_total", "Fetched record bytes sent from segment files with sendfile (no user-space copy).", nil, nil)
	descLogDir     = prometheus.NewDesc("kwal_log_dir_offline", "1 when the broker's log dir (log.dirs) had an I/O error and is offline: its partitions answer KAFKA_STORAGE_ERROR until a restart.", []string{"log_dir"}, nil)
)

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descTransfer, descPurgatory, descWatchers, descExpired, descStore,
		descStoreBytes, descLogEnd, descHW, descDuplicates, descRetention, descConns, descConnEvents, descZeroCopy, descLogDir, descISR} {
		ch <- d
	}
	c.b.cfg.Stages.Describe(ch)
	if rc, ok := c.b.cfg.Replicator.(prometheus.Collector); ok {
		rc.Describe(ch)
	}
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(descRequests, float64(b.reqs.produce.Load()), "produce", "all")
	counter(descRequests, float64(b.reqs.fetchConsumer.Load()), "fetch", "consumer")
	counter(descRequests, float64(b.reqs.fetchReplica.Load()), "fetch", "replica")
	counter(descRequests, float64(b.reqs.fetchFallback.Load()), "fetch", "fallback")
	counter(descDuplicates, float64(b.events.idempotentDuplicates.Load()))
	counter(descRetention, float64(b.events.retentionSegments.Load()))
	gauge(descConns, float64(b.limits.open()))
	counter(descConnEvents, float64(b.conns.reapedIdle.Load()), "closed_idle")
	counter(descConnEvents, float64(b.conns.reapedSlow.Load()), "closed_slow_request")
	counter(descConnEvents, float64(b.limits.refusedPerIP.Load()), "refused_per_ip")
	counter(descConnEvents, float64(b.limits.evicted.Load()), "closed_for_inter_broker")
	counter(descConnEvents, float64(b.conns.acceptErrors.Load()), "accept_error")
	counter(descZeroCopy, float64(b.events.zeroCopyBytes.Load()))
	offline := 0.0
	if b.dir.offline() {
		offline = 1
	}
	gauge(descLogDir, offline, b.cfg.LogDir)
	counter(descISR, float64(b.events.isrShrinks.Load()), "shrink")
	counter(descISR, float64(b.events.isrExpands.Load()), "expand")

	snap := b.ledger.Snapshot()
	type key struct {
		comp  string
		cross bool
	}
	moved := map[key]int64{}
	for _, t := range snap.Transfers {
		moved[key{t.Component, t.CrossRack()}] += t.Bytes
	}
	for k, v := range moved {
		counter(descTransfer, float64(v), k.comp, strconv.FormatBool(k.cross))
	}
	stores := map[[2]string]int64{}
	for _, r := range snap.Requests {
		stores[[2]string{string(r.Kind), r.Component}] += r.Requests
	}
	for k, v := range stores {
		counter(descStore, float64(v), k[0], k[1])
	}
	var written, read int64
	for _, t := range snap.ByKind {
		written += t.BytesWritten
		read += t.BytesRead
	}
	counter(descStoreBytes, float64(written), "written")
	counter(descStoreBytes, float64(read), "read")

	for name, p := range map[string]*purgatory.Purgatory[TopicPartition]{"produce": b.produceWait, "fetch": b.fetchWait} {
		m := p.Metrics()
		gauge(descPurgatory, float64(m.Pending), name)
		gauge(descWatchers, float64(m.Watchers), name)
		counter(descExpired, float64(m.Expired), name)
	}

	b.cfg.Stages.Collect(ch)
	if rc, ok := b.cfg.Replicator.(prometheus.Collector); ok {
		rc.Collect(ch)
	}
	for _, p := range b.partitionsSnapshot() {
		_, leader := p.snapshot()
		role := "follower"
		if leader {
			role = "leader"
		}
		part := strconv.Itoa(int(p.tp.Partition))
		gauge(descLogEnd, float64(p.log.LogEndOffset()), p.tp.Topic, part, role)
		gauge(descHW, float64(p.log.HighWatermark()), p.tp.Topic, part, role)
	}
}

// ServeMetrics serves /metrics (Prometheus text format) for b on addr until
// the broker closes. It returns the address it listens on.
func (b *Broker) ServeMetrics(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("broker: metrics listener %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewCollector(b)); err != nil {
		ln.Close()
		return "", err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: nil}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.logger.Error("metrics server", "err", err)
		}
	}()
	go func() {
		<-b.stop
		srv.Close()
	}()
	return ln.Addr().String(), nil
}

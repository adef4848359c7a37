package latbench

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceKey is the Produce API key.
const produceKey = 0

// wireRecorder is a franz-go hook that records every Produce request's
// round trip on the wire (kgo.BrokerE2E.DurationE2E: from the start of
// its write to the end of its response's read) and its size. That is the
// time a request spends in the producer's in-flight window, the W of
// Little's law for that window: the queueing a perf-test record does in
// the client's buffer before its request is written is not in it.
type wireRecorder struct {
	mu struct {
		sync.Mutex
		on      bool
		rtts    []time.Duration
		bytes   int64
		brokers map[int32]bool // the brokers written to: one connection each
	}
}

var _ kgo.HookBrokerE2E = (*wireRecorder)(nil)

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (w *wireRecorder) OnBrokerE2E(m kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != produceKey || e.Err() != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.on {
		w.mu.rtts = append(w.mu.rtts, e.DurationE2E())
		w.mu.bytes += int64(e.BytesWritten)
		w.mu.brokers[m.NodeID] = true
	}
}

// start forgets what was recorded (the warm-up) and records from now.
func (w *wireRecorder) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.on, w.mu.rtts, w.mu.bytes, w.mu.brokers = true, nil, 0, map[int32]bool{}
}

// figures returns what was recorded since start.
func (w *wireRecorder) figures() WireFigures {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WireFigures{RTT: Summarize(w.mu.rtts), Requests: len(w.mu.rtts), RequestBytes: w.mu.bytes, Connections: len(w.mu.brokers)}
}

// WireFigures are a producer's Produce requests as the client saw them on
// the wire (wireRecorder).
type WireFigures struct {
	// RTT: write start to response read, per request.
	RTT          Summary `json:"rtt"`
	Requests     int     `json:"requests"`
	RequestBytes int64   `json:"request_bytes"`
	// Connections: the brokers Produce requests went to (a partition's
	// leader each; franz-go keeps one produce connection per broker).
	Connections int `json:"connections"`
}

// InFlight is Little's law applied to a producer's in-flight windows:
// with at most N requests in flight per connection, and C connections
// (one per broker leading a partition the producer writes: one with a
// single partition), throughput is at most C × N × (mean request bytes)
// / (mean wire round trip). Achieved / bound is the windows' mean
// occupancy. The round trip that 0.5× classic would need is C × N × (the
// remote WAL's mean request bytes) / (half classic's throughput).
type InFlight struct {
	Workload Workload `json:"workload"`
	Mode     string   `json:"mode"`
	Window   int      `json:"max_in_flight"`
	// Connections: C above, the median over the runs.
	Connections int `json:"connections"`
	// MeanRTT and P50RTT: medians over the runs of each run's mean and
	// p50 wire round trip.
	MeanRTT         time.Duration `json:"mean_rtt_ns"`
	P50RTT          time.Duration `json:"p50_rtt_ns"`
	MeanRequestByte float64       `json:"mean_request_bytes"`
	BoundMBPerSec   float64       `json:"bound_mb_per_sec"`
	MBPerSec        float64       `json:"mb_per_sec"`
	OfBound         float64       `json:"of_bound"`
	// CPUMsPerMB is the whole process's CPU per MB produced (Row.CPUMsPerMB).
	CPUMsPerMB float64 `json:"cpu_ms_per_mb"`
	// RTTForHalfClassic is set on the remote-WAL row when the classic
	// row is there.
	RTTForHalfClassic time.Duration `json:"rtt_for_half_classic_ns,omitempty"`
	// StoreFloor is set on the remote-WAL row at acks=all: the run's own
	// PUT p50 plus GET p50, below which no acks=all round trip can go (a
	// record is acknowledged only once a follower has read back what the
	// leader uploaded: invariant 1).
	StoreFloor time.Duration `json:"store_floor_ns,omitempty"`
}

// InFlightOf computes the in-flight bound of every produce-perf row with
// wire figures, remote WAL after classic per workload.
func InFlightOf(rows []Row) []InFlight {
	var out []InFlight
	classic := map[Workload]Row{}
	for _, row := range rows {
		if row.Mode == Classic && row.WireRTTMean > 0 {
			classic[row.Workload] = row
		}
	}
	for _, row := range rows {
		if (row.Workload != Produce && row.Workload != ProduceAll) || row.WireRTTMean <= 0 || row.WireRequestBytes <= 0 {
			continue
		}
		conns := max(row.WireConnections, 1)
		n := producerConfigFor(row.Workload).inFlight * conns // requests on the wire at once, at most
		f := InFlight{Workload: row.Workload, Mode: row.Mode, Window: producerConfigFor(row.Workload).inFlight, Connections: conns,
			MeanRTT: row.WireRTTMean, P50RTT: row.WireRTTP50, MeanRequestByte: row.WireRequestBytes, MBPerSec: row.MBPerSec, CPUMsPerMB: row.CPUMsPerMB}
		f.BoundMBPerSec = float64(n) * row.WireRequestBytes / row.WireRTTMean.Seconds() / 1e6
		if f.BoundMBPerSec > 0 {
			f.OfBound = row.MBPerSec / f.BoundMBPerSec
		}
		if c, ok := classic[row.Workload]; ok && row.Mode == RemoteWAL && c.MBPerSec > 0 {
			f.RTTForHalfClassic = time.Duration(float64(n) * row.WireRequestBytes / (0.5 * c.MBPerSec * 1e6) * float64(time.Second))
		}
		if row.Mode == RemoteWAL && row.Workload == ProduceAll && row.PutP50 > 0 && row.GetP50 > 0 {
			f.StoreFloor = row.PutP50 + row.GetP50
		}
		out = append(out, f)
	}
	return out
}

// writeInFlight prints the in-flight bounds of the produce workloads.
func writeInFlight(b *strings.Builder, rows []Row) {
	fs := InFlightOf(rows)
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(b, "### The producer's in-flight bound (Little's law)\n\n")
	fmt.Fprintf(b, "Each connection to a partition's leader has at most max.in.flight requests on the wire at once (`in flight`); the producer has one connection per broker leading a partition it writes (`conns`: one with a single partition), so throughput ≤ conns × in-flight × request bytes / round trip. The round trip is each Produce request's as the producer saw it on the wire (franz-go's BrokerE2E: write start to response read), which is exactly the time a request holds a slot of the window; it excludes the time records queue in the client's buffer before their request is written (the perf test's latency column includes that). At acks=all it is the leader's append plus the wait for every in-sync replica plus the network. Means and p50s in ms, medians over the runs; `of bound` is the window's mean occupancy. `CPU ms/MB` is the whole process's CPU time (every broker, the store and its model, the metadata Kafka, the clients) per MB produced, from the first send until every follower had the data: on a shared machine throughput follows the CPU share a run gets, and this figure does not.\n\n")
	fmt.Fprintf(b, "| workload | mode | conns | in flight | RTT mean | RTT p50 | request KB | bound MB/s | achieved MB/s | of bound | RTT 0.5x classic needs | CPU ms/MB |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, f := range fs {
		need := "-"
		if f.RTTForHalfClassic > 0 {
			need = fmtMs(f.RTTForHalfClassic)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %s | %.1f | %.2f | %.2f | %.2f | %s | %.2f |\n",
			f.Workload, f.Mode, f.Connections, f.Window, fmtMs(f.MeanRTT), fmtMs(f.P50RTT), f.MeanRequestByte/1e3, f.BoundMBPerSec, f.MBPerSec, f.OfBound, need, f.CPUMsPerMB)
	}
	b.WriteString("\n")
	for _, f := range fs {
		if f.StoreFloor <= 0 || f.RTTForHalfClassic <= 0 {
			continue
		}
		verdict := "less than that, so the window is not what stops the remote WAL here"
		if f.StoreFloor > f.RTTForHalfClassic {
			verdict = "more than that: no broker change reaches half of classic's throughput with this window and this store; only more partitions, larger requests or a faster store do"
		}
		fmt.Fprintf(b, "At %s the remote WAL acknowledges a record only after a follower has read back what the leader uploaded, so its round trip cannot be below the store's PUT p50 + GET p50 as this run measured them: %s ms. Half of classic's throughput needs a round trip of %s ms: the store alone takes %s.\n\n",
			f.Workload, fmtMs(f.StoreFloor), fmtMs(f.RTTForHalfClassic), verdict)
	}
}

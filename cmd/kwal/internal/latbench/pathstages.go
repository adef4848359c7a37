package latbench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// PathStages are the data path's stages a run reads from the brokers'
// latency histograms (package stagehist, the ones /metrics exports), in
// path order: where a produced record's time goes between the leader's
// append and its acknowledgement, which the client cannot see.
var PathStages = []stagehist.Stage{stagehist.AcksAllWait, stagehist.CutToPut, stagehist.Put, stagehist.Publish,
	stagehist.MetadataDelivery, stagehist.Get}

// histSnap is one stage's histogram summed over the brokers: the
// cumulative count at each upper bound (seconds), the last +Inf.
type histSnap struct {
	bounds []float64
	counts []uint64
}

// stageGatherers read each broker's histograms, one registry per broker
// (the brokers' collectors export the same names).
type stageGatherers []prometheus.Gatherer

func newStageGatherers(bs []*broker.Broker) (stageGatherers, error) {
	var gs stageGatherers
	for _, b := range bs {
		reg := prometheus.NewRegistry()
		if err := reg.Register(broker.NewCollector(b)); err != nil {
			return nil, fmt.Errorf("latbench: the stage histograms of broker %d: %w", b.Info().ID, err)
		}
		gs = append(gs, reg)
	}
	return gs, nil
}

// snapshot sums every broker's histogram of each PathStages stage.
func (gs stageGatherers) snapshot() map[stagehist.Stage]histSnap {
	names := map[string]stagehist.Stage{}
	for _, s := range PathStages {
		names[s.Metric()] = s
	}
	out := map[stagehist.Stage]histSnap{}
	for _, g := range gs {
		mfs, err := g.Gather()
		if err != nil {
			continue // a stage missing from a snapshot counts nothing in its run
		}
		for _, mf := range mfs {
			s, ok := names[mf.GetName()]
			if !ok || mf.GetType() != dto.MetricType_HISTOGRAM {
				continue
			}
			for _, m := range mf.GetMetric() {
				out[s] = addHist(out[s], m.GetHistogram())
			}
		}
	}
	return out
}

// addHist adds h's buckets to snap (every broker has stagehist.Buckets).
func addHist(snap histSnap, h *dto.Histogram) histSnap {
	bs := h.GetBucket()
	if snap.bounds == nil {
		snap.bounds = make([]float64, 0, len(bs)+1)
		for _, b := range bs {
			snap.bounds = append(snap.bounds, b.GetUpperBound())
		}
		snap.bounds = append(snap.bounds, math.Inf(1))
		snap.counts = make([]uint64, len(snap.bounds))
	}
	for i, b := range bs {
		if i < len(snap.counts)-1 {
			snap.counts[i] += b.GetCumulativeCount()
		}
	}
	snap.counts[len(snap.counts)-1] += h.GetSampleCount()
	return snap
}

// StageFigures is one stage of one run from the brokers' histograms:
// how many observations the run added and their p50 and p90, read off
// the buckets (linear within the bucket, so within half a bucket: 0.5 ms
// below 5 ms, 1.25 to 2.5 ms up to 30 ms).
type StageFigures struct {
	Count int64         `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
}

// stageDeltas returns each stage's figures for what was observed between
// before and after.
func stageDeltas(before, after map[stagehist.Stage]histSnap) map[string]StageFigures {
	out := map[string]StageFigures{}
	for s, a := range after {
		d := histSnap{bounds: a.bounds, counts: slices.Clone(a.counts)}
		if b, ok := before[s]; ok && len(b.counts) == len(d.counts) {
			for i := range d.counts {
				d.counts[i] -= min(b.counts[i], d.counts[i])
			}
		}
		n := d.counts[len(d.counts)-1]
		if n == 0 {
			continue
		}
		out[s.String()] = StageFigures{Count: int64(n), P50: d.quantile(0.5), P90: d.quantile(0.9)}
	}
	return out
}

// quantile reads q off the cumulative buckets, linearly within the bucket
// that holds it; in the +Inf bucket, the last finite bound.
func (h histSnap) quantile(q float64) time.Duration {
	n := h.counts[len(h.counts)-1]
	rank := q * float64(n)
	lo, below := 0.0, uint64(0)
	for i, c := range h.counts {
		if float64(c) >= rank && c > below {
			hi := h.bounds[i]
			if math.IsInf(hi, 1) {
				return secs(lo)
			}
			return secs(lo + (hi-lo)*(rank-float64(below))/float64(c-below))
		}
		lo, below = h.bounds[i], c
	}
	return secs(lo)
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// writePathStages prints, for the produce workloads, the brokers' view of
// where a record's time goes.
func writePathStages(b *strings.Builder, rows []Row) {
	var with []Row
	for _, row := range rows {
		if (row.Workload == Produce || row.Workload == ProduceAll) && len(row.PathP50) > 0 {
			with = append(with, row)
		}
	}
	if len(with) == 0 {
		return
	}
	fmt.Fprintf(b, "### Where a produced record's time goes on the brokers\n\n")
	fmt.Fprintf(b, "From the brokers' latency histograms (the ones `/metrics` exports, summed over the three brokers, each run's own observations): `acks_all_wait` is an acks=all produce from the leader's append to its answer; `cut_to_put` a slice from its submit to the combiner until the PUT of its object is done (the PUT included); `put` one PUT; `publish` a PUT done until its metadata is acknowledged; `metadata_delivery` a metadata record produced until a broker's consumer applied it; `get` one follower GET. p50 in ms, medians over the runs, read off the histograms' buckets (within half a bucket: 0.5 ms below 5 ms, up to 2.5 ms below 30 ms). What `acks_all_wait` holds beyond the stages after it is the wait before a slice's submit (the combiner's next object) and the follower's append and report.\n\n")
	names := make([]string, len(PathStages))
	for i, s := range PathStages {
		names[i] = "`" + s.String() + "`"
	}
	fmt.Fprintf(b, "| workload | mode | %s |\n|---|---|%s\n", strings.Join(names, " | "), strings.Repeat("--:|", len(PathStages)))
	for _, row := range with {
		fmt.Fprintf(b, "| %s | %s |", row.Workload, row.Mode)
		for _, s := range PathStages {
			if d, ok := row.PathP50[s.String()]; ok {
				fmt.Fprintf(b, " %s |", fmtMs(d))
			} else {
				b.WriteString(" - |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

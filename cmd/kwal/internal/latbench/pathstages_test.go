package latbench

import (
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/internal/stagehist"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// histOf observes ds into a histogram with stagehist's buckets and
// returns what Gather would (the client library's own bucket counting).
func histOf(t *testing.T, ds ...time.Duration) *dto.Histogram {
	t.Helper()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: stagehist.Buckets})
	for _, d := range ds {
		h.Observe(d.Seconds())
	}
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram()
}

func msOf(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// The quantiles of a run's observations come from the buckets' deltas:
// what was observed before the run does not count, two brokers' buckets
// add up, and a quantile is read linearly within its bucket.
func TestStageDeltasFromBuckets(t *testing.T) {
	put := stagehist.Put
	before := map[stagehist.Stage]histSnap{put: addHist(histSnap{}, histOf(t, msOf(40), msOf(40), msOf(40)))}
	// Broker 1 saw the three old ones and, in the run, ten PUTs between 3
	// and 4 ms; broker 2 ten between 4 and 5 ms.
	var b1, b2 []time.Duration
	b1 = append(b1, msOf(40), msOf(40), msOf(40))
	for i := range 10 {
		b1 = append(b1, msOf(3.05+0.09*float64(i)))
		b2 = append(b2, msOf(4.05+0.09*float64(i)))
	}
	after := map[stagehist.Stage]histSnap{}
	after[put] = addHist(addHist(histSnap{}, histOf(t, b1...)), histOf(t, b2...))
	got := stageDeltas(before, after)
	f, ok := got["put"]
	if !ok || f.Count != 20 {
		t.Fatalf("put: %+v (ok %v), want 20 observations of the run", f, ok)
	}
	// Rank 10 of 20 is the last of the (3, 4] bucket's ten: 4 ms. Rank
	// 18 is the eighth of the (4, 5] bucket's ten: 4.8 ms.
	near := func(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }
	if !near(f.P50, msOf(4)) || !near(f.P90, msOf(4.8)) {
		t.Errorf("p50 %v, p90 %v; want 4ms and 4.8ms", f.P50, f.P90)
	}
	// A stage the run did not observe is left out; one past the last
	// finite bound reads as that bound.
	before[stagehist.Get] = addHist(histSnap{}, histOf(t, msOf(2)))
	after[stagehist.Get] = before[stagehist.Get]
	after[stagehist.Publish] = addHist(histSnap{}, histOf(t, 20*time.Second))
	got = stageDeltas(before, after)
	if _, ok := got["get"]; ok {
		t.Errorf("get: %+v, want it left out (nothing observed in the run)", got["get"])
	}
	last := stagehist.Buckets[len(stagehist.Buckets)-1]
	if p := got["publish"]; p.Count != 1 || p.P50 != secs(last) {
		t.Errorf("publish: %+v, want one observation read as the last bound %vs", p, last)
	}
}

// The report's table: the remote WAL's stages, classic's acks=all wait,
// "-" where a row has no figure.
func TestWritePathStages(t *testing.T) {
	rows := []Row{
		{Workload: ProduceAll, Mode: Classic, PathP50: map[string]time.Duration{"acks_all_wait": msOf(2.5)}},
		{Workload: ProduceAll, Mode: RemoteWAL, PathP50: map[string]time.Duration{"acks_all_wait": msOf(14.2), "cut_to_put": msOf(5), "put": msOf(4.96),
			"publish": msOf(0.59), "metadata_delivery": msOf(1.01), "get": msOf(3.98)}},
		{Workload: E2E, Mode: RemoteWAL, PathP50: map[string]time.Duration{"put": msOf(4)}}, // not a produce workload
	}
	var b strings.Builder
	writePathStages(&b, rows)
	md := b.String()
	for _, want := range []string{
		"### Where a produced record's time goes on the brokers",
		"| produce-acksall | classic | 2.50 | - | - | - | - | - |",
		"| produce-acksall | remotewal | 14.2 | 5.00 | 4.96 | 0.59 | 1.01 | 3.98 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "e2e-acks1") {
		t.Errorf("an end-to-end row in the produce table:\n%s", md)
	}
}

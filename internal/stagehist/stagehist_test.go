package stagehist

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestBucketsAscendMsScale(t *testing.T) {
	if !sort.Float64sAreSorted(Buckets) {
		t.Fatalf("buckets not ascending: %v", Buckets)
	}
	for i := 1; i < len(Buckets); i++ {
		if Buckets[i] == Buckets[i-1] {
			t.Fatalf("bucket %v repeated", Buckets[i])
		}
	}
	// S3 Express PUT/GET p50s (3–4 ms) and the 10 ms combiner interval
	// must each fall in a bucket of its own width ≤ 2.5 ms.
	for _, ms := range []float64{3.5, 4.5, 9} {
		i := sort.SearchFloat64s(Buckets, ms/1000)
		if i == 0 || i == len(Buckets) || Buckets[i]-Buckets[i-1] > 0.0025+1e-12 {
			t.Errorf("%v ms falls in a bucket wider than 2.5 ms", ms)
		}
	}
}

func TestObserveCountsEachStageApart(t *testing.T) {
	h := New()
	h.Observe(Put, 4*time.Millisecond)
	h.Observe(Put, -time.Second) // clocks of two hosts: counted as 0
	h.Observe(Get, 3*time.Millisecond)
	h.Observe(Stage(99), time.Second) // ignored
	got := map[string]*dto.Histogram{}
	ch := make(chan prometheus.Metric, 16)
	h.Collect(ch)
	close(ch)
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		name := m.Desc().String()
		for _, s := range Stages {
			if strings.Contains(name, `"`+s.Metric()+`"`) {
				got[s.Metric()] = pb.GetHistogram()
			}
		}
	}
	if len(got) != len(Stages) {
		t.Fatalf("collected %d histograms, want %d", len(got), len(Stages))
	}
	for _, s := range Stages {
		want := map[Stage]uint64{Put: 2, Get: 1}[s]
		if c := got[s.Metric()].GetSampleCount(); c != want {
			t.Errorf("%s count %d, want %d", s, c, want)
		}
	}
	if sum := got[Put.Metric()].GetSampleSum(); sum != 0.004 {
		t.Errorf("put sum %v, want 0.004 (the negative one as 0)", sum)
	}
	var nilH *Histograms
	nilH.Observe(Put, time.Second) // must not panic
	nilH.Collect(make(chan prometheus.Metric))
	Observe(nil, Put, time.Second)
}

func TestStageNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Stages {
		if s.String() == "unknown" || s.Metric() == "" || seen[s.Metric()] || !strings.HasSuffix(s.Metric(), "_seconds") {
			t.Errorf("stage %d: name %q metric %q", s, s.String(), s.Metric())
		}
		seen[s.Metric()] = true
	}
}

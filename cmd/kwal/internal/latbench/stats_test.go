package latbench

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := time.Millisecond
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * ms
	}
	thousand := make([]time.Duration, 1000)
	for i := range thousand {
		thousand[i] = time.Duration(i+1) * ms
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", []time.Duration{7 * ms}, 99.9, 7 * ms},
		{"p50 of 100", hundred, 50, 50 * ms},
		{"p99 of 100", hundred, 99, 99 * ms},
		{"p99.9 of 100 is the max", hundred, 99.9, 100 * ms},
		{"p99.9 of 1000", thousand, 99.9, 999 * ms},
		{"p100", hundred, 100, 100 * ms},
		{"tiny p is the min", hundred, 0.001, 1 * ms},
		{"p50 of two", []time.Duration{1 * ms, 3 * ms}, 50, 1 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("Percentile(p=%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

func TestSummarizeDoesNotSortInput(t *testing.T) {
	in := []time.Duration{5, 1, 4, 2, 3}
	s := Summarize(in)
	if s.N != 5 || s.P50 != 3 || s.Max != 5 || s.Mean != 3 || s.P99 != 5 {
		t.Errorf("Summarize = %+v", s)
	}
	if in[0] != 5 || in[1] != 1 {
		t.Errorf("input was modified: %v", in)
	}
	if (Summarize(nil) != Summary{}) {
		t.Error("Summarize(nil) is not zero")
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := MedianDuration([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}); got != 2*time.Millisecond {
		t.Errorf("MedianDuration = %v", got)
	}
}

func TestCDF(t *testing.T) {
	s := make([]time.Duration, 1000)
	for i := range s {
		s[i] = time.Duration(1000-i) * time.Microsecond // reversed: CDF must sort
	}
	pts := CDF(s, 11)
	if len(pts) != 11 {
		t.Fatalf("got %d points, want 11", len(pts))
	}
	if pts[0][0] != 0.001 || pts[0][1] != 0.001 {
		t.Errorf("first point %v, want the minimum (0.001 ms) at 1/1000", pts[0])
	}
	if last := pts[len(pts)-1]; last[0] != 1 || last[1] != 1 {
		t.Errorf("last point %v, want the maximum (1 ms) at 1", last)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i][0] < pts[i-1][0] || pts[i][1] <= pts[i-1][1] {
			t.Fatalf("not monotone at %d: %v then %v", i, pts[i-1], pts[i])
		}
	}
	if got := CDF([]time.Duration{time.Millisecond}, 100); len(got) != 1 {
		t.Errorf("one sample gave %d points", len(got))
	}
}

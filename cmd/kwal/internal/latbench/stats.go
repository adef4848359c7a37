package latbench

import (
	"math"
	"slices"
	"time"
)

// Summary is a latency distribution reduced to what the report prints.
type Summary struct {
	N    int           `json:"n"`
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
	Mean time.Duration `json:"mean_ns"`
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest sample with at least p% of the samples at or below
// it. It returns 0 for no samples.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// The epsilon keeps 99.9% of 1000 at rank 999 despite rounding.
	rank := int(math.Ceil(p*float64(n)/100 - 1e-9))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Summarize sorts a copy of samples and summarizes it.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		N: len(s), P50: Percentile(s, 50), P99: Percentile(s, 99), P999: Percentile(s, 99.9),
		Max: s[len(s)-1], Mean: sum / time.Duration(len(s)),
	}
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// MedianDuration is Median for durations.
func MedianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(math.Round(Median(xs)))
}

// CDF returns at most points (x, fraction at or below x) pairs of the
// empirical distribution of samples, x in milliseconds, evenly spaced in
// rank so that the tail keeps its shape on a plot.
func CDF(samples []time.Duration, points int) [][2]float64 {
	if len(samples) == 0 || points < 2 {
		return nil
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	n := len(s)
	out := make([][2]float64, 0, min(points, n))
	last := -1
	for i := 0; i < points; i++ {
		idx := int(math.Round(float64(i) / float64(points-1) * float64(n-1)))
		if idx == last {
			continue
		}
		last = idx
		out = append(out, [2]float64{ms(s[idx]), float64(idx+1) / float64(n)})
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

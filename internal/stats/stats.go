package stats

import (
	"slices"
	"time"
)

// Median of v (the mean of the middle two for an even count); 0 when empty.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Percentile is the nearest-rank p-th percentile of v (0 < p ≤ 100); 0
// when empty.
func Percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[rank(len(s), p)]
}

// DurationPercentile is Percentile for durations.
func DurationPercentile(v []time.Duration, p float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[rank(len(s), p)]
}

func rank(n int, p float64) int {
	i := int(float64(n)*p/100+0.999999999) - 1
	return max(0, min(i, n-1))
}

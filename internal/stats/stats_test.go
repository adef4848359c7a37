package stats

import (
	"testing"
	"time"
)

func TestStats(t *testing.T) {
	tests := []struct {
		v       []float64
		p       float64
		wantP   float64
		wantMed float64
	}{
		{nil, 50, 0, 0},
		{[]float64{7}, 99, 7, 7},
		{[]float64{5, 1, 4, 2, 3}, 50, 3, 3},
		{[]float64{5, 1, 4, 2, 3}, 99, 5, 3},
		{[]float64{1, 9, 3, 7}, 50, 3, 5},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9, 5.5},
	}
	for _, tt := range tests {
		if got := Percentile(tt.v, tt.p); got != tt.wantP {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tt.v, tt.p, got, tt.wantP)
		}
		if got := Median(tt.v); got != tt.wantMed {
			t.Errorf("Median(%v) = %v, want %v", tt.v, got, tt.wantMed)
		}
	}
	if got := DurationPercentile([]time.Duration{3, 1, 2}, 50); got != 2 {
		t.Errorf("DurationPercentile = %v", got)
	}
}

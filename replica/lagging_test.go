package replica

import (
	"testing"
	"time"
)

// TestLaggingReplicas is broker's former test of getOutOfSyncReplicas,
// moved with the logic; the followers are behind the leader's log end.
func TestLaggingReplicas(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := map[int32]*Progress{
		2: {LEO: 5, LastCaughtUp: now.Add(-time.Second)},
		3: {LEO: 5, LastCaughtUp: now.Add(-31 * time.Second)},
	}
	cases := []struct {
		isr  []int32
		want []int32
	}{
		{[]int32{1, 2, 3}, []int32{3}},
		{[]int32{1, 2}, nil},
		{[]int32{1, 2, 4}, []int32{4}}, // no fetch state at all
	}
	for _, tc := range cases {
		got := LaggingReplicas(tc.isr, 1, fs, now, 30*time.Second)
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Errorf("isr %v: lagging %v, want %v", tc.isr, got, tc.want)
		}
	}
}

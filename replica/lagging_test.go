package replica

import (
	"testing"
	"time"
)

// TestLaggingReplicas is broker's former test of getOutOfSyncReplicas,
// moved with the logic. The leader's log ends at 9: followers 2 and 3 are
// behind it; 5 is at it, having fetched long ago, and stays in sync.
func TestLaggingReplicas(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := map[int32]*Progress{
		2: {LEO: 5, LastCaughtUp: now.Add(-time.Second)},
		3: {LEO: 5, LastCaughtUp: now.Add(-31 * time.Second)},
		5: {LEO: 9, LastCaughtUp: now.Add(-time.Hour)},
	}
	cases := []struct {
		isr  []int32
		want []int32
	}{
		{[]int32{1, 2, 3}, []int32{3}},
		{[]int32{1, 2}, nil},
		{[]int32{1, 2, 4}, []int32{4}}, // no fetch state at all
		{[]int32{1, 5}, nil},
	}
	for _, tc := range cases {
		got := LaggingReplicas(tc.isr, 1, fs, now, 30*time.Second, 9)
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Errorf("isr %v: lagging %v, want %v", tc.isr, got, tc.want)
		}
	}
}

// TestProposalsCarryTheirEpochs: an ISR proposal names the epochs the
// machine decided it at, so the driver cannot send it at later ones (a
// deposed leader's shrink sent at its successor's epochs would take the
// successor out of its own ISR).
func TestProposalsCarryTheirEpochs(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLeader(LeaderState{Self: 1, LeaderEpoch: 4, PartitionEpoch: 9, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, 10, 10, now, time.Second, 1)
	_, acts := l.FollowerFetch(now, 3, 4, 10, 10)
	if len(acts) != 1 {
		t.Fatalf("actions %v, want one expansion", acts)
	}
	if p := acts[0].(ProposeISR); !p.Expand || p.LeaderEpoch != 4 || p.PartitionEpoch != 9 {
		t.Fatalf("expansion %+v, want epochs 4/9", p)
	}
	l.ISRChanged(10, []int32{1, 2, 3}, []int32{1, 2, 3}, 10, now)
	acts = l.Tick(now.Add(time.Hour), 20) // both followers behind the log end for an hour
	if len(acts) != 1 {
		t.Fatalf("actions %v, want one shrink", acts)
	}
	if p := acts[0].(ProposeISR); p.Expand || p.LeaderEpoch != 4 || p.PartitionEpoch != 10 {
		t.Fatalf("shrink %+v, want epochs 4/10", p)
	}
}

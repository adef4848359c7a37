package replica

import (
	"testing"
	"time"
)

// TestLogStartToSendOncePerChange: each follower is told a new log start
// once (its parked fetch is answered early once), never again for the
// same start, and a replica that is not a follower is never told.
func TestLogStartToSendOncePerChange(t *testing.T) {
	l := NewLeader(LeaderState{Self: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, 100, 100, time.Unix(0, 0), time.Second, 1)
	steps := []struct {
		replica int32
		start   int64
		want    bool
	}{
		{2, 0, false}, // a follower starts at 0: nothing new
		{2, 42, true}, // DeleteRecords moved it
		{2, 42, false},
		{3, 42, true}, // each follower on its own
		{3, 42, false},
		{2, 50, true},  // retention moved it again
		{1, 50, false}, // the leader itself
		{4, 50, false}, // not a replica
	}
	for i, s := range steps {
		if got := l.LogStartToSend(s.replica, s.start); got != s.want {
			t.Fatalf("step %d: LogStartToSend(%d, %d) = %t, want %t", i, s.replica, s.start, got, s.want)
		}
	}
}

package replica

import (
	"testing"
	"time"
)

// TestLogStartToldOncePerChange: each follower is told a new log start
// once (its parked fetch is answered early once), never again for the
// same start, and a replica that is not a follower is never told.
func TestLogStartToldOncePerChange(t *testing.T) {
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
		a := Answer{HW: 100, LogStart: s.start, LEO: -1}
		_, got, _ := l.News(s.replica, a)
		l.Told(s.replica, a)
		if got != s.want {
			t.Fatalf("step %d: log start %d news to %d = %t, want %t", i, s.start, s.replica, got, s.want)
		}
	}
}

// TestToldIsTheWrittenAnswer: news stays news until the driver says the
// answer carrying it was written (an answer built for a connection the
// follower closed is never read), and what is recorded as told is what
// that answer carried, not what the leader has since: told HW 0 while the
// log is at 1 leaves 1 news.
func TestToldIsTheWrittenAnswer(t *testing.T) {
	l := NewLeader(LeaderState{Self: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, 10, 0, time.Unix(0, 0), time.Second, 1)
	news := func(a Answer) (bool, bool, bool) { return l.News(2, a) }
	a := Answer{HW: 1, LogStart: 0, LEO: 10}
	for range 3 { // built, not written: still news each time
		if hw, _, leo := news(a); !hw || !leo {
			t.Fatalf("HW 1 and log end 10 not news before any answer was written (%t, %t)", hw, leo)
		}
	}
	l.Told(2, a)
	if hw, start, leo := news(a); hw || start || leo {
		t.Fatalf("news after the answer was written: %t %t %t", hw, start, leo)
	}
	l.Told(2, Answer{HW: 0, LogStart: 0, LEO: -1}) // an answer read before the HW moved, no log end
	if hw, _, leo := news(a); !hw || leo {
		t.Fatalf("after an answer carrying HW 0 (and no log end): HW news %t (want true), log end news %t (want false)", hw, leo)
	}
	if hw, start, leo := l.News(3, a); hw || start || leo {
		t.Fatal("news for a replica that is not a follower")
	}
}

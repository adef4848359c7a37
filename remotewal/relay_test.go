package remotewal

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/metadata"
)

// relayRig is a Manager with one worker slot over the real combiner on the
// manual clock, and parts logs with a task each.
type relayRig struct {
	clk  *clock.Manual
	comb *combiner.Combiner
	m    *Manager
	pub  *objRecorder
	logs []*openedLog
}

func newRelayRig(t *testing.T, parts int) *relayRig {
	t.Helper()
	r := &relayRig{clk: clock.NewManual(time.Unix(1000, 0)), pub: &objRecorder{}}
	var err error
	r.comb, err = combiner.New(combiner.Config{Writer: &memWriter{objs: map[string][]byte{}}, Publisher: r.pub, Clock: r.clk,
		Interval: 10 * time.Millisecond, UploadBytes: 4 << 20, BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.comb.Close(context.Background()) })
	r.m, err = NewManager(Config{ThreadPoolSize: 1, UploadBytes: 64 << 10, Interval: time.Millisecond, Clock: r.clk}, r.comb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.m.Close)
	for p := range parts {
		ol := &openedLog{tp: metadata.TopicPartition{Topic: "orders", Partition: int32(p)}, l: openLog(t, r.clk, 1<<30)}
		if err := r.m.StartPartition(ol.tp, ol.l, 1, 0); err != nil {
			t.Fatal(err)
		}
		r.logs = append(r.logs, ol)
	}
	return r
}

// settled waits until no task is announced or called, the combiner holds
// no ticket, and every worker slot is free again.
func (r *relayRig) settled(t *testing.T) {
	t.Helper()
	spinUntil(t, "announcements and slots to settle", func() bool {
		mm, cm := r.m.Metrics(), r.comb.Metrics()
		return mm.Announced == 0 && mm.Called == 0 && cm.Announced == 0 && cm.Called == 0 && len(r.m.pool) == 0
	})
}

// TestCalledRoundGrantsEveryTask: 40 tasks holding one batch each are one
// round, one ticket at the combiner; its call passes all 40 through a
// single worker slot, each gives the object one slice, and the ticket is
// withdrawn once, after the last of them, with the slot free again.
func TestCalledRoundGrantsEveryTask(t *testing.T) {
	const parts = 40
	r := newRelayRig(t, parts)
	for round := 1; round <= 3; round++ {
		for _, ol := range r.logs {
			appendN(t, ol.l, 1, 1, 2, 100)
		}
		// The clock stands still, so every task's bytes are as old as the
		// first's: one round.
		spinUntil(t, "every task to announce", func() bool {
			return r.m.Metrics().Announced == parts && r.clk.Pending() > 0
		})
		if cm := r.comb.Metrics(); cm.Announced != 1 {
			t.Fatalf("round %d: the combiner holds %d tickets for %d tasks, want 1", round, cm.Announced, parts)
		}
		r.clk.Advance(10 * time.Millisecond)
		spinUntil(t, "the object", func() bool { return len(r.pub.published()) == round })
		o := r.pub.published()[round-1]
		seen := map[metadata.TopicPartition]int{}
		for _, e := range o.Entries {
			seen[e.TopicPartition]++
		}
		if len(seen) != parts || len(o.Entries) != parts {
			t.Fatalf("round %d: object has %d slices of %d partitions, want one of each of %d", round, len(o.Entries), len(seen), parts)
		}
		r.settled(t)
	}
	// The combiner tells the tasks after the publisher returned.
	spinUntil(t, "every task to hear its slices published", func() bool {
		for _, ol := range r.logs {
			if p, _ := r.m.PublishedOffset(ol.tp); p != ol.l.LogEndOffset() {
				return false
			}
		}
		return true
	})
}

// TestStopDuringCalledRound stops half the tasks while their round is
// being granted: granted or not, each gives its slot back, the round's
// ticket is still withdrawn (the object goes), nothing stays announced,
// and the tasks left carry on into the next round with nothing lost.
func TestStopDuringCalledRound(t *testing.T) {
	const parts = 30
	r := newRelayRig(t, parts)
	for _, ol := range r.logs {
		appendN(t, ol.l, 1, 1, 2, 100)
	}
	spinUntil(t, "every task to announce", func() bool {
		return r.m.Metrics().Announced == parts && r.clk.Pending() > 0
	})
	r.clk.Advance(10 * time.Millisecond)
	var wg sync.WaitGroup
	for _, ol := range r.logs[:parts/2] {
		wg.Add(1)
		go func() { defer wg.Done(); r.m.StopPartition(ol.tp) }()
	}
	wg.Wait()
	spinUntil(t, "the object", func() bool { return len(r.pub.published()) == 1 })
	r.settled(t)
	live := r.logs[parts/2:]
	for _, ol := range live {
		appendN(t, ol.l, 1, 1, 2, 100)
	}
	spinUntil(t, "the live tasks to announce", func() bool {
		return r.m.Metrics().Announced == len(live) && r.clk.Pending() > 0
	})
	r.clk.Advance(10 * time.Millisecond)
	spinUntil(t, "the live tasks' bytes published", func() bool {
		for _, ol := range live {
			if p, _ := r.m.PublishedOffset(ol.tp); p != ol.l.LogEndOffset() {
				if r.clk.Pending() > 0 {
					r.clk.Advance(10 * time.Millisecond)
				}
				return false
			}
		}
		return true
	})
	r.settled(t)
}

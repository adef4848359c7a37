package combiner

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/metadata"
)

func slice1(tp metadata.TopicPartition, off int64, at time.Time, done func(UploadedObject, error)) Slice {
	return Slice{TopicPartition: tp, LeaderEpoch: 1, BaseOffset: off, LastOffset: off, Data: []byte("x"), AppendedAt: at, Done: done}
}

// TestAnnouncedBytesJoinTheDueObject: a task holding bytes announces
// them; when the interval of the queued slice is up the combiner calls the
// task first, waits for its slice, and cuts both into one object.
func TestAnnouncedBytesJoinTheDueObject(t *testing.T) {
	// The clock moves only when the test says: a called task's answer
	// takes no clock time here.
	clk := clock.NewManual(t0)
	store := newMemStore(clk)
	pub := &recPublisher{t: t, store: store}
	c, err := New(Config{UploadBytes: 1 << 20, Interval: 10 * time.Millisecond, BrokerID: 7, Clock: clk,
		Writer: StoreWriter{Store: store}, Publisher: pub, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	a := metadata.TopicPartition{Topic: "a"}
	b := metadata.TopicPartition{Topic: "b"}
	if err := c.Submit(context.Background(), slice1(a, 0, t0, nil)); err != nil {
		t.Fatal(err)
	}
	tk := c.Announce(t0.Add(2 * time.Millisecond))
	waitFor(t, "the interval timer", func() bool { return clk.Pending() > 0 })
	clk.Advance(9 * time.Millisecond)
	select {
	case <-tk.Called():
		t.Fatal("called before the interval")
	default:
	}
	waitFor(t, "the interval timer", func() bool { return clk.Pending() > 0 })
	clk.Advance(time.Millisecond)
	<-tk.Called()
	if m := c.Metrics(); m.ObjectsCut != 0 || m.Called != 1 {
		t.Fatalf("before the called task answered: %+v", m)
	}
	if err := c.Submit(context.Background(), slice1(b, 0, t0.Add(2*time.Millisecond), nil)); err != nil {
		t.Fatal(err)
	}
	c.Withdraw(tk)
	waitFor(t, "the object", func() bool { return len(pub.published()) == 1 })
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs := pub.published()
	if len(objs) != 1 || len(objs[0].Entries) != 2 {
		t.Fatalf("published %d objects (%+v), want one of both slices", len(objs), objs)
	}
	checkOrder(t, objs, map[metadata.TopicPartition]int64{a: 1, b: 1})
}

// TestAnnouncementAloneIsCalled: held bytes with nothing queued still come
// due on the combiner's timer; a withdrawn announcement is not called.
func TestAnnouncementAloneIsCalled(t *testing.T) {
	r := newRig(t, Config{UploadBytes: 1 << 20, Interval: 10 * time.Millisecond}, nil, nil)
	gone := r.c.Announce(t0)
	r.c.Withdraw(gone)
	// The first object for the interval is due Interval after the start
	// (t0+10ms): the withdrawn announcement would be called then, this
	// one no sooner than its bytes.
	tk := r.c.Announce(t0.Add(15 * time.Millisecond))
	<-tk.Called()
	if d := r.clk.Since(t0); d < 15*time.Millisecond {
		t.Fatalf("called after %v: the withdrawn announcement counted", d)
	}
	r.c.Withdraw(tk)
	r.c.Withdraw(Ticket{}) // the zero ticket is nothing
	r.close(t)
	if n := len(r.pub.published()); n != 0 {
		t.Fatalf("published %d objects of nothing", n)
	}
}

// TestWithdrawnOldestAnnouncementStopsCounting: when the oldest of two
// announcements is withdrawn, the younger one's time paces the next
// object, not the withdrawn one's: with the oldest left at t0 the
// combiner called the other task at t0+Interval, before its bytes were
// due, and cut an early extra object.
func TestWithdrawnOldestAnnouncementStopsCounting(t *testing.T) {
	r := newRig(t, Config{UploadBytes: 1 << 20, Interval: 10 * time.Millisecond}, nil, nil)
	gone := r.c.Announce(t0)
	tk := r.c.Announce(t0.Add(15 * time.Millisecond))
	r.c.Withdraw(gone)
	<-tk.Called()
	if d := r.clk.Since(t0); d < 15*time.Millisecond {
		t.Fatalf("called after %v: the withdrawn oldest announcement still counted", d)
	}
	r.c.Withdraw(tk)
	r.close(t)
}

// TestAnnouncementsOldestFollowsWithdrawals: the oldest live announcement
// is what pending reports, whatever order tickets are withdrawn in, and a
// ticket withdrawn twice is taken out once.
func TestAnnouncementsOldestFollowsWithdrawals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		c := &Combiner{}
		var tks []Ticket
		sinces := map[*announced]time.Time{}
		for range 1 + rng.IntN(12) {
			tk := c.Announce(t0.Add(time.Duration(rng.IntN(50)) * time.Millisecond))
			tks = append(tks, tk)
			sinces[tk.e] = tk.e.since
		}
		rng.Shuffle(len(tks), func(i, j int) { tks[i], tks[j] = tks[j], tks[i] })
		for i, tk := range tks {
			c.Withdraw(tk)
			if rng.IntN(4) == 0 {
				c.Withdraw(tk) // a repeat changes nothing
			}
			delete(sinces, tk.e)
			var want time.Time
			for _, s := range sinces {
				if want.IsZero() || s.Before(want) {
					want = s
				}
			}
			p := c.mu.ann.pending(t0, false)
			if p.Announced != len(tks)-i-1 || !p.Oldest.Equal(want) {
				t.Fatalf("round %d, after %d withdrawals: pending %+v, want %d announced, oldest %v", round, i+1, p, len(tks)-i-1, want)
			}
		}
	}
}

// TestCalledTaskBlockedInSubmit: the called task is the one waiting for
// room. The cutter must not wait for its answer, or nothing would ever
// free room: it cuts the queue, and the task's Submit then goes through.
func TestCalledTaskBlockedInSubmit(t *testing.T) {
	r := newRig(t, Config{UploadBytes: 1 << 20, Interval: 10 * time.Millisecond, QueueSlices: 1}, nil, nil)
	a := metadata.TopicPartition{Topic: "a"}
	b := metadata.TopicPartition{Topic: "b"}
	if err := r.c.Submit(context.Background(), slice1(a, 0, t0, nil)); err != nil {
		t.Fatal(err)
	}
	tk := r.c.Announce(t0)
	<-tk.Called()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.c.Submit(ctx, slice1(b, 0, t0, nil)); err != nil {
		t.Fatalf("called task's Submit: %v", err)
	}
	r.c.Withdraw(tk)
	r.close(t)
	checkOrder(t, r.pub.published(), map[metadata.TopicPartition]int64{a: 1, b: 1})
}

func TestAnnounceAfterClose(t *testing.T) {
	r := newRig(t, Config{}, nil, nil)
	r.close(t)
	tk := r.c.Announce(t0)
	select {
	case <-tk.Called():
	default:
		t.Fatal("a ticket taken after Close is not called at once")
	}
	r.c.Withdraw(tk)
}

// TestCallEndsWhenAllAnswered: the outstanding call (whose age bounds
// the wait for called tasks) ends only once the last called task answered.
func TestCallEndsWhenAllAnswered(t *testing.T) {
	a := announcements{call: make(chan struct{})}
	heap.Push(&a.live, &announced{since: t0})
	heap.Push(&a.live, &announced{since: t0})
	a.callAll(t0)
	a.callAll(t0.Add(time.Millisecond)) // a second call keeps the first's age
	if p := a.pending(t0.Add(3*time.Millisecond), false); p.Called != 2 || p.CalledFor != 3*time.Millisecond {
		t.Fatalf("pending %+v", p)
	}
	a.called--
	a.answered()
	if a.calledAt.IsZero() {
		t.Fatal("call ended with one task still out")
	}
	a.called--
	a.answered()
	if p := a.pending(t0.Add(4*time.Millisecond), false); p.Called != 0 || p.CalledFor != 0 {
		t.Fatalf("after the last answer: pending %+v", p)
	}
	if p := a.pending(t0, true); p.Called != 0 {
		t.Fatal("a waiting Submit must not wait for called tasks")
	}
}

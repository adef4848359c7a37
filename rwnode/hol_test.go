package rwnode

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
)

// slowStore answers every PUT once delay has passed on its clock: a store
// whose upload bandwidth the hot partition exceeds. It keeps the keys of
// the PUTs it answered, for the test to wait until their metadata is seen.
type slowStore struct {
	objstore.Store
	clk   clock.Clock
	delay time.Duration
	// release, once closed, lets every PUT through at once: the test
	// closes it as it ends, so the replicators' Close does not wait on a
	// clock nobody advances any more.
	release chan struct{}
	signal  func() // after a PUT starts waiting on the clock
	mu      struct {
		sync.Mutex
		done    []string
		waiting int // PUTs waiting on the clock
	}
}

var _ objstore.Store = (*slowStore)(nil)

func (s *slowStore) Put(ctx context.Context, k string, b []byte, o objstore.PutOptions) error {
	t := s.clk.NewTimer(s.delay)
	defer t.Stop()
	s.mu.Lock()
	s.mu.waiting++
	s.mu.Unlock()
	if s.signal != nil {
		s.signal()
	}
	defer func() {
		s.mu.Lock()
		s.mu.waiting--
		s.mu.Unlock()
	}()
	select {
	case <-t.C():
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.Store.Put(ctx, k, b, o); err != nil {
		return err
	}
	s.mu.Lock()
	s.mu.done = append(s.mu.done, k)
	s.mu.Unlock()
	return nil
}

// takeDone returns the keys answered since the last call, and how many
// PUTs wait on the clock.
func (s *slowStore) takeDone() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.mu.done
	s.mu.done = nil
	return d, s.mu.waiting
}

// TestHotPartitionLeavesOthersOnTheStore: one partition's producer far
// outruns the store's upload bandwidth, so its slices back up in the
// leader's combiner without end, while three other partitions of the same
// leader take acks=all produce. Its backlog is held to its partition's
// share of the combiner's bound, so the others' slices keep being
// admitted and published behind at most that share: their acks=all stay
// within replica.lag.time.max.ms, their followers stay in the ISR, and
// they read the others' records from the store, not from the leader.
// (With one shared bound the hot backlog fills it; the others wait behind
// all of it and their followers fall back to the leader.) KWAL_HOL_SHARED=1
// runs it with the per-partition bound as large as the whole one, to see
// the difference.
//
// Time is a manual clock the test steps by the combiner's interval; the
// store's PUT delay, the task and combiner intervals, the ISR check and
// the followers' fall-back all run on it. Between steps the test waits,
// on change notifications, until everything that needs no more time has
// happened: the step's hot records are acknowledged, each cold record
// sent is in the leader's log, an object cut is in its PUT (waiting on the
// clock) once the store's one upload slot is free, every object PUT so
// far is in each
// follower's metadata index, each follower has appended what its index
// holds of the cold partitions, the leader's high watermark has taken
// the follower log ends it knows and every cold record below it has its
// answer. So a cold record's wait, read on the manual clock, is what the
// configuration (intervals, PUT delay, queue bounds, fetch wait) makes
// it, not how slowly the machine runs the goroutines between steps.
//
// The one step not waited for is a follower's log end reaching the
// leader: a log end report (Fetch with max wait 0 on its own connection)
// can reach the leader before the follower's parked fetch sent at the
// older log end, which then lowers the leader's view of the follower
// again until that fetch's next round, up to replica.fetch.wait.max.ms
// later on the clock. Waiting for the report would wait for ever on a
// stopped clock; the test steps on, and the fetch wait bounds the cost.
func TestHotPartitionLeavesOthersOnTheStore(t *testing.T) {
	const (
		lag      = 2 * time.Second // replica.lag.time.max.ms
		putDelay = 50 * time.Millisecond
		share    = 256 << 10
		step     = 5 * time.Millisecond // the combiner's interval
		steps    = 800                  // 4 s: twice the lag limit
		// Three 32 KiB records a step, about 20 MB/s: eight times the
		// store's bandwidth (one 256 KiB object each 50 ms).
		hotPerStep = 3
		coldEvery  = 2 // a cold record each 10 ms per partition, when the last is answered
		// replica.fetch.wait.max.ms: how long a log end report that crossed
		// the fetch in flight can go unheeded (see below).
		fetchWait = 50 * time.Millisecond
	)
	shared := os.Getenv("KWAL_HOL_SHARED") != ""
	clk := clock.NewManual(time.Now())
	store := &slowStore{Store: mem.New(), clk: clk, delay: putDelay, release: make(chan struct{})}
	c := startRemoteWALClusterBrokers(t, []string{"az1", "az2", "az3"}, store, func(rc *RemoteWALReplicatorConfig) {
		rc.Clock = clk
		rc.Combiner = combiner.Config{Interval: step, UploadBytes: 256 << 10, ThreadPoolSize: 1,
			QueueBytes: 8 << 20, PartitionQueueBytes: share}
		rc.Tasks.MaxSliceBytes = 128 << 10 // slices of the backlog stay small beside the share
		if shared {
			rc.Combiner.PartitionQueueBytes = rc.Combiner.QueueBytes
		}
	}, func(cfg *broker.Config) {
		cfg.Clock = clk
		cfg.ReplicaLagTimeMax = lag
		cfg.ReplicaFetchWaitMax = fetchWait
	})
	t.Cleanup(func() { close(store.release) }) // before the replicators close
	store.signal = c.feed.Signal
	admin := newClient(t, c)
	createTopic(t, admin, "hot", 1, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	createTopic(t, admin, "cold", 3, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"})
	// Every partition led by B1, so they share its combiner.
	tps := []broker.TopicPartition{{Topic: "hot"}, {Topic: "cold"}, {Topic: "cold", Partition: 1}, {Topic: "cold", Partition: 2}}
	for _, tp := range tps {
		if ts, _ := c.ctrl.Topic(tp.Topic); ts.Partitions[tp.Partition].Leader != 1 {
			if _, err := c.ctrl.ElectLeader(tp, 1); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "B1 to lead "+tp.String(), 10*time.Second, func() bool { return leaderOf(c.broker(1), tp) }, c.sources()...)
	}
	coldTPs := tps[1:]

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hot := newClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	// A client per cold partition: a produce request then names one
	// partition, and its answer waits for that partition's HW alone.
	var cold [3]*kgo.Client
	for i := range cold {
		cold[i] = newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}

	// What the cold producers' callbacks write; the test goroutine reads
	// it between steps.
	var mu sync.Mutex
	var (
		sent, answered [3]int64 // records per cold partition
		outstanding    [3]bool
		lastSent       [3]int // step of the last record sent
		worst          time.Duration
		coldAcked      int
	)
	sendCold := func(p int32, now int) {
		outstanding[p], lastSent[p] = true, now
		sent[p]++
		t0 := clk.Now()
		cold[p].Produce(ctx, &kgo.Record{Topic: "cold", Partition: p, Value: []byte("cold")}, func(_ *kgo.Record, err error) {
			d := clk.Since(t0)
			mu.Lock()
			answered[p]++
			outstanding[p] = false
			if err == nil {
				coldAcked++
				worst = max(worst, d)
			} else {
				t.Errorf("cold-%d acks=all: %v", p, err)
			}
			mu.Unlock()
			c.feed.Signal()
		})
	}
	hotValue := make([]byte, 32<<10)
	var hotAcked int64
	produceHot := func() {
		var wg sync.WaitGroup
		var hotMu sync.Mutex
		for range hotPerStep {
			wg.Add(1)
			hot.Produce(ctx, &kgo.Record{Topic: "hot", Value: hotValue}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					hotMu.Lock()
					hotAcked++
					hotMu.Unlock()
				}
			})
		}
		wg.Wait() // acks=1: answered at the leader's append, no time needed
	}

	// settled: nothing is left that could happen without the clock moving.
	seen := make(map[string]bool) // objects every follower has indexed
	var pendingKeys []string
	var why string // what settled last waited for, said if the test fails
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last wait between steps was for: %s", why)
		}
	})
	settled := func() bool {
		done, waiting := store.takeDone()
		pendingKeys = append(pendingKeys, done...)
		// An object cut and not yet up is in its PUT, or about to start
		// one: the pipeline waits on the clock only once it has.
		m := c.rep(1).WritePath().Combiner.Metrics()
		if notUp := m.ObjectsCut - m.ObjectsUp - m.ObjectsFailed; waiting == 0 && notUp > 0 {
			why = fmt.Sprintf("a PUT to start (%d objects cut and not up, none waiting on the clock)", notUp)
			return false
		}
		keep := pendingKeys[:0]
		for _, k := range pendingKeys {
			if seen[k] {
				continue
			}
			all := true
			for _, id := range []int32{2, 3} {
				if _, ok := c.rep(id).State().ObjectState(k); !ok {
					all = false
				}
			}
			if all {
				seen[k] = true
			} else {
				keep = append(keep, k)
			}
		}
		pendingKeys = keep
		if len(pendingKeys) > 0 {
			why = fmt.Sprintf("objects %v in every follower's index", pendingKeys)
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		for i, tp := range coldTPs {
			lead, _ := c.broker(1).PartitionStatus(tp)
			if outstanding[i] && lead.LogEnd < sent[i] {
				why = fmt.Sprintf("%s: record %d in the leader's log (log end %d)", tp, sent[i]-1, lead.LogEnd)
				return false
			}
			known := lead.LogEnd // the least follower log end the leader knows
			for _, id := range []int32{2, 3} {
				l, ok := c.broker(id).PartitionLog(tp)
				if !ok {
					why = fmt.Sprintf("%s: a log on B%d", tp, id)
					return false
				}
				leo := l.LogEndOffset()
				if e := indexedEnd(c.rep(id), tp); leo < e {
					why = fmt.Sprintf("%s: B%d to append to its index's end %d (log end %d)", tp, id, e, leo)
					return false
				}
				known = min(known, lead.FollowerLEO[id])
			}
			if lead.HighWatermark < known || answered[i] < lead.HighWatermark {
				why = fmt.Sprintf("%s: high watermark %d to reach the follower log ends the leader knows (%v) and the answers (%d) to reach it",
					tp, lead.HighWatermark, lead.FollowerLEO, answered[i])
				return false
			}
		}
		return true
	}
	held := int64(0)
	for s := 0; ; s++ {
		sending := s < steps
		mu.Lock()
		idle := true
		for p := range int32(3) {
			if outstanding[p] {
				idle = false
			} else if sending && s-lastSent[p] >= coldEvery {
				sendCold(p, s)
				idle = false
			}
		}
		mu.Unlock()
		if !sending && idle {
			break
		}
		if s >= 2*steps {
			t.Fatalf("cold records still unanswered %v after the hot producer stopped", time.Duration(s-steps)*step)
		}
		if sending {
			produceHot()
		}
		waitFor(t, fmt.Sprintf("step %d to settle", s), 20*time.Second, settled, c.sources()...)
		held = max(held, c.rep(1).WritePath().Combiner.Metrics().HeldBytes)
		clk.Advance(step)
	}
	hot.Flush(ctx)

	var coldFallback int64
	for _, l := range c.ledgers {
		for _, r := range l.Snapshot().Transfers {
			if r.Topic == "cold" && r.Component == "follower" {
				coldFallback += r.Bytes
			}
		}
	}
	ts, _ := c.ctrl.Topic("cold")
	t.Logf("shared bound %v: hot acks=1 acknowledged %d (32 KiB each), combiner held up to %d bytes; cold acks=all %d, worst %v (manual clock); cold bytes from the leader %d",
		shared, hotAcked, held, coldAcked, worst, coldFallback)
	if hotAcked*(32<<10) < 4*share {
		t.Fatalf("the hot partition produced %d records: not enough to back up", hotAcked)
	}
	if coldAcked == 0 || worst >= lag {
		t.Errorf("cold acks=all: %d acknowledged, worst wait %v; want some, each within %v", coldAcked, worst, lag)
	}
	for i, p := range ts.Partitions {
		if len(p.ISR) != 3 {
			t.Errorf("cold-%d ISR %v: a follower was dropped", i, p.ISR)
		}
	}
	// Each follower holds every cold byte; those it fetched from the
	// leader fell back because the store had not served them within
	// FallbackAfter of the manual clock.
	var coldBytes int64
	for _, tp := range coldTPs {
		l, _ := c.broker(1).PartitionLog(tp)
		for _, s := range l.Segments() {
			coldBytes += s.Size
		}
	}
	if followed := 2 * coldBytes; coldFallback*10 > followed {
		t.Errorf("cold followers fetched %d of %d bytes from the leader: the hot backlog held the others' slices back", coldFallback, followed)
	}
}

// indexedEnd is where the slices of tp in r's metadata index end (0 with
// none).
func indexedEnd(r *RemoteWALReplicator, tp broker.TopicPartition) int64 {
	sl := r.State().Slices(mtp(tp), 0)
	if len(sl) == 0 {
		return 0
	}
	return sl[len(sl)-1].LastOffset + 1
}

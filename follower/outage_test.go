package follower

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/retry"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// downStore is an object store that is down: with hang, every GET waits
// until its context ends (a store client retrying into a black hole),
// else it fails at once. up lets GETs through again.
type downStore struct {
	objstore.Store
	hang  bool
	up    atomic.Bool
	calls atomic.Int64
	// clk, when set, has the failed reads (GETs longer than a probe's
	// one byte) recorded in reads.
	clk   *clock.Manual
	mu    sync.Mutex
	reads []failedRead
}

type failedRead struct {
	at  time.Time
	key string
	off int64
}

// mostReadsOfOne is the largest number of instants before until at which
// reads of one range failed (a read and a read-ahead of the same range
// at one instant count once).
func (s *downStore) mostReadsOfOne(until time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, n, most := map[failedRead]bool{}, map[failedRead]int{}, 0
	for _, r := range s.reads {
		if r.at.Before(until) && !seen[r] {
			seen[r] = true
			k := failedRead{key: r.key, off: r.off}
			n[k]++
			most = max(most, n[k])
		}
	}
	return most
}

func (s *downStore) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	if s.up.Load() {
		return s.Store.GetRange(ctx, key, off, length)
	}
	s.calls.Add(1)
	if s.clk != nil && length > 1 {
		s.mu.Lock()
		s.reads = append(s.reads, failedRead{s.clk.Now(), key, off})
		s.mu.Unlock()
	}
	if s.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, errors.New("dial tcp 127.0.0.1:7070: connect: connection refused")
}

// flakyLeader fails every fetch while failing is set.
type flakyLeader struct {
	*fakeLeader
	failing atomic.Bool
	calls   atomic.Int64
}

func (l *flakyLeader) Fetch(ctx context.Context, tp metadata.TopicPartition, epoch int32, offset int64, maxBytes int) ([]byte, error) {
	if l.failing.Load() {
		l.calls.Add(1)
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return l.fakeLeader.Fetch(ctx, tp, epoch, offset, maxBytes)
}

// fullLog is a follower log on a full disk while full is set.
type fullLog struct {
	Log
	full  *atomic.Bool
	calls *atomic.Int64
}

func (l fullLog) AppendAsFollower(b []byte) (kafkalog.AppendInfo, error) {
	if err := l.refuse(); err != nil {
		return kafkalog.AppendInfo{}, err
	}
	return l.Log.AppendAsFollower(b)
}

func (l fullLog) AppendVerifiedAsFollower(b []byte) (kafkalog.AppendInfo, error) {
	if err := l.refuse(); err != nil {
		return kafkalog.AppendInfo{}, err
	}
	return l.Log.AppendVerifiedAsFollower(b)
}

func (l fullLog) refuse() error {
	if l.full.Load() {
		l.calls.Add(1)
		return fmt.Errorf("write /follower/00000000000000000000.log: %w", syscall.ENOSPC)
	}
	return nil
}

// lineCounter counts log records by level and message.
type lineCounter struct {
	mu    sync.Mutex
	lines map[string]int // "LEVEL message"
}

func (c *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *lineCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lines == nil {
		c.lines = map[string]int{}
	}
	c.lines[r.Level.String()+" "+r.Message]++
	return nil
}
func (c *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *lineCounter) WithGroup(string) slog.Handler      { return c }

// warns returns the WARN-or-worse lines, all of them and the most of one
// message.
func (c *lineCounter) warns() (total, most int, all map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	all = map[string]int{}
	for k, n := range c.lines {
		if len(k) > 4 && (k[:4] == "WARN" || k[:5] == "ERROR") {
			total += n
			most = max(most, n)
			all[k] = n
		}
	}
	return total, most, all
}

func (c *lineCounter) count(line string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines[line]
}

// TestFallbackBudgetIsTimeNotAttempts: object storage hangs (every GET
// waits for its context, as a store client retrying into a dead endpoint
// does) while the leader is alive. The follower must fetch from the
// leader once FallbackAfter has passed on its clock, not before, and then
// take everything the leader has at that same instant: one budget per
// outage, not one per slice, and not MaxReadAttempts times the client's
// retries. Once the store answers again the follower goes back to it.
func TestFallbackBudgetIsTimeNotAttempts(t *testing.T) {
	const budget = 1500 * time.Millisecond
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(101, 102))
	leader := r.addLeader(tp0, 0)
	fillLeader(t, leader, rng, 120, 0)
	objs := packObjects(t, r.put, "", cutSlices(t, tp0, leader, 0, leader.LogEndOffset(), rng, 2<<10), rng, 1, metadata.CodecNone)
	if len(objs) < 10 {
		t.Fatalf("only %d objects", len(objs))
	}
	for _, o := range objs {
		r.ix.publish(o.key, o.entries...)
	}
	store := &downStore{Store: r.put, hang: true}
	r.read = store
	lines := &lineCounter{}
	r.cfg = func(c *Config) {
		c.FallbackAfter, c.Logger, c.HedgeDelay = budget, slog.New(lines), -1
		c.Jitter = func() float64 { return 0 }
	}
	r.start()
	waitFor(t, "a GET in the dead store", nil, 0, func() bool { return store.calls.Load() > 0 }, func() string { return "" })
	// Up to just before the budget, nothing may come from the leader:
	// every decision made so far saw a clock below it.
	for r.clk.Now().Sub(t0) < budget-100*time.Millisecond {
		r.clk.Advance(100 * time.Millisecond)
		if n := r.leader.fetches.Load(); n != 0 {
			t.Fatalf("fetched from the leader %d times at %v, before the budget of %v", n, r.clk.Now().Sub(t0), budget)
		}
	}
	r.clk.Advance(t0.Add(budget).Sub(r.clk.Now()))
	// The whole log now comes from the leader without the clock moving.
	r.waitCaughtUp(false)
	if at := r.clk.Now().Sub(t0); at != budget {
		t.Fatalf("caught up at %v of clock, want %v", at, budget)
	}
	r.checkAll()
	m := r.f.Metrics()
	if m.LeaderBytes == 0 || m.Fallbacks != 1 {
		t.Fatalf("want one fallback serving the log: %+v", m)
	}
	if n := lines.count("WARN follower: falling back to the leader"); n != 1 {
		t.Fatalf("%d 'falling back' lines, want 1", n)
	}

	// The store comes back; new records are uploaded: they are read from
	// object storage again, not from the leader.
	if st, _ := r.f.Status(tp0); !st.Degraded {
		t.Fatalf("not degraded with the store down: %+v", st)
	}
	store.up.Store(true)
	waitFor(t, "a probe answered", r.clk, time.Millisecond, func() bool {
		st, _ := r.f.Status(tp0)
		return !st.Degraded
	}, func() string { return fmt.Sprint(r.f.Status(tp0)) })
	before := r.f.Metrics().LeaderBytes
	from := leader.LogEndOffset()
	fillLeader(t, leader, rng, 40, 0)
	for _, o := range packObjects(t, r.put, "b", cutSlices(t, tp0, leader, from, leader.LogEndOffset(), rng, 2<<10), rng, 1, metadata.CodecNone) {
		r.ix.publish(o.key, o.entries...)
	}
	r.waitCaughtUp(true)
	r.checkAll()
	m = r.f.Metrics()
	if m.SlicesApplied == 0 {
		t.Fatalf("never went back to object storage: %+v", m)
	}
	if n := lines.count("INFO follower: back to object storage"); n != 1 {
		t.Fatalf("%d 'back to object storage' lines, want 1 (leader bytes %d then %d)", n, before, m.LeaderBytes)
	}
}

// TestOutageLogsStateChanges runs 25 s of simulated outage on the manual
// clock, the follower retrying all along, and counts the log lines: a
// failure that goes on is logged when it starts, at most every LogEvery
// with a count, and when it ends. Before, one WARN per retry every 20 ms
// gave over a thousand lines (issue 12). The retries themselves back off
// (exponentially, to RetryBackoffMax).
func TestOutageLogsStateChanges(t *testing.T) {
	const outage = 25 * time.Second
	for _, kind := range []string{"store-down-leader-unreachable", "disk-full"} {
		t.Run(kind, func(t *testing.T) {
			r := newRig(t)
			defer r.stop()
			rng := rand.New(rand.NewPCG(111, 112))
			leader := r.addLeader(tp0, 0)
			fillLeader(t, leader, rng, 60, 0)
			nSlices := 0
			for _, o := range packObjects(t, r.put, "", cutSlices(t, tp0, leader, 0, leader.LogEndOffset(), rng, 4<<10), rng, 1, metadata.CodecNone) {
				r.ix.publish(o.key, o.entries...)
				nSlices += len(o.entries)
			}
			fl := &flakyLeader{fakeLeader: r.leader}
			store := &downStore{Store: r.put, clk: r.clk}
			var full atomic.Bool
			var appends atomic.Int64
			switch kind {
			case "store-down-leader-unreachable":
				r.read = store
				fl.failing.Store(true)
			case "disk-full":
				full.Store(true)
				r.wrapLog = func(l Log) Log { return fullLog{Log: l, full: &full, calls: &appends} }
			}
			lines := &lineCounter{}
			r.cfg = func(c *Config) {
				c.Logger, c.LeaderClient = slog.New(lines), fl
				c.LogEvery = 10 * time.Second
			}
			r.start()
			for r.clk.Now().Sub(t0) < outage {
				r.clk.Advance(10 * time.Millisecond)
				for range 20 {
					runtimeYield()
				}
			}
			total, most, all := lines.warns()
			leaderCalls, appendCalls, storeCalls := fl.calls.Load(), appends.Load(), store.calls.Load()
			t.Logf("%v of outage: %d WARN+ lines %v; failed attempts: %d leader fetches, %d appends, %d GETs (%d slices)",
				outage, total, all, leaderCalls, appendCalls, storeCalls, nSlices)
			// Per message: entered, then at most one per 10 s.
			if most > 1+int(outage/(10*time.Second)) || total > 12 {
				t.Fatalf("log flood: %d WARN+ lines, %d of one message: %v", total, most, all)
			}
			if leaderCalls+appendCalls+storeCalls == 0 {
				t.Fatal("nothing was retried during the outage")
			}
			// The bounds follow from the backoff alone, whatever the
			// goroutines' schedule: one chain of retries, each wait at its
			// shortest (full jitter), fits chain attempts in the outage. 20 ms
			// retries would be over 1,000 per chain.
			chain := int64(retriesWithin(outage, DefaultRetryBackoff, DefaultRetryBackoffMax))
			// GETs: every slice read with the one at the log end until it
			// has failed MaxReadAttempts times (and once more in flight),
			// then a probe chain and the reads it lets through.
			maxGets := int64(nSlices)*(DefaultMaxReadAttempts+1) + 2*chain
			// Before the fallback, all the slices are read together, and
			// each failed read backs off (not only the slice at the log end:
			// the others once retried every 20-40 ms while it waited).
			reads, maxReads := store.mostReadsOfOne(t0.Add(DefaultFallbackAfter)), retriesWithin(DefaultFallbackAfter, DefaultRetryBackoff, DefaultRetryBackoffMax)
			if reads > maxReads {
				t.Fatalf("one range read %d times in the first %v, want at most %d: the retries do not back off", reads, DefaultFallbackAfter, maxReads)
			}
			if leaderCalls > chain || appendCalls > chain || storeCalls > maxGets {
				t.Fatalf("not backing off: %d leader fetches, %d appends (bound %d each), %d GETs (bound %d) in %v",
					leaderCalls, appendCalls, chain, storeCalls, maxGets, outage)
			}
			fl.failing.Store(false)
			store.up.Store(true)
			full.Store(false)
			r.waitCaughtUp(true)
			r.checkAll()
		})
	}
}

func runtimeYield() { runtime.Gosched() }

// retriesWithin is the most attempts one chain of retries can make in d
// when every wait is at its shortest: the first attempt, then one after
// each wait of the backoff with the largest jitter taken off.
func retriesWithin(d, base, maxWait time.Duration) int {
	b := retry.Backoff{Base: base, Max: maxWait, Jitter: 0.5}
	n := 1
	for elapsed := time.Duration(0); ; n++ {
		elapsed += b.Delay(n, 1)
		if elapsed > d {
			return n
		}
	}
}

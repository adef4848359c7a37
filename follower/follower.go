package follower

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/retry"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/ledger"
)

// sliceID names one stored slice: its object and position.
type sliceID struct {
	key string
	pos int64
}

// PartitionStatus is one followed partition as last seen by the driver.
type PartitionStatus struct {
	LogEndOffset int64
	LeaderEpoch  int32
	// LagOffsets is the highest end offset known (the leader's, or the
	// index's) minus the log end offset.
	LagOffsets int64
	// LagMs is how far behind the leader's appends the log is: 0 when
	// caught up, else now minus the max timestamp of the last batch
	// appended (an upper bound: the first missing record was appended after
	// it), -1 when nothing was appended since the partition was added.
	LagMs int64
	// Fallback: fetching from the leader; Held: waiting for a leader or for
	// the leader-epoch check.
	Fallback bool
	Held     bool
	// Degraded: object storage failed this partition (a read, or a probe
	// not answered within FallbackAfter) and no probe has been answered
	// since; the leader serves everything meanwhile.
	Degraded bool
}

// Metrics are the follower's counters since New.
type Metrics struct {
	Reads         int64 // ranged reads issued (each may be two GETs)
	GETs          int64 // GET requests sent
	Hedges        int64 // second GETs sent because the first was slow
	HedgeWins     int64 // reads answered by the hedge
	ReadErrors    int64 // failed GETs
	CorruptSlices int64 // slices refused by a CRC or length check
	BytesRead     int64 // bytes received from object storage
	SlicesApplied int64
	BytesApplied  int64
	Duplicates    int64 // slices read but already below the log end
	Fenced        int64 // slices refused by leader-epoch fencing
	Fallbacks     int64 // fallbacks to the leader started
	LeaderFetches int64
	LeaderBytes   int64 // bytes fetched from the leader (cross-rack)
	LeaderErrors  int64
	Truncations   int64
	RateLimited   int64 // times a read waited for the catch-up rate limit
	Appends       int64 // appends to the logs from object storage (a run of slices is one)
}

type counters struct {
	reads, gets, hedges, hedgeWins, readErrors, corrupt, bytesRead   atomic.Int64
	slicesApplied, bytesApplied, duplicates, fenced                  atomic.Int64
	fallbacks, leaderFetches, leaderBytes, leaderErrors, truncations atomic.Int64
	rateLimited, appends                                             atomic.Int64
}

// Follower rebuilds the logs of the partitions it follows. See doc.go.
type Follower struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	cmds   chan func()
	notify chan struct{}
	res    chan func()
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	c      counters
	// pool runs the work off the driver (workers.go).
	pool *workers

	mu struct {
		sync.Mutex
		status map[metadata.TopicPartition]PartitionStatus
		gets   retry.Episode // failing GETs, for the log
	}

	// Owned by the driver goroutine.
	parts         map[metadata.TopicPartition]*part
	order         []*part // parts sorted by topic and partition, for PlanChains' order
	readsInFlight int
	flights       []*flight // the reads in flight, for their budgets and hedges (watchFlights)
	bucket        bucket
	// indexChanged was taken before the partitions' slots were last read
	// from the index: until it is closed they are up to date.
	indexChanged <-chan struct{}
	indexSeq     uint64 // IndexChanges: where the last ChangedSince left off
	indexSeqOK   bool   // indexSeq was given by the index
	refreshes    uint64
	chains       map[metadata.TopicPartition][]Located // scratch for step
	readKeys     []string                              // scratch for step
	planScratch  planScratch                           // scratch for step's planChains
}

// part is the driver's state of one partition.
type part struct {
	tp         metadata.TopicPartition
	log        Log
	leo        int64
	localEpoch int32
	leader     LeaderInfo
	hasLeader  bool

	checked      bool  // the truncation check for checkedEpoch is done
	checkedEpoch int32 //
	epochBusy    bool
	epochRetryAt time.Time
	fenceEpoch   int32
	fence        map[int32]epochEnd

	// slots: the slices the index listed at or above the log end when last
	// read (stale: read them again), sorted by chainCmp, plus the busy ones
	// it no longer lists; byID finds them, and the ones still being read
	// after they left slots.
	slots    []*slot
	byID     map[sliceID]*slot
	stale    bool
	scratch  []*slot   // decide's Read
	readIdx  []int     // replica.PlanRemote's Read, reused
	chainBuf []Located // step's chain for PlanChains
	runBuf   []*slot   // appendReady's run, reused
	partsBuf [][]byte  // appendRun's parts, reused
	slotsVer uint64
	// sum summarizes slots for the key below; fenceVer counts changes of
	// fence.
	sum      summary
	sumKey   summaryKey
	sumLEO   int64
	fenceVer uint64

	failures int
	// readFails counts the reads of p that failed in a row, any slice:
	// the backoff grows with it, so that slices past the log end do not
	// retry at the base delay while the one at the log end waits.
	readFails  int
	lastCause  Cause
	retryAt    time.Time
	stuckSince time.Time

	fallbackUntil int64
	// bytesPerOffset is the log bytes per offset of the latest append (0
	// before the first): it sizes a leader fetch for a range whose end is
	// known (fallbackMaxBytes).
	bytesPerOffset  float64
	fallbackCause   Cause
	fallbackBusy    bool
	fallbackRetryAt time.Time
	leaderFails     int // consecutive failed leader fetches
	epochFails      int // consecutive failed epoch queries

	// wantedSince: when the slice at the log end was first wanted from
	// object storage (Config.FallbackAfter runs from it).
	wantedSince time.Time
	// probing: a fallback that may mean object storage is failing; probe
	// GETs of probe go out until one is answered. degraded: object
	// storage failed (a read, or a probe not answered within
	// FallbackAfter); the leader serves everything meanwhile.
	probing    bool
	degraded   bool
	probeAt    time.Time
	probeFails int
	probeBusy  bool
	probe      Located // the latest slice the index listed, for the probe
	hasProbe   bool

	// Episodes, so that a failure that goes on is logged as a state
	// change with a count (Config.LogEvery).
	inFallback     retry.Episode // counts fallbacks started
	leaderFetches  int64         // leader fetches since inFallback began
	leaderFailing  retry.Episode
	epochFailing   retry.Episode
	appendsRefused retry.Episode

	lastMaxTs int64
	target    int64
}

// summaryKey is what a partition's summary was computed from.
type summaryKey struct {
	slotsVer, fenceVer      uint64
	leaderEpoch, localEpoch int32
	valid                   bool
}

// New starts a follower with no partitions; add them with AddPartition.
func New(cfg Config) (*Follower, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Follower{
		cfg: cfg, ctx: ctx, cancel: cancel,
		cmds:   make(chan func()),
		notify: make(chan struct{}, 1),
		res:    make(chan func(), cfg.MaxInFlight),
		done:   make(chan struct{}),
		parts:  make(map[metadata.TopicPartition]*part),
		chains: make(map[metadata.TopicPartition][]Located),
		bucket: newBucket(cfg.CatchUpBytesPerSec, cfg.CatchUpBurstBytes, cfg.Clock.Now()),
	}
	f.mu.status = make(map[metadata.TopicPartition]PartitionStatus)
	f.mu.gets.Every = cfg.LogEvery
	// Idle workers kept: enough for every read and its hedge, and as many
	// again for leader fetches, epoch queries and probes.
	f.pool = newWorkers(ctx.Done(), &f.wg, 3*cfg.MaxInFlight)
	go f.run()
	return f, nil
}

// AddPartition starts following tp into log. The log's end offset is where
// the follower resumes; before appending anything it checks the log
// against the leader's epoch history (and truncates it if need be).
// Errors: ErrPartitionExists, ErrClosed.
func (f *Follower) AddPartition(tp metadata.TopicPartition, log Log) error {
	return f.do(func() error {
		if _, ok := f.parts[tp]; ok {
			return fmt.Errorf("%w: %v", ErrPartitionExists, tp)
		}
		p := &part{
			tp: tp, log: log, leo: log.LogEndOffset(), localEpoch: kafkalog.UndefinedEpoch,
			byID: make(map[sliceID]*slot), stale: true,
			fence: make(map[int32]epochEnd), lastMaxTs: -1,
		}
		p.setLogEvery(f.cfg.LogEvery)
		if e, ok := log.LatestEpoch(); ok {
			p.localEpoch = e
		}
		f.parts[tp] = p
		i, _ := slices.BinarySearchFunc(f.order, p, partCmp)
		f.order = slices.Insert(f.order, i, p)
		f.publish(p, f.cfg.Clock.Now())
		return nil
	})
}

// RemovePartition stops following tp. When it returns the follower no
// longer touches the partition's log. Errors: ErrUnknownPartition,
// ErrClosed.
func (f *Follower) RemovePartition(tp metadata.TopicPartition) error {
	return f.do(func() error {
		p, ok := f.parts[tp]
		if !ok {
			return fmt.Errorf("%w: %v", ErrUnknownPartition, tp)
		}
		delete(f.parts, tp)
		f.order = slices.DeleteFunc(f.order, func(q *part) bool { return q == p })
		f.mu.Lock()
		delete(f.mu.status, tp)
		f.mu.Unlock()
		return nil
	})
}

// do runs fn on the driver goroutine and returns its error.
func (f *Follower) do(fn func() error) error {
	reply := make(chan error, 1)
	select {
	case f.cmds <- func() { reply <- fn() }:
		return <-reply
	case <-f.done:
		return ErrClosed
	}
}

// Notify wakes the driver, e.g. after a FollowerFetch response changed the
// leader epoch. It never blocks.
func (f *Follower) Notify() {
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

// Close stops the follower and waits for its goroutines. It does not close
// the partitions' logs.
func (f *Follower) Close() error {
	f.once.Do(f.cancel)
	<-f.done
	f.wg.Wait()
	return nil
}

// Status returns tp's status; ok is false if tp is not followed.
func (f *Follower) Status(tp metadata.TopicPartition) (PartitionStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.mu.status[tp]
	return s, ok
}

// Metrics returns a snapshot of the counters.
func (f *Follower) Metrics() Metrics {
	c := &f.c
	return Metrics{
		Reads: c.reads.Load(), GETs: c.gets.Load(), Hedges: c.hedges.Load(), HedgeWins: c.hedgeWins.Load(),
		ReadErrors: c.readErrors.Load(), CorruptSlices: c.corrupt.Load(), BytesRead: c.bytesRead.Load(),
		SlicesApplied: c.slicesApplied.Load(), BytesApplied: c.bytesApplied.Load(), Duplicates: c.duplicates.Load(),
		Fenced: c.fenced.Load(), Fallbacks: c.fallbacks.Load(), LeaderFetches: c.leaderFetches.Load(),
		LeaderBytes: c.leaderBytes.Load(), LeaderErrors: c.leaderErrors.Load(), Truncations: c.truncations.Load(),
		RateLimited: c.rateLimited.Load(), Appends: c.appends.Load(),
	}
}

// run is the driver.
func (f *Follower) run() {
	defer close(f.done)
	timer := f.cfg.Clock.NewTimer(f.cfg.PollInterval)
	defer timer.Stop()
	for {
		now := f.cfg.Clock.Now()
		wakeAt := f.step(now)
		changed := f.indexChanged
		at := now.Add(f.cfg.PollInterval)
		if !wakeAt.IsZero() && wakeAt.Before(at) {
			at = wakeAt
		}
		timer.Stop()
		clock.ResetAt(timer, f.cfg.Clock, at) // exactly at, however far the clock moved during the step
		select {
		case <-f.ctx.Done():
			return
		case <-changed:
		case <-timer.C():
		case <-f.notify:
		case fn := <-f.cmds:
			fn()
		case fn := <-f.res:
			fn()
			f.drainResults()
		}
	}
}

// drainResults takes the completions that are already waiting, so that
// reads finishing together are planned again in one step, not one step
// each.
func (f *Follower) drainResults() {
	for range cap(f.res) {
		select {
		case fn := <-f.res:
			fn()
		default:
			return
		}
	}
}

// spawn runs work off the driver (on the worker pool) and hands its
// completion to the driver.
func (f *Follower) spawn(work func() func()) {
	f.pool.run(func() {
		done := work()
		select {
		case f.res <- done:
		case <-f.ctx.Done():
		}
	})
}

// step decides and starts what each partition needs; it returns when the
// driver must next wake on its own.
func (f *Follower) step(now time.Time) time.Time {
	var wakeAt time.Time
	wake := func(t time.Time) {
		if !t.IsZero() && (wakeAt.IsZero() || t.Before(wakeAt)) {
			wakeAt = t
		}
	}
	f.watchIndex()
	f.watchFlights(now, wake)
	// Only the first free reads of the plan are started: only the slices of
	// the objects they can come from are planned (see firstObjects).
	free := f.cfg.MaxInFlight - f.readsInFlight
	keys := f.readKeys[:0]
	clear(f.chains)
	for _, p := range f.order {
		tp := p.tp
		p.leader, p.hasLeader = f.cfg.Leader.Leader(tp)
		if !p.hasLeader {
			f.publish(p, now)
			continue
		}
		if !p.checked || p.checkedEpoch != p.leader.Epoch {
			p.checked = false
			if !p.epochBusy {
				if now.Before(p.epochRetryAt) {
					wake(p.epochRetryAt)
				} else {
					f.startEpochCheck(p, true, nil)
				}
			}
			f.publish(p, now)
			continue
		}
		if p.fenceEpoch != p.leader.Epoch {
			p.fence = make(map[int32]epochEnd)
			p.fenceEpoch = p.leader.Epoch
			p.fenceVer++
		}
		if p.stale {
			f.refresh(p)
		}
		f.applyReady(p, now)
		if p.probing && !p.probeBusy {
			if now.Before(p.probeAt) {
				wake(p.probeAt)
			} else {
				f.startProbe(p, now)
			}
		}
		k := summaryKey{slotsVer: p.slotsVer, fenceVer: p.fenceVer, leaderEpoch: p.leader.Epoch, localEpoch: p.localEpoch, valid: true}
		if p.sumKey != k || (len(p.sum.Ask) > 0 && p.sumLEO != p.leo) {
			// Epochs to ask about are rare; when there are some, drop those
			// of slots the log end passed.
			p.sum, p.sumKey, p.sumLEO = summarize(p.slots, p.leo, p.leader.Epoch, p.localEpoch, p.fence), k, p.leo
		}
		// The reads to plan: the first free objects' slices. The first
		// partition to plan this step (the only one, in a rebuild) walks
		// its chain only that far; a later one walks it all, as it may
		// add its slices to the objects already chosen (firstObjects)
		// wherever they are in its chain. With nothing free, one object
		// is enough for what the plan decides besides the reads.
		maxObjects := 0
		if free <= 0 {
			maxObjects = 1
		} else if len(keys) == 0 {
			maxObjects = free
		}
		d := decide(now, partView{
			LEO: p.leo, Leader: p.leader, LocalEpoch: p.localEpoch,
			Slots: p.slots, Sum: p.sum, Fence: p.fence, Scratch: p.scratch, ReadIdx: p.readIdx,
			Failures: p.failures, RetryAt: p.retryAt, StuckSince: p.stuckSince, FallbackUntil: p.fallbackUntil,
			WantedSince: p.wantedSince, Degraded: p.degraded,
		}, &f.cfg, maxObjects)
		p.stuckSince = d.StuckSince
		p.wantedSince = d.WantedSince
		p.target = d.Target
		wake(d.WakeAt)
		if len(d.Ask) > 0 && !p.epochBusy && !now.Before(p.epochRetryAt) {
			f.startEpochCheck(p, false, d.Ask)
		} else if len(d.Ask) > 0 {
			wake(p.epochRetryAt)
		}
		if d.Fallback {
			if p.fallbackUntil <= p.leo {
				p.fallbackUntil = d.FallbackUntil
				p.fallbackCause = d.GapCause
				if p.fallbackCause == "" {
					p.fallbackCause = p.lastCause
				}
				if !p.degraded || !p.inFallback.Active() {
					f.fallbackStarted(p, now)
				} // else the same fallback goes on: object storage is still failing
			}
			p.fallbackUntil = max(p.fallbackUntil, d.FallbackUntil) // degraded: up to what the leader has
			if !p.fallbackBusy {
				if now.Before(p.fallbackRetryAt) {
					wake(p.fallbackRetryAt)
				} else {
					f.startFallback(p)
				}
			}
		}
		if d.Read != nil {
			p.scratch, p.readIdx = d.Read[:0], d.readIdx[:0]
		}
		if free > 0 {
			var chain []Located
			keys, chain = firstObjects(keys, free, d.Read, p.chainBuf[:0]) // PlanChains copies what it keeps
			if len(chain) > 0 {
				f.chains[tp] = chain
			}
			p.chainBuf = chain
		}
		f.publish(p, now)
	}
	f.readKeys = keys
	if len(f.chains) > 0 && free > 0 {
		reads := planChains(f.chains, PlanConfig{
			MaxRangeBytes: f.cfg.MaxRangeBytes, MergeGapBytes: f.cfg.MergeGapBytes,
			MaxReads: free,
		}, &f.planScratch)
		for i, r := range reads {
			if ok, w := f.bucket.take(now, r.Len); !ok {
				f.c.rateLimited.Add(1)
				wake(now.Add(w))
				for _, r := range reads[i:] {
					f.planScratch.giveSlices(r.Slices)
				}
				break
			}
			wake(f.startRead(r, now))
		}
	}
	return wakeAt
}

// watchIndex marks the partitions whose slots changed in the index since
// they were read stale: those the index says (IndexChanges), else every
// one. The channel is taken before the changes are asked for and the
// slots read again, so no change is missed.
func (f *Follower) watchIndex() {
	if f.indexChanged != nil {
		select {
		case <-f.indexChanged:
		default:
			return
		}
	}
	f.indexChanged = f.cfg.Index.Changed()
	if ix, ok := f.cfg.Index.(IndexChanges); ok {
		tps, seq, complete := ix.ChangedSince(f.indexSeq)
		known := f.indexSeqOK
		f.indexSeq, f.indexSeqOK = seq, true
		if complete && known {
			for _, tp := range tps {
				if p := f.parts[tp]; p != nil {
					p.stale = true
				}
			}
			return
		}
	}
	for _, p := range f.order {
		p.stale = true
	}
}

// refresh reads p's slices at or above its log end from the index again.
// Slots it already had keep their state; busy ones the index no longer
// lists are kept, so a read or a verified slice is not thrown away.
func (f *Follower) refresh(p *part) {
	f.refreshes++
	mark := f.refreshes
	listed := f.cfg.Index.Slices(p.tp, p.leo)
	next := make([]*slot, 0, len(listed))
	if len(p.byID) == 0 && len(listed) > 8 {
		p.byID = make(map[sliceID]*slot, len(listed)) // a rebuild's first listing: no growing
	}
	// The new slots of this listing are made together, one allocation
	// for at least as many as it lists beyond the slots kept (a rebuild
	// lists thousands at once), so none is made that is not used.
	var made []slot
	if n := len(listed) - len(p.byID); n > 8 {
		made = make([]slot, 0, n)
	}
	for _, l := range listed {
		id := sliceID{l.Key, l.Entry.Position}
		s := p.byID[id]
		if s == nil {
			if len(made) < cap(made) {
				made = append(made, makeSlot(l))
				s = &made[len(made)-1]
			} else {
				s = newSlot(l)
			}
			p.byID[id] = s
		} else if s.mark == mark {
			continue // listed twice
		}
		s.mark, s.listed = mark, true
		next = append(next, s)
		if !p.hasProbe || l.Entry.LastOffset >= p.probe.Entry.LastOffset {
			p.probe, p.hasProbe = l, true
		}
	}
	for id, s := range p.byID {
		if s.mark == mark {
			continue
		}
		if s.state != idle && s.Entry.LastOffset >= p.leo {
			s.mark, s.listed = mark, true
			next = append(next, s)
			continue
		}
		s.listed = false
		if s.state != reading {
			delete(p.byID, id)
			s.drop()
		}
	}
	if !slices.IsSortedFunc(next, slotCmp) { // the index lists them in order, mostly
		slices.SortFunc(next, slotCmp)
	}
	clear(p.slots)
	p.slots = next
	p.stale = false
	p.slotsVer++
}

// dropBelow removes from the front of p's slots those wholly below the log
// end, counting the verified ones as duplicates.
func (f *Follower) dropBelow(p *part) {
	i := 0
	for ; i < len(p.slots) && p.slots[i].Entry.LastOffset < p.leo; i++ {
		s := p.slots[i]
		s.listed = false
		switch s.state {
		case ready:
			f.c.duplicates.Add(1)
			s.state = idle
			s.drop()
			fallthrough
		case idle:
			delete(p.byID, sliceID{s.Key, s.Entry.Position})
		}
	}
	if i > 0 {
		clear(p.slots[:i])
		p.slots = p.slots[i:]
	}
}

func partCmp(a, b *part) int {
	if c := strings.Compare(a.tp.Topic, b.tp.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.tp.Partition, b.tp.Partition)
}

func (f *Follower) publish(p *part, now time.Time) {
	s := PartitionStatus{
		LogEndOffset: p.leo, LeaderEpoch: p.leader.Epoch,
		LagOffsets: max(0, max(p.target, p.leader.LogEnd)-p.leo),
		Fallback:   p.fallbackUntil > p.leo,
		Held:       !p.hasLeader || !p.checked,
		Degraded:   p.degraded,
	}
	switch {
	case s.LagOffsets == 0:
	case p.lastMaxTs < 0:
		s.LagMs = -1
	default:
		s.LagMs = max(0, now.UnixMilli()-p.lastMaxTs)
	}
	f.mu.Lock()
	f.mu.status[p.tp] = s
	f.mu.Unlock()
}

// flight is a read in flight, with its budget: one in time for the whole
// read, hedge and store-client retries included, so that a store that
// does not answer fails the read in time (Config.FallbackAfter); and its
// hedge time, when the read's second GET goes out if the first has not
// answered (Config.HedgeDelay). The driver watches both with its own
// timer (watchFlights): no timer, nor goroutine, per read.
type flight struct {
	read     *hedgedRead // its cancel cancels the read's context
	deadline time.Time
	hedgeAt  time.Time // zero: no hedge, or sent
	spent    bool      // cancelled with errReadBudget
}

// watchFlights cancels, with errReadBudget, the reads whose budget is
// spent at now, sends the hedges due, and wakes the driver when the next
// of either is.
func (f *Follower) watchFlights(now time.Time, wake func(time.Time)) {
	for _, fl := range f.flights {
		switch {
		case fl.spent:
			continue
		case !now.Before(fl.deadline):
			fl.spent = true
			fl.read.cancel(errReadBudget) // the GETs in flight answer with it
			continue
		default:
			wake(fl.deadline)
		}
		switch {
		case fl.hedgeAt.IsZero():
		case !now.Before(fl.hedgeAt):
			fl.hedgeAt = time.Time{}
			f.sendHedge(fl.read)
		default:
			wake(fl.hedgeAt)
		}
	}
}

// landed forgets fl, whose read is done, and releases its context.
func (f *Follower) landed(fl *flight) {
	if i := slices.Index(f.flights, fl); i >= 0 {
		f.flights = slices.Delete(f.flights, i, i+1)
	}
	fl.read.cancel(nil)
}

// startRead issues one planned read on a worker and returns when the
// driver must wake to send its hedge (zero without hedges).
func (f *Follower) startRead(r Read, now time.Time) time.Time {
	f.readsInFlight++
	f.c.reads.Add(1)
	var p *part
	for _, s := range r.Slices {
		if p = f.partOf(p, s.Entry.TopicPartition); p != nil {
			if sl := p.byID[sliceID{s.Key, s.Entry.Position}]; sl != nil {
				sl.state = reading
			}
		}
	}
	ctx := f.ctx
	if len(r.Slices) > 0 {
		tp := r.Slices[0].Entry.TopicPartition
		ctx = objstore.WithTags(ctx, objstore.Tags{Component: "follower", Topic: tp.Topic, Partition: tp.Partition, Rack: f.cfg.Rack})
	}
	ctx, cancel := context.WithCancelCause(ctx)
	h := f.newHedgedRead(ctx, cancel, r)
	fl := &flight{read: h, deadline: now.Add(f.cfg.FallbackAfter)}
	if f.cfg.HedgeDelay >= 0 {
		fl.hedgeAt = now.Add(f.cfg.HedgeDelay)
	}
	f.flights = append(f.flights, fl)
	f.spawn(func() func() {
		res := f.read(h)
		return func() {
			f.landed(fl)
			f.readDone(res)
		}
	})
	return fl.hedgeAt
}

// partOf is the followed partition tp, or nil; last, the partition of
// the read's previous slice (a read's slices are mostly of one), saves
// looking it up again: the caller does not add or remove partitions
// between the two.
func (f *Follower) partOf(last *part, tp metadata.TopicPartition) *part {
	if last != nil && last.tp == tp {
		return last
	}
	return f.parts[tp]
}

// readDone takes a read's verified slices into the partitions' slots and
// applies what continues each log.
func (f *Follower) readDone(res readResult) {
	f.readsInFlight--
	now := f.cfg.Clock.Now()
	var touched, failedParts []*part
	var p *part
	for i, s := range res.read.Slices {
		p = f.partOf(p, s.Entry.TopicPartition)
		if p == nil {
			release(res.bodyOf(i))
			continue
		}
		id := sliceID{s.Key, s.Entry.Position}
		sl := p.byID[id]
		if sl == nil || sl.state != reading {
			release(res.bodyOf(i))
			continue // the partition was removed and added again meanwhile
		}
		sl.state = idle
		switch {
		case res.errs[i] != nil:
			f.failed(p, s.Entry, causeOf(res.errs[i]), now)
			if !slices.Contains(failedParts, p) {
				failedParts = append(failedParts, p)
			}
		case s.Entry.LastOffset < p.leo:
			f.c.duplicates.Add(1)
			f.storageAnswers(p, now)
		default:
			sl.state = ready
			sl.hold(res.raws[i], res.bodyOf(i), int(s.Entry.Position-res.read.Off), i < len(res.batchesOK) && res.batchesOK[i])
			f.storageAnswers(p, now)
			if !slices.Contains(touched, p) {
				touched = append(touched, p)
			}
			continue
		}
		release(res.bodyOf(i)) // failed, or below the log end
		if !sl.listed {
			delete(p.byID, id)
		}
	}
	f.planScratch.giveSlices(res.read.Slices) // nothing keeps it
	for _, p := range failedParts {
		p.readFails++ // once per read, however many of its slices failed
		p.retryAt = now.Add(f.backoff(max(p.failures, p.readFails)))
	}
	for _, p := range touched {
		f.applyReady(p, now)
	}
}

// failed records a failed read or append of entry: a failure of the
// slice at the log end counts towards MaxReadAttempts.
func (f *Follower) failed(p *part, e metadata.SliceEntry, cause Cause, now time.Time) {
	if e.BaseOffset <= p.leo && p.leo <= e.LastOffset {
		p.failures++
		p.lastCause = cause
	}
	p.retryAt = now.Add(f.backoff(max(p.failures, p.readFails)))
}

// backoff is the wait after n consecutive failures.
func (f *Follower) backoff(n int) time.Duration {
	return f.cfg.backoff().Delay(n, f.cfg.Jitter())
}

func (p *part) setLogEvery(d time.Duration) {
	for _, e := range []*retry.Episode{&p.inFallback, &p.leaderFailing, &p.epochFailing, &p.appendsRefused} {
		e.Every = d
	}
}

// fallbackStarted counts a fallback that p just started and logs it once
// per episode: the episode ends when a slice from object storage is
// appended again (backOnStorage).
func (f *Follower) fallbackStarted(p *part, now time.Time) {
	f.c.fallbacks.Add(1)
	if c := p.fallbackCause; c.degrades() && !p.probing {
		// A read that failed or timed out is evidence enough; a gap in the
		// index may be the leader's uploads failing: probe first.
		p.probing, p.probeFails, p.probeAt = true, 0, now
		if c == CauseReadError || c == CauseReadTimeout {
			p.degraded, p.probeAt = true, now.Add(f.backoff(1))
		}
	}
	switch r, n := p.inFallback.Fail(now); r {
	case retry.Entered:
		p.leaderFetches = 0
		f.cfg.Logger.Warn("follower: falling back to the leader", "partition", p.tp, "from", p.leo,
			"until", p.fallbackUntil, "cause", string(p.fallbackCause), "failures", p.failures)
	case retry.Still:
		f.cfg.Logger.Warn("follower: still fetching from the leader", "partition", p.tp, "logEnd", p.leo,
			"cause", string(p.fallbackCause), "fallbacks", n, "leaderFetches", p.leaderFetches,
			"for", now.Sub(p.inFallback.Since()).Round(time.Millisecond))
	}
}

// appendsWork ends p's episode of refused appends.
func (f *Follower) appendsWork(p *part, now time.Time) {
	if r, n, d := p.appendsRefused.OK(now); r == retry.Left {
		f.cfg.Logger.Info("follower: slices appended again", "partition", p.tp, "refused", n, "after", d.Round(time.Millisecond))
	}
}

// backOnStorage ends p's fallback episode: a slice read from object
// storage was appended.
func (f *Follower) backOnStorage(p *part, now time.Time) {
	if r, n, d := p.inFallback.OK(now); r == retry.Left {
		f.cfg.Logger.Info("follower: back to object storage", "partition", p.tp, "logEnd", p.leo,
			"cause", string(p.fallbackCause), "fallbacks", n, "leaderFetches", p.leaderFetches, "after", d.Round(time.Millisecond))
	}
}

// storageAnswers: object storage served p a slice, so a probe is not
// needed any more.
func (f *Follower) storageAnswers(p *part, now time.Time) {
	if p.probing {
		f.cfg.Logger.Debug("follower: object storage answers", "partition", p.tp, "degraded", p.degraded, "failedProbes", p.probeFails)
	}
	if p.degraded {
		p.degraded = false
		f.publish(p, now)
	}
	p.probing = false
}

// startProbe sends one small GET of the latest slice the index listed
// for p (it may be below the log end: any answer, even not found, shows
// the store answers). Without one, p tries object storage again at once.
func (f *Follower) startProbe(p *part, now time.Time) {
	if !p.hasProbe {
		f.storageAnswers(p, now)
		return
	}
	p.probeBusy = true
	tp, l := p.tp, p.probe
	f.c.gets.Add(1)
	f.spawn(func() func() {
		ctx, done := f.budgetCtx(f.ctx)
		defer done()
		ctx = objstore.WithTags(ctx, objstore.Tags{Component: "follower", Topic: tp.Topic, Partition: tp.Partition, Rack: f.cfg.Rack})
		_, err := f.cfg.Store.GetRange(ctx, l.Key, l.Entry.Position, min(l.Entry.Length, 1))
		return func() { f.probeDone(tp, budgetErr(ctx, err)) }
	})
}

func (f *Follower) probeDone(tp metadata.TopicPartition, err error) {
	p := f.parts[tp]
	if p == nil {
		return
	}
	p.probeBusy = false
	now := f.cfg.Clock.Now()
	f.getAnswered(err)
	if !p.probing {
		return // a read answered first
	}
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		f.storageAnswers(p, now)
		return
	}
	f.c.readErrors.Add(1)
	p.probeFails++
	p.degraded = true
	p.probeAt = now.Add(f.backoff(p.probeFails))
}

// errReadBudget: a GET (with every attempt the store client made) was
// not answered within Config.FallbackAfter.
var errReadBudget = errors.New("follower: not answered within the fallback budget")

// budgetCtx returns ctx cancelled with errReadBudget once FallbackAfter
// has passed on the clock, and the func that releases it.
func (f *Follower) budgetCtx(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := f.cfg.Clock.NewTimer(f.cfg.FallbackAfter)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		select {
		case <-t.C():
			cancel(errReadBudget)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { t.Stop(); cancel(nil) }
}

// budgetErr names errReadBudget in err when ctx ran out of budget.
func budgetErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errReadBudget) {
		return fmt.Errorf("%w: %w", errReadBudget, err)
	}
	return err
}

// getAnswered logs failing GETs as one state change per outage, with
// counts, not one line per GET. Safe from any goroutine.
func (f *Follower) getAnswered(err error) {
	if errors.Is(err, context.Canceled) && !errors.Is(err, errReadBudget) {
		return
	}
	now := f.cfg.Clock.Now()
	f.mu.Lock()
	var r retry.Report
	var n int64
	var d time.Duration
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		r, n = f.mu.gets.Fail(now)
		d = now.Sub(f.mu.gets.Since())
	} else {
		r, n, d = f.mu.gets.OK(now)
	}
	f.mu.Unlock()
	switch r {
	case retry.Entered:
		f.cfg.Logger.Warn("follower: GET failed", "err", err)
	case retry.Still:
		f.cfg.Logger.Warn("follower: GETs still failing", "failed", n, "for", d.Round(time.Millisecond), "err", err)
	case retry.Left:
		f.cfg.Logger.Info("follower: GETs answered again", "failed", n, "after", d.Round(time.Millisecond))
	}
}

func causeOf(err error) Cause {
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return CauseObjectMissing
	case errors.Is(err, ErrCorruptSlice), errors.Is(err, ErrMisaligned), errors.Is(err, objstore.ErrInvalidRange):
		return CauseCorrupt
	}
	return CauseReadError
}

// canAppend: the leader is known and the log was checked against its
// epoch history.
func (p *part) canAppend() bool {
	return p.hasLeader && p.checked && p.checkedEpoch == p.leader.Epoch
}

// applyReady appends, in offset order, every ready slice that continues the
// log, dropping the ones already below the log end and the fenced ones.
// The candidates are at the front of the sorted slots: those starting at
// or below the log end.
func (f *Follower) applyReady(p *part, now time.Time) {
	for p.canAppend() {
		f.dropBelow(p)
		var next *slot
		for _, s := range p.slots {
			if s.Entry.BaseOffset > p.leo {
				break
			}
			if s.state != ready {
				continue
			}
			if s.Entry.LastOffset < p.leo { // inside a longer slice already appended
				s.state = idle
				s.drop()
				f.c.duplicates.Add(1)
				continue
			}
			switch judge(s.Entry.LeaderEpoch, s.Entry.LastOffset, p.leader.Epoch, p.localEpoch, p.fence) {
			case fenced:
				s.state = idle
				s.drop()
				f.c.fenced.Add(1)
				f.cfg.Logger.Info("follower: slice fenced by leader epoch", "partition", p.tp, "key", s.Key,
					"epoch", s.Entry.LeaderEpoch, "base", s.Entry.BaseOffset, "last", s.Entry.LastOffset, "leaderEpoch", p.leader.Epoch)
				continue
			case usable:
				next = s
			}
			if next != nil {
				break
			}
		}
		if next == nil {
			return
		}
		next.state = idle
		if err := f.appendReady(p, next, now); err != nil { // apply.go
			return
		}
	}
}

// appendSlice appends the batches of raw, the verified log bytes of entry,
// at and above the log end.
//
// A slice that starts at the log end, the usual case, goes to the log as
// it is: the log walks its batches and refuses them unless the first
// starts at the log end, so walking them here first would only repeat
// that. One that straddles the log end is cut at it first (trimTo). A
// slice whose batches were validated with its CRC32C (batchesOK) goes to
// AppendVerifiedAsFollower, so no batch is checksummed twice.
func (f *Follower) appendSlice(p *part, key string, entry metadata.SliceEntry, raw []byte, batchesOK bool, now time.Time) error {
	data, err := raw, error(nil)
	if entry.BaseOffset != p.leo {
		data, err = trimTo(raw, p.leo, false)
	}
	var info kafkalog.AppendInfo
	switch {
	case err != nil:
	case batchesOK:
		// Cut at a batch boundary (trimTo), data holds whole batches of raw.
		info, err = p.log.AppendVerifiedAsFollower(data)
	default:
		info, err = p.log.AppendAsFollower(data)
	}
	if err == nil && info.NumBatches == 0 {
		err = fmt.Errorf("%w: slice [%d, %d] of %d bytes has no batch at the log end %d", ErrMisaligned, entry.BaseOffset, entry.LastOffset, len(raw), p.leo)
	}
	if err != nil {
		cause := CauseReadError
		switch {
		case errors.Is(err, kafkalog.ErrCorruptBatch):
			err = &CorruptSliceError{Key: key, Entry: entry, Err: err}
			f.c.corrupt.Add(1)
			cause = CauseCorrupt
		case errors.Is(err, ErrMisaligned), errors.Is(err, kafkalog.ErrOffsetGap), errors.Is(err, kafkalog.ErrOffsetOverlap):
			// The slice's batches do not start where its entry says.
			cause = CauseCorrupt
		case errors.Is(err, kafkalog.ErrEpochRegression):
			f.c.fenced.Add(1)
			cause = CauseFenced
		}
		switch r, n := p.appendsRefused.Fail(now); r {
		case retry.Entered:
			f.cfg.Logger.Error("follower: slice refused", "partition", p.tp, "key", key, "base", entry.BaseOffset,
				"last", entry.LastOffset, "logEnd", p.leo, "cause", string(cause), "err", err)
		case retry.Still:
			f.cfg.Logger.Error("follower: slices still refused", "partition", p.tp, "logEnd", p.leo, "refused", n,
				"for", now.Sub(p.appendsRefused.Since()).Round(time.Millisecond), "cause", string(cause), "err", err)
		}
		f.failed(p, entry, cause, now)
		return err
	}
	f.appendsWork(p, now)
	f.c.appends.Add(1)
	f.c.slicesApplied.Add(1)
	f.c.bytesApplied.Add(int64(len(data)))
	f.advanced(p, info, info.LastMaxTimestamp, now)
	f.backOnStorage(p, now)
	return nil
}

// advanced updates the partition after an append.
func (f *Follower) advanced(p *part, info kafkalog.AppendInfo, maxTs int64, now time.Time) {
	wasFallback := p.fallbackUntil > p.leo
	if n := info.LastOffset + 1 - info.FirstOffset; n > 0 && info.Bytes > 0 {
		p.bytesPerOffset = float64(info.Bytes) / float64(n)
	}
	p.leo = info.LastOffset + 1
	if info.LastEpoch >= 0 {
		p.localEpoch = max(p.localEpoch, info.LastEpoch)
	}
	p.lastMaxTs = maxTs
	if f.cfg.Observer != nil && maxTs > 0 {
		f.cfg.Observer.Observe(stagehist.ReplicationLag, now.Sub(time.UnixMilli(maxTs)))
	}
	p.failures, p.readFails = 0, 0
	p.retryAt = time.Time{}
	p.stuckSince = time.Time{}
	p.wantedSince = time.Time{}
	if wasFallback && p.fallbackUntil <= p.leo {
		f.cfg.Logger.Debug("follower: fallback range done", "partition", p.tp, "logEnd", p.leo, "cause", string(p.fallbackCause))
	}
	if f.cfg.Reporter != nil {
		f.cfg.Reporter.ReportLogEnd(p.tp, p.leo)
	}
	f.publish(p, now)
}

// startEpochCheck asks the leader, off the driver: with truncate, for the
// offset to truncate to (walking the local epoch cache), else for the end
// of each epoch in epochs.
func (f *Follower) startEpochCheck(p *part, truncate bool, epochs []int32) {
	p.epochBusy = true
	tp, epoch, leo := p.tp, p.leader.Epoch, p.leo
	var entries []kafkalog.EpochEntry
	if truncate {
		entries = p.log.EpochEntries()
	}
	f.spawn(func() func() {
		askLeader := func(e int32) (int32, int64, error) {
			return f.cfg.Leader.EndOffsetForEpoch(f.ctx, tp, e)
		}
		to := leo
		answers := make(map[int32]epochEnd)
		var err error
		if truncate {
			to, err = truncationOffset(entries, leo, askLeader)
		} else {
			for _, e := range epochs {
				var a epochEnd
				if a.Epoch, a.EndOffset, err = askLeader(e); err != nil {
					break
				}
				answers[e] = a
			}
		}
		return func() { f.epochDone(tp, epoch, truncate, to, answers, err) }
	})
}

func (f *Follower) epochDone(tp metadata.TopicPartition, epoch int32, truncate bool, to int64, answers map[int32]epochEnd, err error) {
	p := f.parts[tp]
	if p == nil {
		return
	}
	p.epochBusy = false
	now := f.cfg.Clock.Now()
	if err != nil {
		p.epochFails++
		switch r, n := p.epochFailing.Fail(now); r {
		case retry.Entered:
			f.cfg.Logger.Warn("follower: leader epoch query failed", "partition", tp, "leaderEpoch", epoch, "err", err)
		case retry.Still:
			f.cfg.Logger.Warn("follower: leader epoch queries still failing", "partition", tp, "leaderEpoch", epoch,
				"failed", n, "for", now.Sub(p.epochFailing.Since()).Round(time.Millisecond), "err", err)
		}
		p.epochRetryAt = now.Add(f.backoff(p.epochFails))
		return
	}
	p.epochFails = 0
	if r, n, d := p.epochFailing.OK(now); r == retry.Left {
		f.cfg.Logger.Info("follower: leader epoch query answered again", "partition", tp, "failed", n, "after", d.Round(time.Millisecond))
	}
	if epoch != p.leader.Epoch {
		return // asked a previous leader: ask again
	}
	if !truncate {
		if p.fenceEpoch == epoch {
			for e, a := range answers {
				p.fence[e] = a
			}
			p.fenceVer++
		}
		return
	}
	if to < p.leo {
		if err := p.log.Truncate(to); err != nil {
			p.epochFails++
			if r, _ := p.epochFailing.Fail(now); r != retry.Quiet {
				f.cfg.Logger.Error("follower: truncation failed", "partition", tp, "to", to, "failed", p.epochFailing.Total(), "err", err)
			}
			p.epochRetryAt = now.Add(f.backoff(p.epochFails))
			return
		}
		f.c.truncations.Add(1)
		f.cfg.Logger.Info("follower: truncated by leader epoch", "partition", tp, "from", p.leo, "to", to, "leaderEpoch", epoch)
		p.leo = p.log.LogEndOffset()
		p.localEpoch = kafkalog.UndefinedEpoch
		if e, ok := p.log.LatestEpoch(); ok {
			p.localEpoch = e
		}
		for _, s := range p.byID {
			if s.state == ready {
				s.state = idle
				s.drop()
			}
		}
		p.stale = true // the slots start at the old log end
		p.failures, p.readFails, p.fallbackUntil = 0, 0, 0
		p.wantedSince = time.Time{}
		p.lastMaxTs = -1
		if f.cfg.Reporter != nil {
			f.cfg.Reporter.ReportLogEnd(tp, p.leo)
		}
	}
	p.checked, p.checkedEpoch = true, epoch
	p.fence, p.fenceEpoch = make(map[int32]epochEnd), epoch
	p.fenceVer++
	f.publish(p, now)
}

// startFallback fetches from the leader at the log end, off the driver.
func (f *Follower) startFallback(p *part) {
	p.fallbackBusy = true
	p.leaderFetches++
	f.c.leaderFetches.Add(1)
	tp, epoch, from, rack := p.tp, p.leader.Epoch, p.leo, p.leader.Rack
	maxBytes := fallbackMaxBytes(p.fallbackUntil-p.leo, p.bytesPerOffset, f.cfg.FallbackMaxBytes)
	f.spawn(func() func() {
		raw, err := f.cfg.LeaderClient.Fetch(f.ctx, tp, epoch, from, maxBytes)
		if len(raw) > 0 && f.cfg.Transfers != nil {
			f.cfg.Transfers.RecordTransfer("follower", rack, f.cfg.Rack, ledger.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, int64(len(raw)))
		}
		return func() { f.fallbackDone(tp, epoch, from, raw, err) }
	})
}

// fallbackMaxBytes sizes one leader fetch for the offsets still wanted
// from the leader: what they take at bytesPerOffset, with a quarter more
// for batches of other sizes, at most limit. Every byte the leader sends
// crosses racks, and the follower appends only up to the range's end, so
// a fetch of limit for a range of a few batches would pay for bytes that
// object storage serves anyway. The leader returns at least one batch
// whatever the bound, so a low estimate costs round trips, not progress.
// Without an estimate, or with no end known, it is limit.
func fallbackMaxBytes(offsets int64, bytesPerOffset float64, limit int) int {
	if offsets <= 0 || bytesPerOffset <= 0 {
		return limit
	}
	est := float64(offsets) * bytesPerOffset * 1.25
	if est >= float64(limit) {
		return limit
	}
	return max(int(est), 1)
}

func (f *Follower) fallbackDone(tp metadata.TopicPartition, epoch int32, from int64, raw []byte, err error) {
	p := f.parts[tp]
	if p == nil {
		return
	}
	p.fallbackBusy = false
	now := f.cfg.Clock.Now()
	f.c.leaderBytes.Add(int64(len(raw)))
	if err == nil && (!p.canAppend() || epoch != p.leader.Epoch) {
		return // the leader changed meanwhile; the next step decides again
	}
	var data []byte
	if err == nil {
		data, err = trimTo(raw, p.leo, true)
		if err == nil && p.fallbackUntil > p.leo {
			data = cutBefore(data, p.fallbackUntil) // object storage serves the rest
		}
		if err == nil && len(data) == 0 {
			err = fmt.Errorf("follower: leader returned no batch at %d (%d bytes)", p.leo, len(raw))
		}
	}
	var info kafkalog.AppendInfo
	if err == nil {
		info, err = p.log.AppendAsFollower(data)
	}
	if err != nil {
		f.c.leaderErrors.Add(1)
		p.leaderFails++
		switch r, n := p.leaderFailing.Fail(now); r {
		case retry.Entered:
			f.cfg.Logger.Warn("follower: fetch from the leader failed", "partition", tp, "from", from, "logEnd", p.leo,
				"cause", string(p.fallbackCause), "err", err)
		case retry.Still:
			f.cfg.Logger.Warn("follower: fetches from the leader still failing", "partition", tp, "logEnd", p.leo,
				"failed", n, "for", now.Sub(p.leaderFailing.Since()).Round(time.Millisecond), "cause", string(p.fallbackCause), "err", err)
		}
		p.fallbackRetryAt = now.Add(f.backoff(p.leaderFails))
		return
	}
	p.leaderFails = 0
	if r, n, d := p.leaderFailing.OK(now); r == retry.Left {
		f.cfg.Logger.Info("follower: fetch from the leader works again", "partition", tp, "failed", n, "after", d.Round(time.Millisecond))
	}
	f.cfg.Logger.Debug("follower: fetched from the leader", "partition", tp, "from", info.FirstOffset,
		"last", info.LastOffset, "bytes", len(data), "cause", string(p.fallbackCause))
	f.advanced(p, info, info.LastMaxTimestamp, now)
	f.applyReady(p, now)
}

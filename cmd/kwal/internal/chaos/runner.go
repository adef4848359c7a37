package chaos

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/cmd/kwal/internal/audit"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// The runners.
const (
	// RunnerInProcess runs the brokers in this process (localcluster).
	RunnerInProcess = "inprocess"
	// RunnerProcess runs `kwal broker` processes, versitygw and loopback
	// proxies (process.go).
	RunnerProcess = "process"
)

// Config is one run.
type Config struct {
	Seed uint64
	// Runner is RunnerInProcess (default) or RunnerProcess.
	Runner string
	// KwalBinary is the kwal executable the process runner starts as
	// `kwal broker`; default this executable (right for `kwal chaos`).
	KwalBinary string
	// VersitygwBinary is versitygw for the process runner; default
	// procs.FindVersitygw.
	VersitygwBinary string
	// Dir holds the cluster's logs and object store.
	Dir string
	// Racks has one entry per broker; default az1, az2, az2.
	Racks []string
	// Length is how long the workload runs with faults; default 1 s in
	// process (every timeout scales with it: see SessionTimeout), 10 s
	// across processes.
	Length time.Duration
	// Kinds of faults; default AllKinds.
	Kinds []Kind
	// SessionTimeout is broker.session.timeout.ms; default 2 s across
	// processes, and in process 4/15 of Length (800 ms for 3 s), so that
	// the whole schedule's time scales with Length: heartbeats (an eighth
	// of it), replica.lag.time.max.ms (equal), the leader-imbalance check
	// (5/4 of it), pauses (at least 1.5 times as long) and every fault's
	// length (a fraction of Length).
	SessionTimeout time.Duration
	// UploadTimeout bounds the combiner's attempts at one object; 0 keeps
	// the combiner's default (one minute, longer than any fault). Shorter
	// than the store outages (e.g. 400 ms), schedules reach the path where
	// the write path gives up and resubmits. In process only: no broker
	// key sets it.
	UploadTimeout time.Duration
	// SendInterval is how often each producer sends a record; default 2 ms.
	SendInterval time.Duration
	// Settle bounds the wait, after the faults, for the replicas to
	// converge and for the consumers to read; default 45 s.
	Settle time.Duration
	// StrictFailoverGaps fails a run for each Report.FailoverGaps entry
	// (a known open bug; reported either way).
	StrictFailoverGaps bool
	Logger             *slog.Logger
	// tweakBroker, if set, adjusts each in-process broker's config: the
	// self-test plants bugs with it (runner_test.go).
	tweakBroker func(*broker.Config)
}

func (c *Config) fill() {
	if c.Runner == "" {
		c.Runner = RunnerInProcess
	}
	if len(c.Racks) == 0 {
		c.Racks = []string{"az1", "az2", "az2"}
	}
	if c.Length <= 0 {
		c.Length = c.defaultLength()
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = max(c.Length*4/15, 100*time.Millisecond)
		if c.Runner == RunnerProcess {
			c.SessionTimeout = 2 * time.Second
		}
	}
	if c.SendInterval <= 0 {
		c.SendInterval = 2 * time.Millisecond
	}
	if c.Settle <= 0 {
		c.Settle = 45 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// ScheduleOptions are the schedule options a Config implies.
func (c Config) ScheduleOptions() Options {
	c.fill()
	return Options{Racks: c.Racks, Length: c.Length, Kinds: c.Kinds,
		MinFault: c.Length / 10, MaxFault: c.Length / 3, MaxGap: c.Length / 8,
		Pause: c.SessionTimeout * 3 / 2}
}

func (c Config) defaultLength() time.Duration {
	if c.Runner == RunnerProcess {
		return 10 * time.Second
	}
	return time.Second
}

// Report is the outcome of one run.
type Report struct {
	cfg      Config
	hist     History
	Schedule Schedule
	Check    Result
	// Replicas is the number of follower replicas compared with their
	// leader over the common prefix.
	Replicas int
	// Failures are the broken invariants: the checker's violations, then
	// the replica and audit checks.
	Failures []string
	// AuditObjects and Orphans count the store's WAL objects and those no
	// metadata references (ambiguous PUTs leave them; the orphan collector
	// deletes them after its grace: reported, not failed).
	AuditObjects, Orphans int
	StoreFaults           int64
	// FailoverGaps are remotewal ranges a leader change left out of the
	// store for good (see covered): a known open bug, reported and not
	// failed unless Config.StrictFailoverGaps.
	FailoverGaps []string
	// DuplicateEvents counts object events published more than once
	// (reported, not failed: see readMetadata).
	DuplicateEvents int
	// ReadsDuringFaults counts the records consumers read while faults ran.
	ReadsDuringFaults int
	// Warnings counts the cluster's WARN-or-worse log lines.
	Warnings int
	Wall     time.Duration
	// Phases is where Wall went, in the order the phases ran.
	Phases []Phase
}

// Phase is one step of a run and how long it took.
type Phase struct {
	Name string
	Took time.Duration
}

// phases times the steps of a run.
type phases struct {
	last time.Time
	out  *[]Phase
}

func (p *phases) mark(name string) {
	now := time.Now()
	*p.out = append(*p.out, Phase{name, now.Sub(p.last)})
	p.last = now
}

// PhaseString prints the phases on one line.
func (r *Report) PhaseString() string {
	var b strings.Builder
	for i, p := range r.Phases {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %v", p.Name, p.Took.Round(time.Millisecond))
	}
	return b.String()
}

// OK says every invariant held.
func (r *Report) OK() bool { return len(r.Failures) == 0 }

// ReplayCommand is the one command that replays this run.
func (r *Report) ReplayCommand() string {
	cmd := fmt.Sprintf("go run ./cmd/kwal chaos --seed %d", r.Schedule.Seed)
	if r.cfg.Runner != RunnerInProcess {
		cmd += " --runner " + r.cfg.Runner
	}
	if r.cfg.Length != r.cfg.defaultLength() {
		cmd += " --length " + r.cfg.Length.String()
	}
	if r.cfg.UploadTimeout != 0 {
		cmd += " --upload-timeout " + r.cfg.UploadTimeout.String()
	}
	if !r.cfg.StrictFailoverGaps { // kwal chaos is strict by default
		cmd += " --strict-failover-gaps=false"
	}
	if len(r.cfg.Kinds) > 0 {
		var ks []string
		for _, k := range r.cfg.Kinds {
			ks = append(ks, string(k))
		}
		cmd += " --kinds " + strings.Join(ks, ",")
	}
	return cmd
}

// Summary prints the run; a failing one with its schedule, first broken
// invariant and replay command.
func (r *Report) Summary() string {
	var b strings.Builder
	status := "ok"
	if !r.OK() {
		status = "FAILED"
	}
	fmt.Fprintf(&b, "seed %d %s in %v (%s): %d faults; %s (%d during the faults); %d follower replicas identical; %d WAL objects, %d orphans, %d object events published twice; %d store faults injected; %d WARN+ log lines\n",
		r.Schedule.Seed, status, r.Wall.Round(time.Millisecond), r.cfg.Runner, len(r.Schedule.Events), r.Check, r.ReadsDuringFaults, r.Replicas, r.AuditObjects, r.Orphans, r.DuplicateEvents, r.StoreFaults, r.Warnings)
	for _, g := range r.FailoverGaps {
		fmt.Fprintf(&b, "  remote WAL gap left by a leader change (an invariant break unless --strict-failover-gaps=false): %s\n", g)
	}
	if !r.OK() {
		b.WriteString(r.Schedule.String())
		fmt.Fprintf(&b, "first broken invariant: %s\n", r.Failures[0])
		for _, f := range r.Failures[1:min(len(r.Failures), 6)] {
			fmt.Fprintf(&b, "  then: %s\n", f)
		}
		if len(r.Failures) > 6 {
			fmt.Fprintf(&b, "  (%d more)\n", len(r.Failures)-6)
		}
		fmt.Fprintf(&b, "replay: %s (the schedule replays exactly, the timing does not: rerun a few times)\n", r.ReplayCommand())
	}
	return b.String()
}

// Topics the workload writes: one per replication mode.
var Topics = []string{"classic", "remotewal"}

const partitions = 2

// cluster is what a runner drives: the in-process one (inprocess.go) or
// the multi-process one (process.go).
type cluster interface {
	// clientOpts seed a Kafka client of the workload (and give it a dialer
	// where the brokers' addresses need one).
	clientOpts() []kgo.Opt
	// start starts fault e and returns what ends it.
	start(e Event) (undo func())
	// converge waits until every partition has a leader and every replica
	// holds its high watermark, and returns the high watermarks.
	converge(ctx context.Context, deadline time.Time) (map[broker.TopicPartition]int64, error)
	metadataBootstrap() []string
	// auditStores are the stores to audit, by store id ("" for the one
	// shared store, else by rack), without fault decorators.
	auditStores() map[string]objstore.Store
	storeFaults() int64
	// compareReplicas checks that the replica logs are byte-identical over
	// their common offsets and hold the high watermarks; it may stop the
	// cluster (the process runner reads the log files of stopped brokers).
	compareReplicas(hws map[broker.TopicPartition]int64) (int, error)
	// logFloods reports log floods the runner's logger did not see (the
	// brokers' own log files), and their WARN-or-worse line count.
	logFloods(elapsed time.Duration) ([]string, int)
	close()
}

// Run runs the schedule of cfg.Seed against a new cluster of cfg.Runner
// and checks the history. The error is for a run that could not be
// carried out (the cluster did not start); broken invariants are in the
// Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.fill()
	counter := newLogCounter(cfg.Logger.Handler())
	cfg.Logger = slog.New(counter)
	start := time.Now()
	rep := &Report{cfg: cfg, Schedule: Generate(cfg.Seed, cfg.ScheduleOptions())}
	ph := phases{last: start, out: &rep.Phases}
	var (
		c   cluster
		err error
	)
	switch cfg.Runner {
	case RunnerInProcess:
		c, err = startInProcess(ctx, cfg)
	case RunnerProcess:
		c, err = startProcesses(ctx, cfg)
	default:
		return nil, fmt.Errorf("chaos: unknown runner %q (known: %s, %s)", cfg.Runner, RunnerInProcess, RunnerProcess)
	}
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			c.close()
		}
	}()
	ph.mark("start")

	h := &rep.hist
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	producers := []struct {
		name    string
		acksAll bool
	}{{"idem-a", true}, {"idem-b", true}, {"acks1", false}}
	var perr []error
	var stuck []string
	var perrMu sync.Mutex
	for _, p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := produce(wctx, c, cfg, p.name, p.acksAll, h, outcomeWait)
			perrMu.Lock()
			defer perrMu.Unlock()
			if err != nil {
				perr = append(perr, err)
			}
			if s != "" {
				stuck = append(stuck, s)
			}
		}()
	}
	// Consumers in both racks read from the start, during the faults.
	var readers []*reader
	for _, rack := range uniq(cfg.Racks) {
		rd, err := startReader(ctx, c, "consumer-"+rack, rack, h)
		if err != nil {
			stopWork()
			wg.Wait()
			for _, r := range readers {
				r.abort()
			}
			return nil, err
		}
		readers = append(readers, rd)
	}
	ph.mark("clients")
	inject(ctx, cfg, c, rep.Schedule)
	_, duringFaults := h.Snapshot()
	rep.ReadsDuringFaults = len(duringFaults)
	ph.mark("faults")
	stopWork()
	wg.Wait()
	ph.mark("outcomes")
	if err := errors.Join(perr...); err != nil {
		for _, r := range readers {
			r.abort()
		}
		return nil, err
	}
	rep.Failures = append(rep.Failures, stuck...)
	rep.StoreFaults = c.storeFaults()

	deadline := time.Now().Add(cfg.Settle)
	hws, err := c.converge(ctx, deadline)
	if err != nil {
		rep.Failures = append(rep.Failures, err.Error())
	}
	ph.mark("converge")
	var stalls []Stall
	for _, rd := range readers {
		st, err := rd.finish(hws, deadline, cfg.Settle)
		if err != nil {
			rep.Failures = append(rep.Failures, err.Error())
		}
		stalls = append(stalls, st...)
	}
	ph.mark("read")
	sends, reads := h.Snapshot()
	rep.Check = Check(sends, reads, stalls...)
	var vs []string
	for _, v := range rep.Check.Violations {
		vs = append(vs, v.String())
	}
	rep.Failures = append(vs, rep.Failures...)
	ph.mark("check")
	rep.Failures = append(rep.Failures, healAndAudit(ctx, c, cfg, hws, deadline, rep)...)
	ph.mark("heal+audit")
	if cfg.StrictFailoverGaps {
		for _, g := range rep.FailoverGaps {
			rep.Failures = append(rep.Failures, "remote WAL gap left by a leader change: "+g)
		}
	}
	if n, err := c.compareReplicas(hws); err != nil {
		rep.Failures = append(rep.Failures, err.Error())
	} else {
		rep.Replicas = n
	}
	ph.mark("replicas")
	floods, warns := counter.floods(time.Since(start))
	pf, pw := c.logFloods(time.Since(start))
	rep.Failures = append(append(rep.Failures, floods...), pf...)
	rep.Warnings = warns + pw
	c.close()
	closed = true
	ph.mark("close")
	rep.Wall = time.Since(start)
	return rep, nil
}

func uniq(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func tps() []broker.TopicPartition {
	var out []broker.TopicPartition
	for _, t := range Topics {
		for p := range int32(partitions) {
			out = append(out, broker.TopicPartition{Topic: t, Partition: p})
		}
	}
	return out
}

// poll calls ready every 10 ms until it is true or deadline passes. The
// runner drives a real cluster with real clients on the real clock, so
// convergence is observed, not scheduled.
func poll(ctx context.Context, deadline time.Time, ready func() bool) bool {
	for !ready() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

// inject applies the schedule's faults at their times and undoes each when
// it ends; it returns once every fault has ended. Each lane runs on its own
// goroutine: faults of one lane never overlap, those of different lanes
// touch different parts, and a slow undo (a broker that cannot start
// again while the metadata Kafka is down) must not hold back the end of a
// fault of another lane (that very outage).
func inject(ctx context.Context, cfg Config, c cluster, s Schedule) {
	begin := time.Now()
	byLane := map[int][]Event{}
	for _, e := range s.Events {
		byLane[e.Kind.lane()] = append(byLane[e.Kind.lane()], e)
	}
	wait := func(at time.Duration) {
		if d := at - time.Since(begin); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
	}
	var wg sync.WaitGroup
	for _, events := range byLane {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, e := range events {
				wait(e.At)
				cfg.Logger.Info("chaos: fault starts", "fault", e.String())
				undo := c.start(e)
				wait(e.At + e.For)
				cfg.Logger.Info("chaos: fault ends", "fault", e.String())
				undo() // faults are undone even when ctx is done
			}
		}()
	}
	wg.Wait()
	wait(cfg.Length)
}

// The producers' delivery and request timeouts, and how long after the
// workload stops a producer waits for the outcomes of its records: the
// client fails a record past its delivery timeout, but an idempotent
// producer keeps one it sent and got no answer for until it learns its
// fate, which a client that reaches no broker (every address it knows
// dead) never does, so the wait is bounded here.
const (
	recordDeliveryTimeout = 8 * time.Second
	produceRequestTimeout = 3 * time.Second
	outcomeWait           = recordDeliveryTimeout + produceRequestTimeout + 5*time.Second
)

// produce sends one record every SendInterval, round-robin over every
// topic partition, until ctx is done, then waits for every outcome, at
// most wait: past it, it closes the client, which fails what it holds
// (outcome unknown), and stuck says so.
func produce(ctx context.Context, c cluster, cfg Config, name string, acksAll bool, h *History, wait time.Duration) (stuck string, err error) {
	opts := append(c.clientOpts(),
		kgo.ClientID(name),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(recordDeliveryTimeout),
		kgo.ProduceRequestTimeout(produceRequestTimeout),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(50*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.MaxBufferedRecords(2000),
		// The workload's clients push no KIP-714 metrics: encoding them
		// was 3 % of a schedule's CPU, and no check reads them.
		kgo.DisableClientMetrics(),
	)
	if !acksAll {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return "", fmt.Errorf("chaos: producer %s: %w", name, err)
	}
	closed := false
	defer func() {
		if !closed {
			cl.Close()
		}
	}()
	tps := tps()
	seqs := make([]int64, len(tps))
	t := time.NewTicker(cfg.SendInterval)
	defer t.Stop()
	var wg sync.WaitGroup
	var pending atomic.Int64
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
		case <-t.C:
			k := i % len(tps)
			tp := tps[k]
			s := Send{Producer: name, AcksAll: acksAll, Topic: tp.Topic, Partition: tp.Partition, Seq: seqs[k],
				Value: fmt.Sprintf("%s/%s-%d/%d", name, tp.Topic, tp.Partition, seqs[k])}
			seqs[k]++
			wg.Add(1)
			pending.Add(1)
			// The producing context is not ctx: stopping the workload
			// must not cancel records already handed over.
			cl.Produce(context.Background(), &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(s.Value)},
				func(rec *kgo.Record, err error) {
					defer wg.Done()
					defer pending.Add(-1)
					if err != nil {
						s.Outcome, s.Err = Unknown, err.Error()
					} else {
						s.Outcome, s.Offset = Acked, rec.Offset
					}
					h.AddSend(s)
				})
			continue
		}
		break
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t2 := time.NewTimer(wait)
	defer t2.Stop()
	select {
	case <-done:
		return "", nil
	case <-t2.C:
	}
	n := pending.Load()
	cfg.Logger.Warn("chaos: producer outcomes missing; closing the client", "producer", name, "records", n, "waited", wait)
	cl.Close() // fails every record it holds: their callbacks run
	closed = true
	<-done
	return fmt.Sprintf("produced: %s had %d records without an outcome %v after the workload stopped (its client got no answer); closed, they count as unknown",
		name, n, wait), nil
}

// reader is a consumer in one rack (fetching from a follower there when
// the leader says so) that reads every partition from its start while the
// faults run, and on to the high watermarks after them.
type reader struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	kick   context.CancelFunc // ends the poll in progress once hws is set
	hws    atomic.Pointer[map[broker.TopicPartition]int64]
	done   chan struct{}
	// next is the offset after the last record read, per partition:
	// the reading goroutine's until done is closed.
	next map[broker.TopicPartition]int64
}

func startReader(ctx context.Context, c cluster, name, rack string, h *History) (*reader, error) {
	offsets := map[string]map[int32]kgo.Offset{}
	for _, tp := range tps() {
		if offsets[tp.Topic] == nil {
			offsets[tp.Topic] = map[int32]kgo.Offset{}
		}
		offsets[tp.Topic][tp.Partition] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(c.clientOpts(), kgo.ClientID(name), kgo.Rack(rack),
		kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(100*time.Millisecond), kgo.DisableClientMetrics(),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(time.Second))...)
	if err != nil {
		return nil, fmt.Errorf("chaos: consumer %s: %w", name, err)
	}
	rctx, cancel := context.WithCancel(ctx)
	kctx, kick := context.WithCancel(rctx)
	rd := &reader{name: name, cl: cl, cancel: cancel, kick: kick, done: make(chan struct{}), next: map[broker.TopicPartition]int64{}}
	go func() {
		defer close(rd.done)
		next := rd.next
		for rctx.Err() == nil {
			if hws := rd.hws.Load(); hws != nil && reached(*hws, next) {
				return
			}
			// A poll that waits for records ends when finish has
			// told the high watermarks (kick), so a reader already at
			// them says so at once rather than at the poll's timeout.
			base := kctx
			if kctx.Err() != nil {
				base = rctx
			}
			pctx, pcancel := context.WithTimeout(base, 250*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(rec *kgo.Record) {
				tp := broker.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
				h.AddRead(Read{Consumer: name, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Value: string(rec.Value)})
				next[tp] = max(next[tp], rec.Offset+1)
			})
		}
	}()
	return rd, nil
}

func reached(hws, next map[broker.TopicPartition]int64) bool {
	for tp, hw := range hws {
		if next[tp] < hw {
			return false
		}
	}
	return true
}

// finish tells the reader the high watermarks and waits until it has read
// to them, or deadline. If it has not, the error names where it stopped,
// and stalls has a Stall for each partition it did not read to the end.
func (rd *reader) finish(hws map[broker.TopicPartition]int64, deadline time.Time, settle time.Duration) (stalls []Stall, err error) {
	rd.hws.Store(&hws)
	rd.kick()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-rd.done:
		rd.abort()
		return nil, nil
	case <-t.C:
	}
	rd.abort() // the reading goroutine has ended: next is ours
	var at []string
	for _, tp := range tps() {
		hw, ok := hws[tp]
		if !ok || rd.next[tp] >= hw {
			continue
		}
		stalls = append(stalls, Stall{Consumer: rd.name, Topic: tp.Topic, Partition: tp.Partition, Next: rd.next[tp], HW: hw})
		at = append(at, fmt.Sprintf("%s-%d at %d of %d", tp.Topic, tp.Partition, rd.next[tp], hw))
	}
	return stalls, fmt.Errorf("consumed: %s did not read to the high watermarks within %v (%s): the records it did not reach are reported unread, not lost",
		rd.name, settle, strings.Join(at, ", "))
}

func (rd *reader) abort() {
	rd.cancel()
	<-rd.done
	rd.cl.Close()
}

// sameLogs compares a and b batch by batch from the later log start to
// the earlier log end.
func sameLogs(a, b *kafkalog.Log) error {
	from := max(a.LogStartOffset(), b.LogStartOffset())
	to := min(a.LogEndOffset(), b.LogEndOffset())
	for from < to {
		x, err1 := a.Read(from, 1<<20)
		y, err2 := b.Read(from, 1<<20)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("reading at %d: %w", from, err)
		}
		n := min(len(x), len(y))
		if n == 0 {
			return fmt.Errorf("nothing to read at %d (end %d)", from, to)
		}
		if !bytes.Equal(x[:n], y[:n]) {
			return fmt.Errorf("bytes differ in the batches read from offset %d", from)
		}
		next, ok := endOfBatches(x[:n])
		if !ok || next <= from {
			return fmt.Errorf("no whole batch at offset %d", from)
		}
		from = next
	}
	return nil
}

// endOfBatches returns the offset after the last whole record batch in b
// (base offset at 0, batch length at 8, last offset delta at 23).
func endOfBatches(b []byte) (int64, bool) {
	var next int64
	ok := false
	for len(b) >= 61 {
		size := int(binary.BigEndian.Uint32(b[8:12])) + 12
		if size > len(b) || size < 61 {
			break
		}
		next = int64(binary.BigEndian.Uint64(b[0:8])) + int64(binary.BigEndian.Uint32(b[23:27])) + 1
		ok = true
		b = b[size:]
	}
	return next, ok
}

// readMetadata reads the whole metadata topic into a new state and checks
// invariant 4 on the way: within one metadata partition, the entries of
// one partition and leader epoch are published in offset order, without
// overlap.
//
// An object's event published again (a publish retried after its ctx
// ended while the first record was still in flight, as when the metadata
// Kafka is down) is counted in dups, not checked for order: it names the
// same durable object, and followers apply its slices once (invariant 3).
func readMetadata(ctx context.Context, c cluster, log *slog.Logger) (_ *metadata.State, bad []string, dups int, _ error) {
	st := metadata.NewState()
	type key struct {
		mp    int32
		tp    metadata.TopicPartition
		epoch int32
	}
	type seen struct {
		end    int64
		key    string
		broker int32
		at     int64
	}
	last := map[key]seen{}
	published := map[string]bool{}
	err := metadata.ReadTopic(ctx, metadata.TopicConfig{Bootstrap: c.metadataBootstrap()}, log, func(tr metadata.TopicRecord) error {
		if tr.Err != nil {
			bad = append(bad, fmt.Sprintf("metadata: undecodable record at %d/%d: %v", tr.Partition, tr.Offset, tr.Err))
			return nil
		}
		om, ok := tr.Event.(*metadata.ObjectMetadata)
		if ok && om.State == metadata.CopySegmentFinished && published[om.Key] {
			dups++
		} else if ok && om.State == metadata.CopySegmentFinished {
			published[om.Key] = true
			for _, e := range om.Entries {
				k := key{tr.Partition, e.TopicPartition, e.LeaderEpoch}
				prev, ok := last[k]
				if ok && e.BaseOffset <= prev.end {
					bad = append(bad, fmt.Sprintf("metadata order (invariant 4): %s epoch %d entry [%d,%d] of %s (broker %d, at %d/%d) published after one ending at %d (%s, broker %d, at %d/%d)",
						e.TopicPartition, e.LeaderEpoch, e.BaseOffset, e.LastOffset, om.Key, om.BrokerID, tr.Partition, tr.Offset, prev.end, prev.key, prev.broker, tr.Partition, prev.at))
				}
				if !ok || e.LastOffset > prev.end {
					last[k] = seen{e.LastOffset, om.Key, om.BrokerID, tr.Offset}
				}
			}
		}
		if err := st.Apply(tr.Event); err != nil {
			bad = append(bad, fmt.Sprintf("metadata: event at %d/%d refused by the state machine: %v", tr.Partition, tr.Offset, err))
		}
		return nil
	})
	return st, bad, dups, err
}

// covered returns the remotewal partitions whose live slices do not reach
// their high watermark: the write path has not healed and followers read
// from the leader instead of the store. It returns apart, in gaps, the
// partitions whose store ends with an older leader epoch's slices short
// of where the next epoch began, at or past the high watermark: the range
// between was appended by the old leader, never uploaded, and a new leader
// starts its uploads at its log end (the open bug FailoverGaps reports).
func covered(st *metadata.State, hws map[broker.TopicPartition]int64) (short, gaps []string) {
	for tp, hw := range hws {
		if tp.Topic != "remotewal" || hw == 0 {
			continue
		}
		mtp := metadata.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
		end, epoch := int64(-1), int32(-1)
		for _, sl := range st.Slices(mtp, 0) {
			if from, dead := st.DeadFrom(mtp, sl.LeaderEpoch); dead && sl.LastOffset >= from {
				continue
			}
			if sl.LastOffset > end {
				end, epoch = sl.LastOffset, sl.LeaderEpoch
			}
		}
		if end >= hw-1 {
			continue
		}
		// The newest epoch's start, not the next one's: leaders of the
		// epochs between may have appended nothing (seed 652: epoch 2
		// began at 275, right after the last slice, and lasted 170 ms;
		// epoch 1's leader, still holding [275, 413), led again from
		// epoch 3 on and uploaded from its log end, 413).
		if next, ok := st.DeadFrom(mtp, epoch); ok && end >= 0 {
			newest := newestEpochStart(st, mtp)
			if newest > end+1 && newest >= hw {
				gaps = append(gaps, fmt.Sprintf("%s: offsets [%d, %d) of leader epochs before the newest were never uploaded; the next epoch after %d began at %d, the newest at %d (high watermark %d)",
					tp, end+1, newest, epoch, next, newest, hw))
				continue
			}
		}
		short = append(short, fmt.Sprintf("%s: objects reach offset %d, high watermark %d", tp, end, hw))
	}
	sort.Strings(short)
	sort.Strings(gaps)
	return short, gaps
}

// newestEpochStart returns where tp's newest leader epoch with a dead
// range began (its leader's log end when it took over), or -1.
func newestEpochStart(st *metadata.State, tp metadata.TopicPartition) int64 {
	drs := st.DeadRanges(tp)
	if len(drs) == 0 {
		return -1
	}
	return drs[len(drs)-1].StartOffset
}

// healAndAudit waits until the store's objects cover every remotewal
// partition to its high watermark, checks the metadata's order, and audits
// the store against it: a missing object, a mismatched or corrupt one
// fails; orphans are counted.
func healAndAudit(ctx context.Context, c cluster, cfg Config, hws map[broker.TopicPartition]int64, deadline time.Time, rep *Report) []string {
	actx, cancel := context.WithDeadline(ctx, deadline.Add(30*time.Second))
	defer cancel()
	var (
		st          *metadata.State
		bad         []string
		short, gaps []string
		err         error
		gapsSince   time.Time
	)
	poll(actx, deadline, func() bool {
		st, bad, rep.DuplicateEvents, err = readMetadata(actx, c, cfg.Logger)
		if err != nil {
			return false
		}
		short, gaps = covered(st, hws)
		switch {
		case len(short) > 0:
			gapsSince = time.Time{}
			return false
		case len(gaps) == 0:
			return true
		case gapsSince.IsZero():
			gapsSince = time.Now()
		}
		// Only a deposed leader still running could fill a gap: give it a
		// few seconds, not the whole settle time.
		return time.Since(gapsSince) > 5*time.Second
	})
	rep.FailoverGaps = gaps
	if err != nil {
		return []string{fmt.Sprintf("audit: reading the metadata: %v", err)}
	}
	if len(short) > 0 {
		bad = append(bad, fmt.Sprintf("remote WAL did not heal within %v after the faults: %s", cfg.Settle, strings.Join(short, "; ")))
	}
	stores := c.auditStores()
	ids := slices.Sorted(maps.Keys(stores))
	for _, id := range ids {
		ar, err := audit.Run(actx, audit.Config{Store: stores[id], StoreID: id, Metadata: st, VerifySlices: true, Logger: cfg.Logger})
		if err != nil {
			bad = append(bad, fmt.Sprintf("audit of store %q: %v", id, err))
			continue
		}
		rep.AuditObjects += ar.Objects
		for _, f := range ar.Findings {
			if f.Kind == audit.Orphan {
				rep.Orphans++
				continue
			}
			bad = append(bad, fmt.Sprintf("audit of store %q: %s %s: %s", id, f.Kind, f.Key, f.Detail))
		}
	}
	return bad
}

package chaos

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/cmd/kwal/internal/audit"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/localcluster"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// Config is one in-process run.
type Config struct {
	Seed uint64
	// Dir holds the cluster's logs and object store.
	Dir string
	// Racks has one entry per broker; default az1, az2, az2.
	Racks []string
	// Length is how long the workload runs with faults; default 3 s.
	Length time.Duration
	// Kinds of faults; default AllKinds.
	Kinds []Kind
	// SessionTimeout is broker.session.timeout.ms; default 800 ms. Pauses
	// last at least 1.5 times as long.
	SessionTimeout time.Duration
	// UploadTimeout bounds the combiner's attempts at one object; 0 keeps
	// the combiner's default (one minute, longer than any fault). Shorter
	// than the store outages (e.g. 400 ms), schedules reach the path where
	// the write path gives up and resubmits.
	UploadTimeout time.Duration
	// SendInterval is how often each producer sends a record; default 2 ms.
	SendInterval time.Duration
	// Settle bounds the wait, after the faults, for the replicas to
	// converge and for the consumers to read; default 45 s.
	Settle time.Duration
	Logger *slog.Logger
}

func (c *Config) fill() {
	if len(c.Racks) == 0 {
		c.Racks = []string{"az1", "az2", "az2"}
	}
	if c.Length <= 0 {
		c.Length = defaultLength
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 800 * time.Millisecond
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

const defaultLength = 3 * time.Second

// Report is the outcome of one run.
type Report struct {
	cfg      Config
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
	// Warnings counts the cluster's WARN-or-worse log lines.
	Warnings int
	Wall     time.Duration
}

// OK says every invariant held.
func (r *Report) OK() bool { return len(r.Failures) == 0 }

// ReplayCommand is the one command that replays this run.
func (r *Report) ReplayCommand() string {
	cmd := fmt.Sprintf("go run ./cmd/kwal chaos --seed %d", r.Schedule.Seed)
	if r.cfg.Length != defaultLength {
		cmd += " --length " + r.cfg.Length.String()
	}
	if r.cfg.UploadTimeout != 0 {
		cmd += " --upload-timeout " + r.cfg.UploadTimeout.String()
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
	fmt.Fprintf(&b, "seed %d %s in %v: %d faults; %s; %d follower replicas identical; %d WAL objects, %d orphans; %d store faults injected; %d WARN+ log lines\n",
		r.Schedule.Seed, status, r.Wall.Round(time.Millisecond), len(r.Schedule.Events), r.Check, r.Replicas, r.AuditObjects, r.Orphans, r.StoreFaults, r.Warnings)
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

// run holds one run's cluster and fault state.
type run struct {
	cfg   Config
	log   *slog.Logger
	lc    *localcluster.Cluster
	net   *Network
	store *StoreSwitch
	ctrls map[int32]*PausableController
}

// Run runs the schedule of cfg.Seed against a new in-process cluster and
// checks the history. The error is for a run that could not be carried
// out (the cluster did not start); broken invariants are in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.fill()
	counter := newLogCounter(cfg.Logger.Handler())
	cfg.Logger = slog.New(counter)
	start := time.Now()
	rep := &Report{cfg: cfg, Schedule: Generate(cfg.Seed, cfg.ScheduleOptions())}
	r := &run{cfg: cfg, log: cfg.Logger, ctrls: map[int32]*PausableController{}}
	racks := map[int32]string{}
	for i, rack := range cfg.Racks {
		racks[int32(i+1)] = rack
	}
	// Addresses resolve through the controller's registrations: a
	// restarted broker listens on a new port, and others learn it from
	// there before RestartBroker returns.
	var ctrl *broker.MemController
	r.net = NewNetwork(racks, func(addr string) (int32, bool) {
		if ctrl == nil {
			return 0, false
		}
		for _, b := range ctrl.Brokers() {
			if net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) == addr {
				return b.ID, true
			}
		}
		return 0, false
	})
	heartbeat := cfg.SessionTimeout / 8
	lc, err := localcluster.Start(ctx, localcluster.Config{
		Racks: cfg.Racks, Dir: cfg.Dir, LatencyModel: "none", Logger: cfg.Logger,
		RemoteWAL: broker.RemoteWALConfig{CombinerTaskInterval: 5 * time.Millisecond, UploadTimeout: cfg.UploadTimeout},
		WrapStore: func(s objstore.Store) objstore.Store {
			sw, err := NewStoreSwitch(s, cfg.Seed)
			if err != nil {
				panic(err) // the rules are constants
			}
			r.store = sw
			return sw
		},
		Tweak: func(bc *broker.Config) {
			ctrl = bc.Controller.(*broker.MemController)
			pc := &PausableController{Controller: bc.Controller}
			r.ctrls[bc.BrokerID] = pc
			bc.Controller = pc
			bc.Dial = r.net.Dialer(bc.BrokerID)
			bc.BrokerHeartbeatInterval = heartbeat
			bc.BrokerSessionTimeout = cfg.SessionTimeout
			bc.LeaderImbalanceCheckInterval = time.Second
			bc.ReplicaLagTimeMax = cfg.SessionTimeout
			bc.ReplicaFetchWaitMax = 50 * time.Millisecond
			bc.ReplicaFetchBackoff = 20 * time.Millisecond
			bc.MinInsyncReplicas = 2
			bc.DefaultReplicationFactor = int16(len(cfg.Racks))
		},
		Liveness: &broker.LivenessConfig{SessionTimeout: cfg.SessionTimeout, Logger: cfg.Logger},
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: starting the cluster: %w", err)
	}
	r.lc = lc
	defer lc.Close()
	for _, t := range Topics {
		spec := broker.TopicSpec{Name: t, Partitions: partitions, ReplicationFactor: int16(len(cfg.Racks)),
			Configs: map[string]string{"min.insync.replicas": "2"}}
		if t == "remotewal" {
			spec.Configs[broker.TopicConfigRemoteWAL] = "true"
		}
		if _, err := lc.Controller.CreateTopic(spec); err != nil {
			return nil, fmt.Errorf("chaos: creating %s: %w", t, err)
		}
	}
	if err := r.waitLeaders(ctx); err != nil {
		return nil, err
	}

	var h History
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	producers := []struct {
		name    string
		acksAll bool
	}{{"idem-a", true}, {"idem-b", true}, {"acks1", false}}
	var perr []error
	var perrMu sync.Mutex
	for _, p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.produce(wctx, p.name, p.acksAll, &h); err != nil {
				perrMu.Lock()
				perr = append(perr, err)
				perrMu.Unlock()
			}
		}()
	}
	r.inject(ctx, rep.Schedule)
	stopWork()
	wg.Wait()
	if err := errors.Join(perr...); err != nil {
		return nil, err
	}
	rep.StoreFaults = r.store.Injected()

	deadline := time.Now().Add(cfg.Settle)
	hws, err := r.converge(ctx, deadline)
	if err != nil {
		rep.Failures = append(rep.Failures, err.Error())
	}
	for _, rack := range uniq(cfg.Racks) {
		if err := r.consume(ctx, "consumer-"+rack, rack, hws, deadline, &h); err != nil {
			rep.Failures = append(rep.Failures, err.Error())
		}
	}
	sends, reads := h.Snapshot()
	rep.Check = Check(sends, reads)
	var vs []string
	for _, v := range rep.Check.Violations {
		vs = append(vs, v.String())
	}
	rep.Failures = append(vs, rep.Failures...)
	if n, err := r.compareReplicas(); err != nil {
		rep.Failures = append(rep.Failures, err.Error())
	} else {
		rep.Replicas = n
	}
	rep.Failures = append(rep.Failures, r.healAndAudit(ctx, hws, deadline, rep)...)
	floods, warns := counter.floods(time.Since(start))
	rep.Failures = append(rep.Failures, floods...)
	rep.Warnings = warns
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

func (r *run) tps() []broker.TopicPartition {
	var out []broker.TopicPartition
	for _, t := range Topics {
		for p := range int32(partitions) {
			out = append(out, broker.TopicPartition{Topic: t, Partition: p})
		}
	}
	return out
}

// leader returns the broker leading tp as the controller says, if it runs
// and knows it leads.
func (r *run) leader(tp broker.TopicPartition) *broker.Broker {
	ts, ok := r.lc.Controller.Topic(tp.Topic)
	if !ok || int(tp.Partition) >= len(ts.Partitions) {
		return nil
	}
	b := r.lc.Broker(ts.Partitions[tp.Partition].Leader)
	if b == nil {
		return nil
	}
	if st, ok := b.PartitionStatus(tp); ok && st.IsLeader {
		return b
	}
	return nil
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

func (r *run) waitLeaders(ctx context.Context) error {
	if !poll(ctx, time.Now().Add(30*time.Second), func() bool {
		for _, tp := range r.tps() {
			if r.leader(tp) == nil {
				return false
			}
		}
		return true
	}) {
		return errors.New("chaos: partitions have no leaders 30 s after creation")
	}
	return nil
}

// inject applies the schedule's faults at their times and undoes each when
// it ends; it returns once every fault has ended.
func (r *run) inject(ctx context.Context, s Schedule) {
	type step struct {
		at    time.Duration
		apply func()
	}
	var steps []step
	for _, e := range s.Events {
		var undo func()
		steps = append(steps, step{e.At, func() {
			r.log.Info("chaos: fault starts", "fault", e.String())
			undo = r.start(e)
		}}, step{e.At + e.For, func() {
			r.log.Info("chaos: fault ends", "fault", e.String())
			undo()
		}})
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at < steps[j].at })
	begin := time.Now()
	for _, st := range steps {
		if d := st.at - time.Since(begin); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		st.apply() // faults are undone even when ctx is done
	}
	if d := r.cfg.Length - time.Since(begin); d > 0 && ctx.Err() == nil {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// start starts fault e and returns what ends it.
func (r *run) start(e Event) (undo func()) {
	switch e.Kind {
	case KillBroker:
		if err := r.lc.StopBroker(e.Broker); err != nil {
			r.log.Warn("chaos: kill", "broker", e.Broker, "err", err)
		}
		return func() {
			if err := r.lc.RestartBroker(e.Broker); err != nil {
				r.log.Error("chaos: restart", "broker", e.Broker, "err", err)
			}
		}
	case PauseBroker:
		r.ctrls[e.Broker].Paused.Store(true)
		heal := r.net.Cut(r.net.BrokerPairs(e.Broker))
		return func() {
			heal()
			r.ctrls[e.Broker].Paused.Store(false)
		}
	case PartitionPair:
		return r.net.Cut([][2]int32{{e.Broker, e.Peer}})
	case PartitionRack:
		return r.net.Cut(r.net.RackPairs(e.Rack))
	case StoreDown, StoreSlow, StoreSlowDown, AmbiguousPut:
		r.store.Set(e.Kind)
		return func() { r.store.Set("") }
	}
	panic(fmt.Sprintf("chaos: unknown fault kind %q", e.Kind))
}

// produce sends one record every SendInterval, round-robin over every
// topic partition, until ctx is done, then waits for every outcome.
func (r *run) produce(ctx context.Context, name string, acksAll bool, h *History) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(r.lc.Bootstrap()...),
		kgo.ClientID(name),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(8 * time.Second),
		kgo.ProduceRequestTimeout(3 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
		kgo.ProducerLinger(2 * time.Millisecond),
		kgo.MaxBufferedRecords(2000),
	}
	if !acksAll {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("chaos: producer %s: %w", name, err)
	}
	defer cl.Close()
	tps := r.tps()
	seqs := make([]int64, len(tps))
	t := time.NewTicker(r.cfg.SendInterval)
	defer t.Stop()
	var wg sync.WaitGroup
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
			// The producing context is not ctx: stopping the workload
			// must not cancel records already handed over.
			cl.Produce(context.Background(), &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(s.Value)},
				func(rec *kgo.Record, err error) {
					defer wg.Done()
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
	wg.Wait()
	return nil
}

// converge waits until every partition has a leader whose followers all
// hold its log end and whose high watermark is its log end, and returns
// the high watermarks.
func (r *run) converge(ctx context.Context, deadline time.Time) (map[broker.TopicPartition]int64, error) {
	hws := map[broker.TopicPartition]int64{}
	var why string
	ok := poll(ctx, deadline, func() bool {
		for _, tp := range r.tps() {
			l := r.leader(tp)
			if l == nil {
				why = fmt.Sprintf("%s has no leader", tp)
				return false
			}
			st, _ := l.PartitionStatus(tp)
			if st.HighWatermark != st.LogEnd {
				why = fmt.Sprintf("%s: high watermark %d, log end %d on leader %d", tp, st.HighWatermark, st.LogEnd, l.Info().ID)
				return false
			}
			for _, b := range r.lc.Brokers {
				if b == nil || b == l {
					continue
				}
				fs, ok := b.PartitionStatus(tp)
				if !ok || fs.LogEnd != st.LogEnd {
					why = fmt.Sprintf("%s: follower %d at %d, leader %d at %d", tp, b.Info().ID, fs.LogEnd, l.Info().ID, st.LogEnd)
					return false
				}
			}
			// Caught up is not enough: a replica that stays out of the
			// ISR (an unusable log dir, a leader that keeps proposing a
			// fenced replica) is a broker that looks healthy and is not.
			if ts, ok := r.lc.Controller.Topic(tp.Topic); ok {
				ps := ts.Partitions[tp.Partition]
				if len(ps.ISR) != len(ps.Replicas) {
					why = fmt.Sprintf("%s: ISR %v of replicas %v with every follower caught up", tp, ps.ISR, ps.Replicas)
					return false
				}
			}
			hws[tp] = st.HighWatermark
		}
		return true
	})
	if !ok {
		return hws, fmt.Errorf("converged: replicas did not converge within %v after the faults: %s", r.cfg.Settle, why)
	}
	return hws, nil
}

// consume reads every partition from its start to hws as a consumer in
// rack (fetching from a follower there when the leader says so).
func (r *run) consume(ctx context.Context, name, rack string, hws map[broker.TopicPartition]int64, deadline time.Time, h *History) error {
	offsets := map[string]map[int32]kgo.Offset{}
	left := map[broker.TopicPartition]bool{}
	for tp, hw := range hws {
		if offsets[tp.Topic] == nil {
			offsets[tp.Topic] = map[int32]kgo.Offset{}
		}
		offsets[tp.Topic][tp.Partition] = kgo.NewOffset().AtStart()
		if hw > 0 {
			left[tp] = true
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.lc.Bootstrap()...), kgo.ClientID(name), kgo.Rack(rack),
		kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("chaos: consumer %s: %w", name, err)
	}
	defer cl.Close()
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for len(left) > 0 {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			return fmt.Errorf("consumed: %s did not read to the high watermarks within %v: %d partitions short", name, r.cfg.Settle, len(left))
		}
		fs.EachRecord(func(rec *kgo.Record) {
			tp := broker.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
			if rec.Offset >= hws[tp] {
				return
			}
			h.AddRead(Read{Consumer: name, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Value: string(rec.Value)})
			if rec.Offset == hws[tp]-1 {
				delete(left, tp)
			}
		})
	}
	return nil
}

// compareReplicas checks that every follower's log is byte-identical to
// its leader's over their common offsets, batch by batch.
func (r *run) compareReplicas() (int, error) {
	n := 0
	for _, tp := range r.tps() {
		l := r.leader(tp)
		if l == nil {
			return n, fmt.Errorf("replicas: %s has no leader", tp)
		}
		ll, _ := l.PartitionLog(tp)
		for _, b := range r.lc.Brokers {
			if b == nil || b == l {
				continue
			}
			fl, ok := b.PartitionLog(tp)
			if !ok {
				continue
			}
			if err := sameLogs(ll, fl); err != nil {
				return n, fmt.Errorf("replicas: %s on broker %d differs from leader %d: %v", tp, b.Info().ID, l.Info().ID, err)
			}
			n++
		}
	}
	return n, nil
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
func (r *run) readMetadata(ctx context.Context) (*metadata.State, []string, error) {
	st := metadata.NewState()
	type key struct {
		mp    int32
		tp    metadata.TopicPartition
		epoch int32
	}
	last := map[key]int64{}
	var bad []string
	err := metadata.ReadTopic(ctx, metadata.TopicConfig{Bootstrap: r.lc.MetadataBootstrap()}, r.log, func(tr metadata.TopicRecord) error {
		if tr.Err != nil {
			bad = append(bad, fmt.Sprintf("metadata: undecodable record at %d/%d: %v", tr.Partition, tr.Offset, tr.Err))
			return nil
		}
		if om, ok := tr.Event.(*metadata.ObjectMetadata); ok && om.State == metadata.CopySegmentFinished {
			for _, e := range om.Entries {
				k := key{tr.Partition, e.TopicPartition, e.LeaderEpoch}
				if prev, ok := last[k]; ok && e.BaseOffset <= prev {
					bad = append(bad, fmt.Sprintf("metadata order (invariant 4): %s epoch %d entry [%d,%d] of %s published after one ending at %d",
						e.TopicPartition, e.LeaderEpoch, e.BaseOffset, e.LastOffset, om.Key, prev))
				}
				last[k] = max(last[k], e.LastOffset)
			}
		}
		if err := st.Apply(tr.Event); err != nil {
			bad = append(bad, fmt.Sprintf("metadata: event at %d/%d refused by the state machine: %v", tr.Partition, tr.Offset, err))
		}
		return nil
	})
	return st, bad, err
}

// covered returns the remotewal partitions whose live slices do not reach
// their high watermark: the write path has not healed and followers read
// from the leader instead of the store.
func covered(st *metadata.State, hws map[broker.TopicPartition]int64) []string {
	var short []string
	for tp, hw := range hws {
		if tp.Topic != "remotewal" || hw == 0 {
			continue
		}
		mtp := metadata.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
		end := int64(-1)
		for _, sl := range st.Slices(mtp, 0) {
			if from, dead := st.DeadFrom(mtp, sl.LeaderEpoch); dead && sl.LastOffset >= from {
				continue
			}
			end = max(end, sl.LastOffset)
		}
		if end < hw-1 {
			short = append(short, fmt.Sprintf("%s: objects reach offset %d, high watermark %d", tp, end, hw))
		}
	}
	sort.Strings(short)
	return short
}

// healAndAudit waits until the store's objects cover every remotewal
// partition to its high watermark, checks the metadata's order, and audits
// the store against it: a missing object, a mismatched or corrupt one
// fails; orphans are counted.
func (r *run) healAndAudit(ctx context.Context, hws map[broker.TopicPartition]int64, deadline time.Time, rep *Report) []string {
	actx, cancel := context.WithDeadline(ctx, deadline.Add(30*time.Second))
	defer cancel()
	var (
		st    *metadata.State
		bad   []string
		short []string
		err   error
	)
	poll(actx, deadline, func() bool {
		st, bad, err = r.readMetadata(actx)
		if err != nil {
			return false
		}
		short = covered(st, hws)
		return len(short) == 0
	})
	if err != nil {
		return []string{fmt.Sprintf("audit: reading the metadata: %v", err)}
	}
	if len(short) > 0 {
		bad = append(bad, fmt.Sprintf("remote WAL did not heal within %v after the faults: %s", r.cfg.Settle, strings.Join(short, "; ")))
	}
	ar, err := audit.Run(actx, audit.Config{Store: r.store.inner, Metadata: st, VerifySlices: true, Logger: r.log})
	if err != nil {
		return append(bad, fmt.Sprintf("audit: %v", err))
	}
	rep.AuditObjects = ar.Objects
	for _, f := range ar.Findings {
		if f.Kind == audit.Orphan {
			rep.Orphans++
			continue
		}
		bad = append(bad, fmt.Sprintf("audit: %s %s: %s", f.Kind, f.Key, f.Detail))
	}
	return bad
}

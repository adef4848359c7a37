package latbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/cost"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/localcluster"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/latency"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/objstore/mem"
)

// Timeouts that keep a broken run from hanging CI.
const (
	stepTimeout     = 5 * time.Minute
	catchUpTimeout  = 60 * time.Second
	warmupTimeout   = 30 * time.Second
	brokersForCost  = 3
	e2eMinBytes     = 1200 // E2E record sizes are uniform in [e2eMinBytes, e2eMaxBytes]: 1.6 KB on average
	e2eMaxBytes     = 2000
	e2eMaxBatch     = 32 << 10
	perfLinger      = 20 * time.Millisecond
	streamLinger    = 5 * time.Millisecond
	payloadHeader   = 16 // record index (8 B) and creation time in Unix ns (8 B)
	warmupValue     = "warmup"
	consumeMaxWait  = 100 * time.Millisecond
	catchUpInterval = 2 * time.Millisecond
)

// Run runs every phase of cfg's plan and returns the report. It writes
// nothing to cfg.OutDir (see Report.WriteFiles).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	book, err := cost.DefaultBook()
	if err != nil {
		return nil, err
	}
	model, err := cost.NewModel(book)
	if err != nil {
		return nil, err
	}
	sheet, err := book.Sheet(cfg.Sheet)
	if err != nil {
		return nil, err
	}
	lat, err := latency.Preset(cfg.LatencyModel)
	if err != nil {
		return nil, err
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "kwal-latbench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	phases := Plan(cfg)
	total := 0
	for _, p := range phases {
		total += len(p.Steps)
	}
	prog := newProgress(cfg.Progress, total)
	defer prog.stop()
	rep := &Report{
		Env:    currentEnv(),
		Config: reportConfig(cfg, lat, sheet, model),
		Phases: phases,
	}
	started := time.Now()
	for i, ph := range phases {
		pdir := filepath.Join(dir, fmt.Sprintf("phase-%d", i))
		runs, link, mem, err := runPhase(ctx, cfg, i, ph, pdir, prog, pricer{model: model, sheet: sheet})
		rep.Runs = append(rep.Runs, runs...)
		rep.Link = append(rep.Link, link)
		if mem != nil {
			rep.StoreMemory = append(rep.StoreMemory, *mem)
		}
		if err != nil {
			return rep, fmt.Errorf("latbench: phase %d (%v): %w", i, ph.Setting, err)
		}
		// Free the disk: the phase's logs and objects are not needed again.
		os.RemoveAll(pdir)
	}
	rep.Elapsed = time.Since(started)
	rep.Aggregate()
	return rep, nil
}

type pricer struct {
	model cost.Model
	sheet cost.Sheet
}

// phase is one running cluster and the clients' network.
type phase struct {
	cfg   Config
	index int
	set   Setting
	lc    *localcluster.Cluster
	net   *netModel
	store *timedStore // times the store's PUTs and GETs
	// stages read the brokers' latency histograms (PathStages).
	stages stageGatherers
	admin  *kgo.Client
	price  pricer
	prog   *progress
	// produced remembers the topic each Produce run wrote, for Consume.
	produced map[[2]string]string
}

func runPhase(ctx context.Context, cfg Config, index int, ph Phase, dir string, prog *progress, price pricer) (runs []RunResult, link LinkFigures, memory *StoreMemory, err error) {
	nm := newNetModel(cfg.CrossAZ)
	defer nm.close() // after the cluster (defers run last first)
	timed := &timedStore{}
	defer func() {
		mean, writes, reads := nm.measured()
		link = LinkFigures{Phase: index, ConfiguredOneWay: cfg.CrossAZ, MeasuredMeanOneWay: mean, DelayedWrites: writes, DelayedReads: reads}
	}()
	prog.set(fmt.Sprintf("starting cluster (%v)", ph.Setting))
	lc, err := localcluster.Start(ctx, localcluster.Config{
		Racks: brokerRacks(), Dir: dir, LatencyModel: cfg.LatencyModel,
		StorageURL: phaseStorageURL(cfg, ph), MetadataBootstrap: cfg.MetadataBootstrap,
		RemoteWAL: broker.RemoteWALConfig{CombinerTaskInterval: ph.Setting.Interval, CombinerTaskUploadBytes: ph.Setting.UploadBytes},
		Tweak:     func(bc *broker.Config) { bc.Dial = nm.brokerDial(bc.Rack) },
		WrapStore: func(s objstore.Store) objstore.Store { timed.Store = s; return timed },
		Logger:    cfg.Logger,
	})
	if err != nil {
		return nil, link, nil, err
	}
	if m, ok := lc.BackendStore().(*mem.Store); ok {
		defer func() {
			st := m.ArenaStats()
			memory = &StoreMemory{Phase: index, ArenaBytes: st.Bytes, UsedBytes: st.Used, HugePageBytes: st.HugePageBytes, OverflowBytes: st.OverflowBytes, OverflowObjects: st.OverflowObjects}
			m.Close() // after the cluster: gives the arena back
		}()
	}
	defer lc.Close()
	for _, b := range lc.Brokers {
		nm.register(b.Addr(), b.Info().Rack)
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(lc.Bootstrap()...), kgo.Dialer(nm.clientDial(producerRack)))
	if err != nil {
		return nil, link, nil, err
	}
	defer admin.Close()
	stages, err := newStageGatherers(lc.Brokers)
	if err != nil {
		return nil, link, nil, err
	}
	p := &phase{cfg: cfg, index: index, set: ph.Setting, lc: lc, net: nm, store: timed, admin: admin, price: price, prog: prog,
		stages: stages, produced: map[[2]string]string{}}
	for _, st := range ph.Steps {
		prog.begin(fmt.Sprintf("%v | %s %s rep %d/%d", ph.Setting, st.Workload, st.Mode, st.Rep+1, cfg.Reps))
		sctx, cancel := context.WithTimeout(ctx, stepTimeout)
		stopProf, err := startProfile(cfg.CPUProfile, ph.Headline, st)
		if err != nil {
			cancel()
			return runs, link, memory, err
		}
		r, err := p.run(sctx, st)
		stopProf()
		cancel()
		if err != nil {
			return runs, link, memory, fmt.Errorf("%s %s rep %d: %w", st.Workload, st.Mode, st.Rep, err)
		}
		r.Phase, r.Setting, r.Headline = index, ph.Setting, ph.Headline
		runs = append(runs, r)
		prog.end()
	}
	return runs, link, memory, nil
}

// phaseStorageURL is the store a phase's cluster opens: localStorageURL,
// and for the default in-memory store one that charges the brokers what a
// client of a remote store pays, not the store's own memory
// (storeurl's mem parameters): bodies kept in an arena faulted in when the
// cluster starts, sized for what the phase's remote-WAL steps upload
// (phaseUploadBytes), and GETs copied into pooled buffers. Without the
// arena every object's pages fault in during the run they are uploaded
// in (2-3 ms of CPU per MB measured on a paravirtualized 2-core machine,
// on top of a 0.03 ms copy): work of the remote store's machines, charged
// to the process that also runs the brokers.
func phaseStorageURL(cfg Config, ph Phase) string {
	u := localStorageURL(cfg.StorageURL)
	if u != DefaultStorageURL {
		return u
	}
	return fmt.Sprintf("%s?arena=%d&gets=pooled", DefaultStorageURL, phaseUploadBytes(cfg, ph))
}

// phaseUploadBytes bounds the bytes a phase's remote-WAL steps upload:
// their records' bytes with a quarter more for record and batch framing
// and object headers, plus 64 MiB; Consume reads what Produce wrote.
func phaseUploadBytes(cfg Config, ph Phase) int64 {
	var n int64
	for _, st := range ph.Steps {
		if st.Mode != RemoteWAL {
			continue
		}
		switch st.Workload {
		case E2E, E2EAll:
			n += int64(cfg.E2ERecords) * e2eMaxBytes
		case Stream:
			n += int64(float64(cfg.StreamRate)*cfg.StreamDuration.Seconds()+1) * int64(cfg.PerfRecordBytes)
		case Produce, ProduceAll:
			n += int64(cfg.PerfRecords) * int64(cfg.PerfRecordBytes)
		}
	}
	return n + n/4 + 64<<20
}

// localStorageURL is Config.StorageURL as localcluster takes it: empty
// for the fs backend in the cluster's directory.
func localStorageURL(u string) string {
	if u == FSStore {
		return ""
	}
	return u
}

// startProfile starts a CPU profile of one headline step if prefix is set,
// and samples mutex contention and blocking for the same step; the
// returned func stops them and writes <name>.pprof, <name>.mutex.pprof and
// <name>.block.pprof.
func startProfile(prefix string, headline bool, st Step) (func(), error) {
	if prefix == "" || !headline {
		return func() {}, nil
	}
	name := fmt.Sprintf("%s-%s-%s-rep%d", prefix, st.Workload, st.Mode, st.Rep)
	f, err := os.Create(name + ".pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		for _, kind := range []string{"mutex", "block"} {
			if out, err := os.Create(name + "." + kind + ".pprof"); err == nil {
				pprof.Lookup(kind).WriteTo(out, 0)
				out.Close()
			}
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	}, nil
}

func (p *phase) run(ctx context.Context, st Step) (RunResult, error) {
	r := RunResult{Step: st}
	if st.Workload == Consume {
		topic, ok := p.produced[[2]string{st.Mode, fmt.Sprint(st.Rep)}]
		if !ok {
			return r, errors.New("no Produce run of this mode and repetition to consume")
		}
		r.Topic = topic
		return r, p.consume(ctx, &r)
	}
	partitions := 1
	if st.Workload == Produce || st.Workload == ProduceAll {
		partitions = p.cfg.ProducePartitions
	}
	topic, err := p.createTopic(ctx, fmt.Sprintf("%s-%s-p%d-r%d", st.Workload, st.Mode, p.index, st.Rep), st.Mode, partitions)
	if err != nil {
		return r, err
	}
	r.Topic = topic
	switch st.Workload {
	case E2E, E2EAll:
		return r, p.endToEnd(ctx, &r, p.cfg.E2ERecords, p.cfg.E2ERate)
	case Stream:
		n := int(float64(p.cfg.StreamRate) * p.cfg.StreamDuration.Seconds())
		return r, p.endToEnd(ctx, &r, max(n, 1), p.cfg.StreamRate)
	case Produce, ProduceAll:
		err := p.producePerf(ctx, &r)
		if err == nil {
			p.produced[[2]string{st.Mode, fmt.Sprint(st.Rep)}] = topic
		}
		return r, err
	}
	return r, fmt.Errorf("unknown workload %q", st.Workload)
}

// createTopic creates a topic of n partitions through the Kafka API and
// waits until every replica has opened its partitions. With one partition
// (every workload unless Config.ProducePartitions says more for the
// produce ones) it checks the placement the benchmark needs: the leader
// outside the consumer's rack and a follower in it. With more, the
// controller spreads the leaders over the brokers, racks included.
func (p *phase) createTopic(ctx context.Context, prefix, mode string, n int) (string, error) {
	name := prefix
	if n == 1 {
		var err error
		if name, err = TopicName(prefix, p.lc.Controller.Brokers(), p.cfg.ReplicationFactor); err != nil {
			return "", err
		}
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, int32(n), p.cfg.ReplicationFactor
	if mode == RemoteWAL {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = broker.TopicConfigRemoteWAL
		v := "true"
		c.Value = &v
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, p.admin)
	if err != nil {
		return "", fmt.Errorf("create topic %s: %w", name, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		return "", fmt.Errorf("create topic %s: error code %d", name, code)
	}
	ts, ok := p.lc.Controller.Topic(name)
	if !ok || len(ts.Partitions) != n {
		return "", fmt.Errorf("topic %s: not in the controller with %d partitions after creation", name, n)
	}
	if n == 1 {
		rack := map[int32]string{}
		for _, b := range p.lc.Controller.Brokers() {
			rack[b.ID] = b.Rack
		}
		if !placementOK(ts.Partitions[0], rack) {
			return "", fmt.Errorf("topic %s: placement %+v does not put a follower in %s and the leader elsewhere", name, ts.Partitions[0], consumerRack)
		}
	}
	// Wait until every replica has opened each partition in its role.
	deadline := time.Now().Add(warmupTimeout)
	for i, ps := range ts.Partitions {
		tp := broker.TopicPartition{Topic: name, Partition: int32(i)}
		for _, id := range ps.Replicas {
			for {
				st, ok := p.lc.Broker(id).PartitionStatus(tp)
				if ok && st.IsLeader == (id == ps.Leader) {
					break
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return "", fmt.Errorf("topic %s: broker %d did not open its replica of partition %d", name, id, i)
				}
				time.Sleep(catchUpInterval)
			}
		}
	}
	return name, nil
}

func (p *phase) producer(topic string, w Workload, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(p.lc.Bootstrap()...), kgo.Dialer(p.net.clientDial(producerRack)),
		kgo.DefaultProduceTopic(topic),
	}, producerConfigFor(w).opts()...)
	return kgo.NewClient(append(opts, extra...)...)
}

// consumer reads every partition of topic from the start.
func (p *phase) consumer(topic string) (*kgo.Client, error) {
	ts, ok := p.lc.Controller.Topic(topic)
	if !ok {
		return nil, fmt.Errorf("%s: unknown topic", topic)
	}
	parts := make(map[int32]kgo.Offset, len(ts.Partitions))
	for i := range ts.Partitions {
		parts[int32(i)] = kgo.NewOffset().AtStart()
	}
	return kgo.NewClient(kgo.SeedBrokers(p.lc.Bootstrap()...), kgo.Dialer(p.net.clientDial(consumerRack)),
		kgo.Rack(consumerRack), kgo.FetchMaxWait(consumeMaxWait),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
}

// warmUp produces one acknowledged record, so the figures measure the
// steady state and not connection set-up or the first metadata load.
func warmUp(ctx context.Context, prod *kgo.Client) error {
	wctx, cancel := context.WithTimeout(ctx, warmupTimeout)
	defer cancel()
	if err := prod.ProduceSync(wctx, &kgo.Record{Value: []byte(warmupValue)}).FirstErr(); err != nil {
		return fmt.Errorf("warm-up produce: %w", err)
	}
	return nil
}

// endToEnd paces n records at rate records/s (E2E: sizes 1.2-2.0 KB; Stream:
// PerfRecordBytes) to a producer beside the leader and measures, for each,
// the time from its creation to its consumption by a consumer in the
// follower's rack.
func (p *phase) endToEnd(ctx context.Context, r *RunResult, n, rate int) error {
	prod, err := p.producer(r.Topic, r.Workload)
	if err != nil {
		return err
	}
	defer prod.Close()
	cons, err := p.consumer(r.Topic)
	if err != nil {
		return err
	}
	defer cons.Close()
	if err := warmUp(ctx, prod); err != nil {
		return err
	}
	// The consumer must have found the follower before the clock starts.
	if err := pollUntilWarm(ctx, cons); err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(p.cfg.Seed, uint64(p.index)<<32|uint64(r.Rep)))
	pool := make([]byte, 64<<10)
	fill(rng, pool)
	sizes := make([]int, n)
	for i := range sizes {
		if r.Workload == Stream {
			sizes[i] = p.cfg.PerfRecordBytes
		} else {
			sizes[i] = e2eMinBytes + rng.IntN(e2eMaxBytes-e2eMinBytes+1)
		}
		r.Bytes += int64(sizes[i])
	}
	r.Records = n

	leader, follower, err := p.replicas(r.Topic)
	if err != nil {
		return err
	}
	tracer := traceOffsets(leader, follower, broker.TopicPartition{Topic: r.Topic})
	defer tracer.Close()
	before := p.snapshots()
	start := time.Now()
	got := make(chan consumeResult, 1)
	go func() { got <- consumeIndexed(ctx, cons, n, &p.prog.count, p.cfg.Logger) }()

	var (
		wg       sync.WaitGroup
		failed   atomic.Int64
		firstErr atomic.Pointer[error]
	)
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		v := make([]byte, max(sizes[i], payloadHeader))
		body := v[payloadHeader:]
		off := rng.IntN(len(pool) - len(body) + 1)
		copy(body, pool[off:])
		binary.BigEndian.PutUint64(v, uint64(i))
		binary.BigEndian.PutUint64(v[8:], uint64(time.Now().UnixNano()))
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d produce requests failed, first: %w", n, *firstErr.Load())
	}
	res := <-got
	if res.err != nil {
		return res.err
	}
	r.Samples, r.Duplicates, r.OutOfOrder = res.latencies, res.duplicates, res.outOfOrder
	r.Elapsed = res.last.Sub(start)
	mctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	r.StageRecords = tracer.markedAll(mctx, res.records)
	cancel()
	r.Stages = tracer.stages(res.records)
	return p.finish(ctx, r, before, start)
}

type consumeResult struct {
	latencies              []time.Duration
	records                []consumedRecord
	duplicates, outOfOrder int64
	last                   time.Time
	err                    error
}

// pollUntilWarm polls until the warm-up record arrives.
func pollUntilWarm(ctx context.Context, cons *kgo.Client) error {
	wctx, cancel := context.WithTimeout(ctx, warmupTimeout)
	defer cancel()
	for {
		fs := cons.PollFetches(wctx)
		if wctx.Err() != nil {
			return errors.New("warm-up: the consumer did not see the warm-up record")
		}
		warm := false
		fs.EachRecord(func(r *kgo.Record) { warm = warm || string(r.Value) == warmupValue })
		if warm {
			return nil
		}
	}
}

// consumeIndexed reads n indexed records and measures each one's
// end-to-end latency from the creation time in its payload.
func consumeIndexed(ctx context.Context, cons *kgo.Client, n int, count *atomic.Int64, logger *slog.Logger) consumeResult {
	var res consumeResult
	seen := make([]bool, n)
	got, next := 0, int64(-1)
	for got < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			res.err = fmt.Errorf("consumed %d of %d records before the deadline", got, n)
			return res
		}
		now := time.Now()
		// Fetch errors are retried by the client; a run that cannot
		// recover ends at the step's deadline.
		fs.EachError(func(topic string, part int32, err error) {
			logger.Debug("fetch error, retried", "topic", topic, "partition", part, "err", err)
		})
		fs.EachRecord(func(rec *kgo.Record) {
			if next >= 0 && rec.Offset != next {
				res.outOfOrder++
			}
			next = rec.Offset + 1
			if len(rec.Value) < payloadHeader {
				return
			}
			i := binary.BigEndian.Uint64(rec.Value)
			if i >= uint64(n) {
				return
			}
			if seen[i] {
				res.duplicates++
				return
			}
			seen[i] = true
			created := time.Unix(0, int64(binary.BigEndian.Uint64(rec.Value[8:])))
			res.latencies = append(res.latencies, now.Sub(created))
			res.records = append(res.records, consumedRecord{offset: rec.Offset, created: created, consumed: now})
			got++
			count.Add(1)
		})
		res.last = now
	}
	return res
}

// producePerf is kafka-producer-perf-test: PerfRecords records of
// PerfRecordBytes, linger 20 ms, unthrottled; the latency of a record is
// from just before Produce is called to its acknowledgement, so it
// includes time queued in the client, as in the Java tool.
func (p *phase) producePerf(ctx context.Context, r *RunResult) error {
	wire := &wireRecorder{}
	prod, err := p.producer(r.Topic, r.Workload, kgo.WithHooks(wire))
	if err != nil {
		return err
	}
	defer prod.Close()
	if err := warmUp(ctx, prod); err != nil {
		return err
	}
	wire.start()
	n, size := p.cfg.PerfRecords, p.cfg.PerfRecordBytes
	// Like the Java tool, a few random payloads are reused.
	rng := rand.New(rand.NewPCG(p.cfg.Seed, uint64(p.index)<<32|uint64(r.Rep)))
	payloads := make([][]byte, 16)
	for i := range payloads {
		payloads[i] = make([]byte, size)
		fill(rng, payloads[i])
	}
	r.Records, r.Bytes = n, int64(n)*int64(size)
	lat := make([]time.Duration, n)
	var (
		wg       sync.WaitGroup
		failed   atomic.Int64
		firstErr atomic.Pointer[error]
		lastAck  atomic.Int64
	)
	before := p.snapshots()
	start := time.Now()
	for i := 0; i < n; i++ {
		sent := time.Now()
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Value: payloads[i%len(payloads)]}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			now := time.Now()
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, &err)
				return
			}
			lat[i] = now.Sub(sent)
			p.prog.count.Add(1)
			for {
				old := lastAck.Load()
				if now.UnixNano() <= old || lastAck.CompareAndSwap(old, now.UnixNano()) {
					break
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d produce requests failed, first: %w", n, *firstErr.Load())
	}
	r.Samples = lat
	r.Elapsed = time.Unix(0, lastAck.Load()).Sub(start)
	r.Wire = wire.figures()
	return p.finish(ctx, r, before, start)
}

// consume is kafka-consumer-perf-test: read what the Produce run of the
// same mode and repetition wrote, from the follower's rack, once the
// follower has all of it.
func (p *phase) consume(ctx context.Context, r *RunResult) error {
	if err := p.waitCaughtUp(ctx, r.Topic); err != nil {
		return err
	}
	n := p.cfg.PerfRecords
	before := p.snapshots()
	start := time.Now()
	cons, err := p.consumer(r.Topic)
	if err != nil {
		return err
	}
	defer cons.Close()
	var polls []time.Duration
	got := 0
	for got < n {
		t0 := time.Now()
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("consumed %d of %d records before the deadline", got, n)
		}
		fs.EachError(func(topic string, part int32, err error) {
			p.cfg.Logger.Debug("fetch error, retried", "topic", topic, "partition", part, "err", err)
		})
		polls = append(polls, time.Since(t0))
		fs.EachRecord(func(rec *kgo.Record) {
			if string(rec.Value) == warmupValue {
				return
			}
			got++
			r.Bytes += int64(len(rec.Value))
			p.prog.count.Add(1)
		})
	}
	r.Records = got
	r.Elapsed = time.Since(start)
	r.Samples = polls
	return p.finish(ctx, r, before, start)
}

// finish waits for the followers, closes the ledger window and fills the
// run's figures.
func (p *phase) finish(ctx context.Context, r *RunResult, before window, start time.Time) error {
	if err := p.waitCaughtUp(ctx, r.Topic); err != nil {
		return err
	}
	window := time.Since(start)
	after := p.snapshots()
	r.Window = window
	r.CPU = after.cpu - before.cpu
	r.Latency = Summarize(r.Samples)
	if r.Elapsed > 0 {
		r.RecordsPerSec = float64(r.Records) / r.Elapsed.Seconds()
		r.MBPerSec = float64(r.Bytes) / 1e6 / r.Elapsed.Seconds()
	}
	merged := mergeDeltas(before.ledgers, after.ledgers)
	r.StorePut, r.StoreGet = p.store.since(before.store)
	r.Path = stageDeltas(before.stages, after.stages)
	r.Ledger = ledgerFigures(merged, window)
	u := cost.UsageFromLedger(merged, window, brokersForCost, 0)
	b, err := p.price.model.MonthlyCost(u, p.price.sheet)
	if err != nil {
		return fmt.Errorf("pricing the run: %w", err)
	}
	r.CostUSD = b.TotalUSD
	r.CostLines = map[string]float64{}
	for _, l := range b.Lines {
		if l.USD != 0 {
			r.CostLines[l.Item] = l.USD
		}
	}
	return nil
}

// waitCaughtUp waits until, in every partition of topic, every
// follower's log end reaches the leader's.
func (p *phase) waitCaughtUp(ctx context.Context, topic string) error {
	ts, ok := p.lc.Controller.Topic(topic)
	if !ok {
		return fmt.Errorf("%s: unknown topic", topic)
	}
	deadline := time.Now().Add(catchUpTimeout)
	for i, ps := range ts.Partitions {
		tp := broker.TopicPartition{Topic: topic, Partition: int32(i)}
		for {
			lst, ok := p.lc.Broker(ps.Leader).PartitionStatus(tp)
			done := ok
			for _, id := range ps.Replicas {
				if id == ps.Leader || !done {
					continue
				}
				fst, ok := p.lc.Broker(id).PartitionStatus(tp)
				done = ok && fst.LogEnd >= lst.LogEnd
			}
			if done {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("%s: followers did not catch up with the leader's log end %d", tp, lst.LogEnd)
			}
			time.Sleep(catchUpInterval)
		}
	}
	return nil
}

// window is where a run's counts start: every broker's ledger and the
// timed store.
type window struct {
	ledgers []ledger.Snapshot
	store   [2]int
	cpu     time.Duration // processCPU
	stages  map[stagehist.Stage]histSnap
}

func (p *phase) snapshots() window {
	out := make([]ledger.Snapshot, len(p.lc.Ledgers))
	for i, l := range p.lc.Ledgers {
		out[i] = l.Snapshot()
	}
	return window{ledgers: out, store: p.store.mark(), cpu: processCPU(), stages: p.stages.snapshot()}
}

// processCPU is the user and system CPU time this process has used: the
// brokers, the store and its model, the metadata Kafka and the clients.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// replicas returns the leader of topic's partition 0 and the follower the
// consumer reads from: the lowest broker id in the consumer's rack, as
// the leader's preferred read replica picks it.
func (p *phase) replicas(topic string) (leader, follower *broker.Broker, err error) {
	ts, ok := p.lc.Controller.Topic(topic)
	if !ok || len(ts.Partitions) == 0 {
		return nil, nil, fmt.Errorf("%s: unknown topic", topic)
	}
	ps := ts.Partitions[0]
	best := int32(-1)
	for _, id := range ps.Replicas {
		if id != ps.Leader && p.lc.Broker(id).Info().Rack == consumerRack && (best < 0 || id < best) {
			best = id
		}
	}
	if best < 0 {
		return nil, nil, fmt.Errorf("%s: no follower in %s", topic, consumerRack)
	}
	return p.lc.Broker(ps.Leader), p.lc.Broker(best), nil
}

// mergeDeltas sums what every broker's ledger recorded between before and
// after into one snapshot. Produce transfers are recorded with an unknown
// source rack (clients do not send theirs); the benchmark's producer sits
// in producerRack, so they are attributed to it here and count as crossing
// only when the leader is elsewhere.
func mergeDeltas(before, after []ledger.Snapshot) ledger.Snapshot {
	var m ledger.Snapshot
	m.ByKind = map[ledger.Kind]ledger.Totals{}
	m.ByComponent = map[string]ledger.Totals{}
	for i := range after {
		d := after[i]
		if i < len(before) {
			d = d.Sub(before[i])
		}
		m.Requests = append(m.Requests, d.Requests...)
		for _, t := range d.Transfers {
			if t.Component == "produce" && t.FromRack == "" {
				t.FromRack = producerRack
			}
			m.Transfers = append(m.Transfers, t)
		}
	}
	for _, r := range m.Requests {
		k, c := m.ByKind[r.Kind], m.ByComponent[r.Component]
		k.Requests, k.Errors, k.BytesWritten, k.BytesRead = k.Requests+r.Requests, k.Errors+r.Errors, k.BytesWritten+r.BytesWritten, k.BytesRead+r.BytesRead
		c.Requests, c.Errors, c.BytesWritten, c.BytesRead = c.Requests+r.Requests, c.Errors+r.Errors, c.BytesWritten+r.BytesWritten, c.BytesRead+r.BytesRead
		m.ByKind[r.Kind], m.ByComponent[r.Component] = k, c
	}
	for _, t := range m.Transfers {
		if t.CrossRack() {
			m.CrossRackBytes += t.Bytes
		} else {
			m.SameRackBytes += t.Bytes
		}
	}
	return m
}

func ledgerFigures(s ledger.Snapshot, window time.Duration) LedgerFigures {
	f := LedgerFigures{
		Puts: s.ByKind[ledger.Put].Requests, Gets: s.ByKind[ledger.Get].Requests,
		BytesPut: s.ByKind[ledger.Put].BytesWritten, BytesGot: s.ByKind[ledger.Get].BytesRead,
		CrossAZBytes: s.CrossRackBytes, CrossAZByComponent: map[string]int64{},
	}
	for k, t := range s.ByKind {
		if k != ledger.Put && k != ledger.Get {
			f.OtherRequests += t.Requests
		}
	}
	for _, t := range s.Transfers {
		if t.CrossRack() {
			f.CrossAZByComponent[t.Component] += t.Bytes
		}
	}
	if sec := window.Seconds(); sec > 0 {
		f.PutsPerSec, f.GetsPerSec = float64(f.Puts)/sec, float64(f.Gets)/sec
	}
	return f
}

func currentEnv() Env {
	return Env{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Started: time.Now().UTC().Format(time.RFC3339)}
}

// fill writes printable random bytes, like the Java perf test's payloads.
func fill(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
}

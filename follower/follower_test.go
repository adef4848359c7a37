package follower

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fault"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/kwal/kwal/objstore/s3store"
)

// rig is one leader-and-follower setup: leader logs, an object store, an
// index, and a follower whose logs live in a MemFS.
type rig struct {
	t       *testing.T
	clk     *clock.Manual
	put     objstore.Store // where objects are written
	read    objstore.Store // what the follower reads (maybe decorated)
	ix      *memIndex
	leader  *fakeLeader
	ledger  *ledger.Ledger
	rep     *countReporter
	fs      *kafkalog.MemFS
	leaders map[metadata.TopicPartition]*kafkalog.Log
	logs    map[metadata.TopicPartition]*kafkalog.Log
	recs    map[metadata.TopicPartition]*recLog
	f       *Follower
	cfg     func(*Config)
	wrapLog func(Log) Log // optional: what the follower appends to
}

func newRig(t *testing.T) *rig {
	clk := clock.NewManual(t0)
	st := mem.New(mem.WithClock(clk))
	return &rig{
		t: t, clk: clk, put: st, read: st, ix: newMemIndex(), leader: newFakeLeader(),
		ledger: ledger.New(), rep: &countReporter{}, fs: kafkalog.NewMemFS(),
		leaders: make(map[metadata.TopicPartition]*kafkalog.Log),
		logs:    make(map[metadata.TopicPartition]*kafkalog.Log),
		recs:    make(map[metadata.TopicPartition]*recLog),
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

// addLeader creates tp's leader log at epoch and registers it.
func (r *rig) addLeader(tp metadata.TopicPartition, epoch int32) *kafkalog.Log {
	l := openLog(r.t, kafkalog.NewMemFS(), "/leader/"+tp.String(), r.clk)
	r.leaders[tp] = l
	r.leader.set(tp, l, epoch)
	return l
}

// start opens (or reopens) the follower's logs and starts a follower.
func (r *rig) start() {
	r.t.Helper()
	cfg := Config{
		Store: r.read, Index: r.ix, Leader: r.leader, LeaderClient: r.leader, Reporter: r.rep,
		Transfers: r.ledger, Rack: "rack-follower", Clock: r.clk, Logger: testLogger(r.t),
		MaxRangeBytes: 256 << 10, GapTimeout: 200 * time.Millisecond,
	}
	if r.cfg != nil {
		r.cfg(&cfg)
	}
	f, err := New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.f = f
	for tp := range r.leaders {
		l := r.logs[tp]
		if l == nil {
			l = openLog(r.t, r.fs, "/follower/"+tp.String(), r.clk)
			r.logs[tp] = l
		}
		rl := &recLog{Log: l, t: r.t, check: func(first int64, data []byte) error {
			cur, _, _ := r.leader.get(tp) // the leader now, which may have changed
			return leaderCheck(cur)(first, data)
		}}
		r.recs[tp] = rl
		var fl Log = rl
		if r.wrapLog != nil {
			fl = r.wrapLog(rl)
		}
		if err := f.AddPartition(tp, fl); err != nil {
			r.t.Fatal(err)
		}
	}
}

// restart stops the follower and reopens its logs; with crash, unsynced
// writes are lost (a kill -9), else the logs are closed cleanly.
func (r *rig) restart(rng *rand.Rand, crash bool) {
	r.t.Helper()
	if err := r.f.Close(); err != nil {
		r.t.Fatal(err)
	}
	if crash {
		r.fs = r.fs.CrashClone(rng)
	} else {
		for _, l := range r.logs {
			if err := l.Close(); err != nil {
				r.t.Fatal(err)
			}
		}
	}
	clear(r.logs)
	r.start()
}

func (r *rig) stop() {
	if r.f != nil {
		r.f.Close()
	}
}

// waitCaughtUp waits until every follower log has its leader's end offset.
func (r *rig) waitCaughtUp(pump bool) {
	r.t.Helper()
	var clk *clock.Manual
	if pump {
		clk = r.clk
	}
	waitFor(r.t, "catch-up", clk, time.Millisecond, func() bool {
		for tp, l := range r.leaders {
			if s, ok := r.f.Status(tp); !ok || s.LogEndOffset != l.LogEndOffset() {
				return false
			}
		}
		return true
	}, func() string {
		s := ""
		for tp, l := range r.leaders {
			st, _ := r.f.Status(tp)
			s += fmt.Sprintf("%v: leader %d, follower %+v; ", tp, l.LogEndOffset(), st)
		}
		return s + fmt.Sprintf("metrics %+v", r.f.Metrics())
	})
}

func (r *rig) checkAll() {
	r.t.Helper()
	for tp, l := range r.leaders {
		checkEqual(r.t, l, r.logs[tp])
		if n := r.recs[tp].errors.Load(); n != 0 {
			r.t.Errorf("%v: %d appends refused by the log", tp, n)
		}
	}
}

var (
	tp0 = metadata.TopicPartition{Topic: "orders", Partition: 0}
	tp1 = metadata.TopicPartition{Topic: "orders", Partition: 1}
	tp2 = metadata.TopicPartition{Topic: "clicks", Partition: 3}
)

// uploadAll cuts every leader log and packs the slices, interleaved across
// partitions, into objects.
func (r *rig) uploadAll(rng *rand.Rand, codec metadata.Codec) []object {
	var lists [][]combiner.Slice
	for _, tp := range []metadata.TopicPartition{tp0, tp1, tp2} {
		if l, ok := r.leaders[tp]; ok {
			lists = append(lists, cutSlices(r.t, tp, l, 0, l.LogEndOffset(), rng, 8<<10))
		}
	}
	return packObjects(r.t, r.put, "", interleave(rng, lists...), rng, 6, codec)
}

// publishMore appends n batches at epoch to tp's leader log l, uploads
// them as objects of up to maxPer slices of about maxBytes under prefix,
// publishes those to the index and returns them.
func (r *rig) publishMore(tp metadata.TopicPartition, l *kafkalog.Log, rng *rand.Rand, n int, epoch int32, prefix string, maxBytes, maxPer int) []object {
	r.t.Helper()
	from := l.LogEndOffset()
	fillLeader(r.t, l, rng, n, epoch)
	objs := packObjects(r.t, r.put, prefix, cutSlices(r.t, tp, l, from, l.LogEndOffset(), rng, maxBytes), rng, maxPer, metadata.CodecNone)
	for _, o := range objs {
		r.ix.publish(o.key, o.entries...)
	}
	return objs
}

func TestRebuildThroughCombiner(t *testing.T) {
	for _, codec := range []metadata.Codec{metadata.CodecNone, metadata.CodecZstd} {
		t.Run("codec="+codec.String(), func(t *testing.T) {
			r := newRig(t)
			defer r.stop()
			rebuildThroughCombiner(t, r, codec)
		})
	}
}

// TestRebuildS3 runs the combiner rebuild against a real S3-compatible
// server (versitygw via scripts/test-env.sh); skipped loudly without one.
func TestRebuildS3(t *testing.T) {
	env := objstoretest.S3Env(t)
	st, err := s3store.New(context.Background(), s3store.Config{
		Bucket: env.Bucket, Prefix: objstoretest.RandomPrefix(), Endpoint: env.Endpoint, PathStyle: true,
		AccessKey: env.AccessKey, SecretKey: env.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	r.put, r.read = st, st
	defer r.stop()
	rebuildThroughCombiner(t, r, metadata.CodecZstd)
}

func rebuildThroughCombiner(t *testing.T, r *rig, codec metadata.Codec) {
	rng := rand.New(rand.NewPCG(1, uint64(codec)))
	for _, tp := range []metadata.TopicPartition{tp0, tp1, tp2} {
		fillLeader(t, r.addLeader(tp, 3), rng, 150, 3)
	}
	c, err := combiner.New(combiner.Config{
		Writer: combiner.StoreWriter{Store: r.put}, Publisher: r.ix, Clock: r.clk, Codec: codec,
		UploadBytes: 24 << 10, Rand: rand.New(rand.NewPCG(2, 3)),
	})
	if err != nil {
		t.Fatal(err)
	}
	r.start() // the follower runs while the combiner uploads
	var lists [][]combiner.Slice
	for _, tp := range []metadata.TopicPartition{tp0, tp1, tp2} {
		lists = append(lists, cutSlices(t, tp, r.leaders[tp], 0, r.leaders[tp].LogEndOffset(), rng, 6<<10))
	}
	for _, s := range interleave(rng, lists...) {
		if err := c.Submit(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.waitCaughtUp(false)
	r.checkAll()
	m := r.f.Metrics()
	if m.Fallbacks != 0 || m.LeaderFetches != 0 || m.CorruptSlices != 0 || m.Hedges != 0 {
		t.Fatalf("a clean run fell back, hedged or saw corruption: %+v", m)
	}
	for tp, l := range r.leaders {
		if got := r.rep.get(tp); got != l.LogEndOffset() {
			t.Errorf("%v: reported log end %d, want %d", tp, got, l.LogEndOffset())
		}
		if s, _ := r.f.Status(tp); s.LagOffsets != 0 || s.LagMs != 0 {
			t.Errorf("%v: caught up but lag %+v", tp, s)
		}
	}
}

// TestRebuildOnFaults reads through the fault decorator: 500s, 503s,
// timeouts, latency, truncated and corrupted bodies. Every append is
// checked against the leader's bytes as it happens.
func TestRebuildOnFaults(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := newRig(t)
			defer r.stop()
			rng := rand.New(rand.NewPCG(seed, 7))
			for _, tp := range []metadata.TopicPartition{tp0, tp1} {
				fillLeader(t, r.addLeader(tp, 0), rng, 120, 0)
			}
			fs, err := fault.New(r.put, fault.Config{Seed: seed, Clock: r.clk, Rules: []fault.Rule{
				{Kind: fault.Latency, Prob: 0.3, Delay: 40 * time.Millisecond},
				{Kind: fault.InternalError, Prob: 0.1},
				{Kind: fault.SlowDown, Prob: 0.1},
				{Kind: fault.Timeout, Prob: 0.02, Delay: 100 * time.Millisecond},
				{Kind: fault.Truncate, Prob: 0.08},
				{Kind: fault.Corrupt, Prob: 0.08},
			}})
			if err != nil {
				t.Fatal(err)
			}
			r.read = fs
			r.uploadAll(rng, metadata.Codec(seed%2))
			r.start()
			r.waitCaughtUp(true)
			r.checkAll()
			st, m := fs.Stats(), r.f.Metrics()
			t.Logf("faults %+v\nmetrics %+v", st, m)
			if st.Corrupted+st.Truncated > 0 && m.CorruptSlices == 0 {
				t.Fatalf("corrupted bodies were served but none detected")
			}
			if m.Truncations != 0 {
				t.Fatalf("truncated without a leader change")
			}
		})
	}
}

// TestDuplicatedAndReorderedIndex publishes every object's metadata in a
// random order, some twice, some slices uploaded twice under two keys,
// while the follower runs.
func TestDuplicatedAndReorderedIndex(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tp := range []metadata.TopicPartition{tp0, tp1} {
		fillLeader(t, r.addLeader(tp, 1), rng, 100, 1)
	}
	objs := r.uploadAll(rng, metadata.CodecNone)
	// A second upload of the same bytes under other keys, cut differently.
	objs = append(objs, r.uploadAll(rng, metadata.CodecZstd)...)
	for i := range objs {
		if rng.IntN(3) == 0 {
			objs = append(objs, objs[i])
		}
	}
	rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	r.start()
	for _, o := range objs {
		es := append([]metadata.SliceEntry(nil), o.entries...)
		rng.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
		r.ix.publish(o.key, es...)
	}
	r.waitCaughtUp(false)
	r.checkAll()
	if m := r.f.Metrics(); m.LeaderFetches != 0 {
		t.Fatalf("fell back with every slice published: %+v", m)
	}
}

// TestIndexChangeRereadsOnlyItsPartition: once both partitions are caught
// up, objects holding slices of tp0 alone are published; the follower
// reads tp0's slices from the index again, and tp1's not once, since the
// index says which partitions each change touched (IndexChanges). The
// same run with an index that cannot say has tp1 read again: what the
// count would show if the follower re-read every partition.
func TestIndexChangeRereadsOnlyItsPartition(t *testing.T) {
	for _, says := range []bool{true, false} {
		t.Run(fmt.Sprintf("index_says_what_changed=%v", says), func(t *testing.T) {
			r := newRig(t)
			defer r.stop()
			rng := rand.New(rand.NewPCG(5, 6))
			a, b := r.addLeader(tp0, 1), r.addLeader(tp1, 1)
			fillLeader(t, a, rng, 40, 1)
			fillLeader(t, b, rng, 40, 1)
			objs := r.uploadAll(rng, metadata.CodecNone)
			ci := &perPartitionIndex{ix: r.ix}
			r.cfg = func(c *Config) {
				c.Index = ci
				if says {
					c.Index = countingChanges{ci}
				}
			}
			r.start()
			for _, o := range objs {
				r.ix.publish(o.key, o.entries...)
			}
			r.waitCaughtUp(false) // on a stopped clock: only index changes wake the follower
			aBefore, bBefore := ci.count(tp0), ci.count(tp1)
			more := r.publishMore(tp0, a, rng, 20, 1, "more-", 8<<10, 6)
			r.waitCaughtUp(false)
			r.checkAll()
			aReads, bReads := ci.count(tp0)-aBefore, ci.count(tp1)-bBefore
			t.Logf("%d objects of %v alone: %v read %d times, %v %d", len(more), tp0, tp0, aReads, tp1, bReads)
			if aReads == 0 {
				t.Fatalf("%v caught up without its slices read again", tp0)
			}
			if says && bReads != 0 {
				t.Fatalf("%v's slices read %d times for changes of %v alone", tp1, bReads, tp0)
			}
			if !says && bReads == 0 {
				t.Fatalf("without IndexChanges %v was not read again: the count does not see re-reads", tp1)
			}
		})
	}
}

// TestFallbackToLeader: an object is missing, and a slice's metadata is
// never published. The follower fetches those ranges from the leader,
// counts them as cross-rack, and goes back to object storage.
func TestFallbackToLeader(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	// The causes under test are the missing object and the unpublished
	// slice. waitCaughtUp pumps the manual clock for the gap timeout, so
	// under load it can also pass a read's time budget while the read is
	// on its way; that would degrade the partition (a read timeout) and
	// the leader would serve everything, which is another test's case.
	r.cfg = func(c *Config) { c.FallbackAfter = time.Hour }
	rng := rand.New(rand.NewPCG(21, 22))
	leader := r.addLeader(tp0, 5)
	fillLeader(t, leader, rng, 200, 5)
	ss := cutSlices(t, tp0, leader, 0, leader.LogEndOffset(), rng, 4<<10)
	objs := packObjects(t, r.put, "", ss, rng, 1, metadata.CodecNone)
	if len(objs) < 12 {
		t.Fatalf("only %d objects", len(objs))
	}
	missing, unpublished := objs[3], objs[8]
	if err := r.put.Delete(context.Background(), missing.key); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.key != unpublished.key {
			r.ix.publish(o.key, o.entries...)
		}
	}
	r.start()
	r.waitCaughtUp(true)
	r.checkAll()
	m := r.f.Metrics()
	if m.Fallbacks < 2 || m.LeaderBytes == 0 {
		t.Fatalf("want two fallbacks: %+v", m)
	}
	if m.LeaderBytes >= m.BytesApplied/2 {
		t.Fatalf("the leader served %d of %d bytes: did not go back to object storage", m.LeaderBytes, m.BytesApplied)
	}
	var cross int64
	for _, row := range r.ledger.Snapshot().Transfers {
		if row.CrossRack() {
			cross += row.Bytes
		}
	}
	if cross != m.LeaderBytes {
		t.Fatalf("ledger has %d cross-rack bytes, follower fetched %d from the leader", cross, m.LeaderBytes)
	}
}

// TestCorruptSliceNeverAppended: an object's bytes are corrupted in the
// store (every read of it fails its CRC). The follower refuses it, retries,
// and fetches that range from the leader.
func TestCorruptSliceNeverAppended(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(31, 32))
	leader := r.addLeader(tp0, 0)
	fillLeader(t, leader, rng, 60, 0)
	objs := packObjects(t, r.put, "", cutSlices(t, tp0, leader, 0, leader.LogEndOffset(), rng, 4<<10), rng, 2, metadata.CodecNone)
	bad := objs[len(objs)/2]
	body, err := r.put.GetRange(context.Background(), bad.key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	body[bad.entries[0].Position+bad.entries[0].Length/2] ^= 0x40
	if err := r.put.Delete(context.Background(), bad.key); err != nil {
		t.Fatal(err)
	}
	if err := r.put.Put(context.Background(), bad.key, body, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		r.ix.publish(o.key, o.entries...)
	}
	r.start()
	r.waitCaughtUp(true)
	r.checkAll() // recLog checked every append against the leader's bytes
	m := r.f.Metrics()
	if m.CorruptSlices < int64(DefaultMaxReadAttempts) || m.Fallbacks != 1 || m.LeaderBytes == 0 {
		t.Fatalf("want %d corrupt reads then one fallback: %+v", DefaultMaxReadAttempts, m)
	}
}

// TestRestartAtRandomPoints kills the follower at random points (cleanly
// or losing unsynced writes) while objects keep arriving; it resumes from
// its log each time.
func TestRestartAtRandomPoints(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(41, 42))
	for _, tp := range []metadata.TopicPartition{tp0, tp1} {
		fillLeader(t, r.addLeader(tp, 2), rng, 150, 2)
	}
	objs := r.uploadAll(rng, metadata.CodecNone)
	r.start()
	for i, o := range objs {
		r.ix.publish(o.key, o.entries...)
		if rng.IntN(6) == 0 {
			for range rng.IntN(200) {
				r.clk.Advance(0) // let the follower run a little
			}
			r.restart(rng, i%2 == 0)
			for tp, l := range r.leaders {
				checkPrefix(t, l, r.logs[tp])
			}
		}
	}
	r.waitCaughtUp(true)
	r.checkAll()
}

func TestAddRemovePartition(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	r.addLeader(tp0, 0)
	r.start()
	if err := r.f.AddPartition(tp0, r.logs[tp0]); !errors.Is(err, ErrPartitionExists) {
		t.Fatalf("second AddPartition: %v", err)
	}
	if err := r.f.RemovePartition(tp1); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("RemovePartition of an unknown partition: %v", err)
	}
	if err := r.f.RemovePartition(tp0); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.f.Status(tp0); ok {
		t.Fatal("status of a removed partition")
	}
	r.f.Close()
	if err := r.f.AddPartition(tp0, r.logs[tp0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddPartition after Close: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := func() Config {
		return Config{Store: mem.New(), Index: newMemIndex(), Leader: newFakeLeader(), LeaderClient: newFakeLeader()}
	}
	c := ok()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.HedgeDelay != DefaultHedgeDelay || c.MaxInFlight != DefaultMaxInFlight || c.Clock == nil || c.Logger == nil {
		t.Fatalf("defaults not filled: %+v", c)
	}
	for name, mut := range map[string]func(*Config){
		"no store":          func(c *Config) { c.Store = nil },
		"no index":          func(c *Config) { c.Index = nil },
		"negative rate":     func(c *Config) { c.CatchUpBytesPerSec = -1 },
		"negative inflight": func(c *Config) { c.MaxInFlight = -1 },
		"negative gap":      func(c *Config) { c.GapTimeout = -time.Second },
		"negative range":    func(c *Config) { c.MaxRangeBytes = -1 },
	} {
		c := ok()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestEachBatchValidatedOnce: a clean rebuild of uncompressed slices
// appends every one of them through AppendVerifiedAsFollower (its batches
// validated in the pass that checked the slice's CRC32C), and zstd slices,
// whose CRC32C covers the compressed bytes, through AppendAsFollower.
func TestEachBatchValidatedOnce(t *testing.T) {
	for _, codec := range []metadata.Codec{metadata.CodecNone, metadata.CodecZstd} {
		r := newRig(t)
		rebuildThroughCombiner(t, r, codec)
		var verified int64
		for _, rl := range r.recs {
			verified += rl.verified.Load()
		}
		applied := r.f.Metrics().BytesApplied
		r.stop()
		switch {
		case applied == 0:
			t.Fatalf("codec %v: nothing applied", codec)
		case codec == metadata.CodecNone && verified != applied:
			t.Errorf("codec none: %d of %d bytes appended as verified", verified, applied)
		case codec == metadata.CodecZstd && verified != 0:
			t.Errorf("codec zstd: %d bytes appended as verified; their batches were not validated", verified)
		}
	}
}

// TestCorruptBatchUnderValidSliceCRC: a batch corrupted before its slice
// was cut (its bytes fail the batch CRC, but the slice's CRC32C was
// computed over the corrupted bytes, so the slice check alone passes) is
// never appended: the one-pass check refuses the batch, and the follower
// fetches that range from the leader.
func TestCorruptBatchUnderValidSliceCRC(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(33, 34))
	leader := r.addLeader(tp0, 0)
	fillLeader(t, leader, rng, 60, 0)
	objs := packObjects(t, r.put, "", cutSlices(t, tp0, leader, 0, leader.LogEndOffset(), rng, 4<<10), rng, 2, metadata.CodecNone)
	bad := objs[len(objs)/2]
	body, err := r.put.GetRange(context.Background(), bad.key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	e := &bad.entries[0]
	// A byte in the records of the slice's first batch (past its
	// 61-byte header), then the slice CRC the leader would have computed.
	body[e.Position+kafkalog.BatchHeaderSize+3] ^= 0x40
	e.CRC32C = objformat.CRC32C(body[e.Position : e.Position+e.Length])
	if err := r.put.Delete(context.Background(), bad.key); err != nil {
		t.Fatal(err)
	}
	if err := r.put.Put(context.Background(), bad.key, body, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		r.ix.publish(o.key, o.entries...)
	}
	r.start()
	r.waitCaughtUp(true)
	r.checkAll() // recLog checked every append against the leader's bytes
	m := r.f.Metrics()
	if m.CorruptSlices < 1 || m.Fallbacks != 1 || m.LeaderBytes == 0 {
		t.Fatalf("want the corrupt batch refused and one fallback: %+v", m)
	}
}

// TestFallbackMaxBytes: a leader fetch for a range of known end asks for
// about what the range takes; with no estimate or no end, the limit.
func TestFallbackMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		offsets int64
		bpo     float64
		limit   int
		want    int
	}{
		{6, 1000, 1 << 20, 7500},
		{6, 0, 1 << 20, 1 << 20},      // nothing appended yet
		{0, 1000, 1 << 20, 1 << 20},   // no end known
		{-3, 1000, 1 << 20, 1 << 20},  // below the log end
		{1e6, 1000, 1 << 20, 1 << 20}, // more than the limit
		{1, 0.1, 1 << 20, 1},          // never 0: the leader sends a batch anyway
	} {
		if got := fallbackMaxBytes(tc.offsets, tc.bpo, tc.limit); got != tc.want {
			t.Errorf("fallbackMaxBytes(%d, %v, %d) = %d, want %d", tc.offsets, tc.bpo, tc.limit, got, tc.want)
		}
	}
}

package follower

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// memIndex is an in-memory Index the tests publish to: entries are kept
// as published, duplicates and disorder included.
type memIndex struct {
	mu struct {
		sync.Mutex
		slices  map[metadata.TopicPartition][]Located
		changed chan struct{}
		// touched[i]: the partitions publish i+1 touched (IndexChanges).
		touched [][]metadata.TopicPartition
	}
}

var (
	_ Index        = (*memIndex)(nil)
	_ IndexChanges = (*memIndex)(nil)
)

func newMemIndex() *memIndex {
	ix := &memIndex{}
	ix.mu.slices = make(map[metadata.TopicPartition][]Located)
	ix.mu.changed = make(chan struct{})
	return ix
}

func (ix *memIndex) publish(key string, entries ...metadata.SliceEntry) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var touched []metadata.TopicPartition
	for _, e := range entries {
		ix.mu.slices[e.TopicPartition] = append(ix.mu.slices[e.TopicPartition], Located{Key: key, Entry: e})
		touched = append(touched, e.TopicPartition)
	}
	ix.mu.touched = append(ix.mu.touched, touched)
	close(ix.mu.changed)
	ix.mu.changed = make(chan struct{})
}

func (ix *memIndex) Slices(tp metadata.TopicPartition, from int64) []Located {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []Located
	for _, l := range ix.mu.slices[tp] {
		if l.Entry.LastOffset >= from {
			out = append(out, l)
		}
	}
	return out
}

func (ix *memIndex) Changed() <-chan struct{} {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.mu.changed
}

func (ix *memIndex) ChangedSince(since uint64) ([]metadata.TopicPartition, uint64, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []metadata.TopicPartition
	for _, tps := range ix.mu.touched[since:] {
		for _, tp := range tps {
			if !slices.Contains(out, tp) {
				out = append(out, tp)
			}
		}
	}
	return out, uint64(len(ix.mu.touched)), true
}

// perPartitionIndex counts the follower's Slices calls per partition. It
// hides IndexChanges (the follower re-reads every partition at each
// change); countingChanges is it with IndexChanges passed on.
type perPartitionIndex struct {
	ix *memIndex
	mu struct {
		sync.Mutex
		n map[metadata.TopicPartition]int
	}
}

var _ Index = (*perPartitionIndex)(nil)

func (c *perPartitionIndex) Slices(tp metadata.TopicPartition, from int64) []Located {
	c.mu.Lock()
	if c.mu.n == nil {
		c.mu.n = make(map[metadata.TopicPartition]int)
	}
	c.mu.n[tp]++
	c.mu.Unlock()
	return c.ix.Slices(tp, from)
}

func (c *perPartitionIndex) Changed() <-chan struct{} { return c.ix.Changed() }

func (c *perPartitionIndex) count(tp metadata.TopicPartition) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.n[tp]
}

type countingChanges struct{ *perPartitionIndex }

var _ IndexChanges = countingChanges{}

func (c countingChanges) ChangedSince(since uint64) ([]metadata.TopicPartition, uint64, bool) {
	return c.ix.ChangedSince(since)
}

// PublishObject makes memIndex a combiner.Publisher.
func (ix *memIndex) PublishObject(_ context.Context, obj combiner.UploadedObject) error {
	ix.publish(obj.Key, obj.Entries...)
	return nil
}

// fakeLeader serves LeaderState and LeaderClient from leader logs.
type fakeLeader struct {
	mu struct {
		sync.Mutex
		logs  map[metadata.TopicPartition]*kafkalog.Log
		epoch map[metadata.TopicPartition]int32
		down  bool
	}
	fetches atomic.Int64
}

var (
	_ LeaderState  = (*fakeLeader)(nil)
	_ LeaderClient = (*fakeLeader)(nil)
)

func newFakeLeader() *fakeLeader {
	l := &fakeLeader{}
	l.mu.logs = make(map[metadata.TopicPartition]*kafkalog.Log)
	l.mu.epoch = make(map[metadata.TopicPartition]int32)
	return l
}

func (l *fakeLeader) set(tp metadata.TopicPartition, log *kafkalog.Log, epoch int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.logs[tp], l.mu.epoch[tp] = log, epoch
}

func (l *fakeLeader) get(tp metadata.TopicPartition) (*kafkalog.Log, int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	log, ok := l.mu.logs[tp]
	return log, l.mu.epoch[tp], ok && !l.mu.down
}

func (l *fakeLeader) Leader(tp metadata.TopicPartition) (LeaderInfo, bool) {
	log, epoch, ok := l.get(tp)
	if !ok {
		return LeaderInfo{}, false
	}
	return LeaderInfo{Epoch: epoch, LogEnd: log.LogEndOffset(), Rack: "rack-leader"}, true
}

func (l *fakeLeader) EndOffsetForEpoch(_ context.Context, tp metadata.TopicPartition, epoch int32) (int32, int64, error) {
	log, _, ok := l.get(tp)
	if !ok {
		return 0, 0, fmt.Errorf("no leader for %v", tp)
	}
	e, end := log.EndOffsetForEpoch(epoch)
	return e, end, nil
}

func (l *fakeLeader) Fetch(_ context.Context, tp metadata.TopicPartition, epoch int32, offset int64, maxBytes int) ([]byte, error) {
	l.fetches.Add(1)
	log, cur, ok := l.get(tp)
	if !ok || cur != epoch {
		return nil, fmt.Errorf("fenced leader epoch %d (leader is at %d)", epoch, cur)
	}
	return log.Read(offset, maxBytes)
}

// recLog wraps a follower Log and checks every append against the
// leader's bytes for the same offsets.
type recLog struct {
	Log
	t      testing.TB
	check  func(first int64, data []byte) error
	errors atomic.Int64
	// verified counts the bytes appended whose batches the follower
	// validated with their slice's CRC32C.
	verified atomic.Int64
	runs     atomic.Int64 // appends of runs of several slices
	buffers  atomic.Int64 // buffers handed to the log: one per append, each part of a run
	appended atomic.Int64 // appends the log took
}

func (r *recLog) AppendAsFollower(b []byte) (kafkalog.AppendInfo, error) {
	r.buffers.Add(1)
	return r.append(b, r.Log.AppendAsFollower)
}

func (r *recLog) AppendVerifiedAsFollower(b []byte) (kafkalog.AppendInfo, error) {
	r.buffers.Add(1)
	info, err := r.append(b, r.Log.AppendVerifiedAsFollower)
	if err == nil {
		r.verified.Add(int64(len(b)))
	}
	return info, err
}

// AppendVerifiedRunAsFollower checks each part of the run against the
// leader's bytes at its own offsets (a run may span leader segments) and
// counts its bytes as verified.
func (r *recLog) AppendVerifiedRunAsFollower(parts [][]byte) (kafkalog.AppendInfo, error) {
	r.runs.Add(1)
	r.buffers.Add(int64(len(parts)))
	if r.check != nil {
		next := r.Log.LogEndOffset()
		for _, part := range parts {
			h, err := kafkalog.ParseBatchHeader(part)
			if err == nil && h.BaseOffset != next {
				err = fmt.Errorf("part starts at %d, want %d", h.BaseOffset, next)
			}
			if err == nil {
				err = r.check(h.BaseOffset, part)
			}
			if err != nil {
				r.t.Errorf("run part at %d: %v", next, err)
				break
			}
			for pos := 0; pos < len(part); {
				h, err := kafkalog.ParseBatchHeader(part[pos:])
				if err != nil {
					break
				}
				next, pos = h.NextOffset(), pos+h.Size()
			}
		}
	}
	info, err := r.Log.(RunAppender).AppendVerifiedRunAsFollower(parts)
	if err != nil {
		r.errors.Add(1)
	} else {
		r.verified.Add(int64(info.Bytes))
		r.appended.Add(1)
	}
	return info, err
}

func (r *recLog) append(b []byte, appendFn func([]byte) (kafkalog.AppendInfo, error)) (kafkalog.AppendInfo, error) {
	leo := r.Log.LogEndOffset()
	if r.check != nil {
		if err := r.check(leo, b); err != nil {
			r.t.Errorf("append at %d: %v", leo, err)
		}
	}
	info, err := appendFn(b)
	if err != nil {
		r.errors.Add(1)
	} else {
		r.appended.Add(1)
	}
	return info, err
}

func logConfig(fs kafkalog.FS, clk clock.Clock) kafkalog.Config {
	return kafkalog.Config{FS: fs, Clock: clk, SegmentBytes: 48 << 10, Logger: slog.New(slog.DiscardHandler)}
}

func openLog(t testing.TB, fs kafkalog.FS, dir string, clk clock.Clock) *kafkalog.Log {
	t.Helper()
	l, err := kafkalog.Open(dir, logConfig(fs, clk))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// fillLeader appends n batches of 1..8 records of 50..400 bytes at epoch.
func fillLeader(t testing.TB, l *kafkalog.Log, rng *rand.Rand, n int, epoch int32) {
	t.Helper()
	for range n {
		vals := make([][]byte, 1+rng.IntN(8))
		for i := range vals {
			vals[i] = make([]byte, 50+rng.IntN(350))
			for j := range vals[i] {
				vals[i][j] = byte(rng.Uint32())
			}
		}
		if _, err := l.AppendAsLeader(kafkalogtest.MakeBatch(0, epoch, vals, t0.UnixMilli()), epoch); err != nil {
			t.Fatal(err)
		}
	}
}

// cutSlices cuts l's batches in [from, to) into combiner slices of at most
// about maxBytes.
func cutSlices(t testing.TB, tp metadata.TopicPartition, l *kafkalog.Log, from, to int64, rng *rand.Rand, maxBytes int) []combiner.Slice {
	t.Helper()
	var out []combiner.Slice
	for off := from; off < to; {
		s, err := l.Slice(off, 1+rng.IntN(maxBytes))
		if err != nil {
			t.Fatal(err)
		}
		if s.LastOffset >= to {
			t.Fatalf("slice [%d, %d] past %d", s.FirstOffset, s.LastOffset, to)
		}
		out = append(out, combiner.Slice{
			TopicPartition: tp, LeaderEpoch: s.LeaderEpoch, BaseOffset: s.FirstOffset, LastOffset: s.LastOffset,
			SegmentBaseOffset: s.SegmentBaseOffset, BasePosition: s.BasePosition, EndPosition: s.EndPosition,
			Data: s.Data,
		})
		off = s.NextOffset
	}
	return out
}

type object struct {
	key     string
	entries []metadata.SliceEntry
}

// packObjects encodes slices (of any partitions) into objects of 1..maxPer
// slices and PUTs them; it returns the objects in order.
func packObjects(t testing.TB, store objstore.Store, prefix string, ss []combiner.Slice, rng *rand.Rand, maxPer int, codec metadata.Codec) []object {
	t.Helper()
	var objs []object
	for i := 0; i < len(ss); {
		n := min(len(ss)-i, 1+rng.IntN(maxPer))
		var in []objformat.Input
		for _, s := range ss[i : i+n] {
			in = append(in, objformat.Input{TopicPartition: s.TopicPartition, LeaderEpoch: s.LeaderEpoch, BaseOffset: s.BaseOffset, LastOffset: s.LastOffset, Data: s.Data})
		}
		body, entries, err := objformat.Encode(in, codec)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%swal/%06d-%x", prefix, len(objs), rng.Uint64())
		if err := store.Put(context.Background(), key, body, objstore.PutOptions{IfNoneMatch: true}); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, object{key, entries})
		i += n
	}
	return objs
}

// interleave merges per-partition slice lists, keeping each partition's
// order, in a random interleaving.
func interleave(rng *rand.Rand, lists ...[]combiner.Slice) []combiner.Slice {
	var out []combiner.Slice
	idx := make([]int, len(lists))
	for {
		var live []int
		for i, l := range lists {
			if idx[i] < len(l) {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			return out
		}
		i := live[rng.IntN(len(live))]
		out = append(out, lists[i][idx[i]])
		idx[i]++
	}
}

// logBytes returns each segment's base offset and bytes.
func logBytes(t testing.TB, l *kafkalog.Log) ([]int64, [][]byte) {
	t.Helper()
	var bases []int64
	var data [][]byte
	for _, s := range l.Segments() {
		b, err := l.ReadSegmentRange(s.BaseOffset, 0, s.Size)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, s.BaseOffset)
		data = append(data, b)
	}
	return bases, data
}

// checkPrefix fails unless follower's segments are the leader's, the last
// one possibly a prefix: byte-identical for every common offset.
func checkPrefix(t testing.TB, leader, follower *kafkalog.Log) {
	t.Helper()
	lb, ld := logBytes(t, leader)
	fb, fd := logBytes(t, follower)
	if len(fb) > len(lb) {
		t.Fatalf("follower has %d segments, leader %d", len(fb), len(lb))
	}
	for i := range fb {
		if fb[i] != lb[i] {
			t.Fatalf("segment %d: follower base %d, leader base %d", i, fb[i], lb[i])
		}
		full := i < len(fb)-1
		if full && !bytes.Equal(fd[i], ld[i]) || !bytes.HasPrefix(ld[i], fd[i]) {
			t.Fatalf("segment %d (base %d): follower bytes (%d) are not the leader's (%d)", i, fb[i], len(fd[i]), len(ld[i]))
		}
	}
}

// checkEqual fails unless the two logs are byte-identical.
func checkEqual(t testing.TB, leader, follower *kafkalog.Log) {
	t.Helper()
	if a, b := leader.LogEndOffset(), follower.LogEndOffset(); a != b {
		t.Fatalf("log end: leader %d, follower %d", a, b)
	}
	checkPrefix(t, leader, follower)
	lb, ld := logBytes(t, leader)
	fb, fd := logBytes(t, follower)
	if !slices.Equal(lb, fb) || !bytes.Equal(bytes.Join(ld, nil), bytes.Join(fd, nil)) {
		t.Fatalf("logs differ")
	}
}

// leaderCheck returns a recLog check that the appended bytes are the
// leader's bytes at the same offsets.
func leaderCheck(leader *kafkalog.Log) func(int64, []byte) error {
	return func(first int64, data []byte) error {
		// A read stops at the end of a leader segment; data (a run's part:
		// slices back to back in one object) may go on into the next.
		for at, off := 0, first; at < len(data); {
			want, err := leader.Read(off, len(data)-at)
			if err != nil {
				return err
			}
			n := min(len(want), len(data)-at)
			if n == 0 || !bytes.Equal(want[:n], data[at:at+n]) {
				return fmt.Errorf("appended %d bytes that are not the leader's (from offset %d, %d bytes in)", len(data), first, at)
			}
			for pos := 0; pos < n; {
				h, err := kafkalog.ParseBatchHeader(want[pos:])
				if err != nil || pos+h.Size() > n {
					break
				}
				off, pos = h.NextOffset(), pos+h.Size()
			}
			at += n
		}
		return nil
	}
}

// waitFor waits until cond holds. With clk non-nil it moves the manual
// clock forward by step while anything waits on it, so timers (hedges,
// backoffs, gap timeouts) fire; no real time is waited for.
func waitFor(t testing.TB, what string, clk *clock.Manual, step time.Duration, cond func() bool, debug func() string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; !cond(); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, debug())
		}
		if clk != nil && i%8 == 7 && clk.Pending() > 0 {
			clk.Advance(step)
		}
		runtime.Gosched()
	}
}

type countReporter struct {
	mu   sync.Mutex
	last map[metadata.TopicPartition]int64
}

func (r *countReporter) ReportLogEnd(tp metadata.TopicPartition, leo int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = make(map[metadata.TopicPartition]int64)
	}
	r.last[tp] = leo
}

func (r *countReporter) get(tp metadata.TopicPartition) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[tp]
}

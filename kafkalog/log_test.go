package kafkalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type env struct {
	fs   *MemFS
	clk  *clock.Manual
	logs *bytes.Buffer
	cfg  Config
	dir  string
	log  *Log
	tb   testing.TB
}

func newEnv(tb testing.TB, cfg Config) *env {
	e := &env{fs: NewMemFS(), clk: clock.NewManual(t0), logs: &bytes.Buffer{}, dir: "/data/topic-0", tb: tb}
	cfg.FS, cfg.Clock = e.fs, e.clk
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.cfg = cfg
	e.open()
	tb.Cleanup(func() {
		if e.log != nil {
			e.log.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.tb.Helper()
	l, err := Open(e.dir, e.cfg)
	if err != nil {
		e.tb.Fatalf("Open: %v", err)
	}
	e.log = l
}

func (e *env) reopen() {
	e.tb.Helper()
	if err := e.log.Close(); err != nil {
		e.tb.Fatalf("Close: %v", err)
	}
	e.open()
}

// crash replaces the FS with what a crash leaves and reopens.
func (e *env) crash(clone *MemFS) {
	e.tb.Helper()
	e.log = nil // the old log's files belong to the old FS; drop it
	e.fs = clone
	e.cfg.FS = clone
	e.open()
}

func batch(n, size int) []byte { return kafkalogtest.MakeBatchN(0, 0, n, size, t0.UnixMilli()) }

func mustAppendLeader(tb testing.TB, l *Log, b []byte, epoch int32) AppendInfo {
	tb.Helper()
	info, err := l.AppendAsLeader(b, epoch)
	if err != nil {
		tb.Fatalf("AppendAsLeader: %v", err)
	}
	return info
}

// readAll reads every batch from LogStartOffset and checks offsets run on.
func readAll(tb testing.TB, l *Log) []BatchHeader {
	tb.Helper()
	var hs []BatchHeader
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		b, err := l.Read(off, 1<<20)
		if err != nil {
			tb.Fatalf("Read(%d): %v", off, err)
		}
		if err := SplitBatches(b, func(h BatchHeader, _ []byte) error {
			if h.BaseOffset != off {
				tb.Fatalf("batch at %d, want %d", h.BaseOffset, off)
			}
			hs = append(hs, h)
			off = h.NextOffset()
			return nil
		}); err != nil {
			tb.Fatalf("Read(%d) returned bad batches: %v", off, err)
		}
	}
	return hs
}

func TestAppendAsLeaderAssignsOffsetsAndEpoch(t *testing.T) {
	e := newEnv(t, Config{})
	in := append(batch(3, 10), batch(2, 10)...)
	orig := bytes.Clone(in)
	info := mustAppendLeader(t, e.log, in, 5)
	if !bytes.Equal(in, orig) {
		t.Fatal("caller's bytes modified")
	}
	want := AppendInfo{FirstOffset: 0, LastOffset: 4, LastEpoch: 5, NumBatches: 2, NumRecords: 5, Bytes: len(in), LastMaxTimestamp: t0.UnixMilli()}
	if len(info.Batches) != 2 || info.Batches[1].BaseOffset != 3 || info.Batches[1].LeaderEpoch != 5 {
		t.Fatalf("batches %+v", info.Batches)
	}
	info.Batches = nil
	if !reflect.DeepEqual(info, want) {
		t.Fatalf("info %+v want %+v", info, want)
	}
	info = mustAppendLeader(t, e.log, batch(1, 10), 5)
	if info.FirstOffset != 5 || info.LastOffset != 5 {
		t.Fatalf("second append %+v", info)
	}
	hs := readAll(t, e.log)
	if len(hs) != 3 || hs[2].BaseOffset != 5 || hs[0].PartitionLeaderEpoch != 5 {
		t.Fatalf("headers %+v", hs)
	}
	if got := e.log.EpochEntries(); len(got) != 1 || got[0] != (EpochEntry{5, 0}) {
		t.Fatalf("epochs %v", got)
	}
	mustAppendLeader(t, e.log, batch(1, 10), 7)
	if got := e.log.EpochEntries(); len(got) != 2 || got[1] != (EpochEntry{7, 6}) {
		t.Fatalf("epochs %v", got)
	}
	if _, err := e.log.AppendAsLeader(batch(1, 10), 6); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("lower epoch: %v", err)
	}
	// An invalid batch anywhere appends nothing.
	bad := append(batch(1, 10), batch(1, 10)...)
	bad[len(bad)-1] ^= 0xff
	if _, err := e.log.AppendAsLeader(bad, 7); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("corrupt: %v", err)
	}
	if e.log.LogEndOffset() != 7 {
		t.Fatalf("LEO %d after rejected append", e.log.LogEndOffset())
	}
	small := newEnv(t, Config{MaxBatchBytes: 100})
	if _, err := small.log.AppendAsLeader(batch(1, 100), 0); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}

func TestAppendAsFollower(t *testing.T) {
	e := newEnv(t, Config{})
	b0 := kafkalogtest.MakeBatchN(0, 1, 2, 5, 1)
	b2 := kafkalogtest.MakeBatchN(2, 1, 3, 5, 7)
	b5 := kafkalogtest.MakeBatchN(5, 3, 1, 5, 1)
	info, err := e.log.AppendAsFollower(append(bytes.Clone(b0), b2...))
	if err != nil || info.LastOffset != 4 || info.NumBatches != 2 || info.LastMaxTimestamp != 7 {
		t.Fatalf("append: %+v %v", info, err)
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"duplicate", b2, ErrOffsetOverlap},
		{"gap", kafkalogtest.MakeBatchN(6, 3, 1, 5, 1), ErrOffsetGap},
		{"not contiguous inside", append(bytes.Clone(b5), kafkalogtest.MakeBatchN(7, 3, 1, 5, 1)...), ErrOffsetGap},
		{"epoch regression", kafkalogtest.MakeBatchN(5, 0, 1, 5, 1), ErrEpochRegression},
		{"corrupt second", append(bytes.Clone(b5), b0[:20]...), ErrCorruptBatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.log.AppendAsFollower(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err %v want %v", err, tt.want)
			}
			if e.log.LogEndOffset() != 5 {
				t.Fatalf("LEO moved to %d", e.log.LogEndOffset())
			}
		})
	}
	var oe *OffsetError
	if _, err := e.log.AppendAsFollower(b2); !errors.As(err, &oe) || oe.Expected != 5 || oe.Got != 2 {
		t.Fatalf("OffsetError %+v", oe)
	}
	if _, err := e.log.AppendAsFollower(b5); err != nil {
		t.Fatal(err)
	}
	want := []EpochEntry{{1, 0}, {3, 5}}
	if got := e.log.EpochEntries(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("epochs %v", got)
	}
	// Follower bytes are stored exactly.
	seg := e.log.Segments()[0]
	raw, err := e.log.ReadSegmentRange(seg.BaseOffset, 0, seg.Size)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, bytes.Join([][]byte{b0, b2, b5}, nil)) {
		t.Fatal("segment bytes differ from the appended bytes")
	}
}

func TestReadSemantics(t *testing.T) {
	e := newEnv(t, Config{IndexIntervalBytes: 100})
	var sizes []int
	for i := 0; i < 50; i++ {
		info := mustAppendLeader(t, e.log, batch(1+i%3, 40), 0)
		sizes = append(sizes, info.Bytes)
	}
	leo := e.log.LogEndOffset()
	if b, err := e.log.Read(leo, 100); err != nil || b == nil || len(b) != 0 {
		t.Fatalf("Read(LEO) = %v, %v", b, err)
	}
	for _, off := range []int64{-1, leo + 1} {
		if _, err := e.log.Read(off, 100); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("Read(%d): %v", off, err)
		}
	}
	// Every offset is found in the batch containing it, and maxBytes 1
	// still returns one whole batch.
	for off := int64(0); off < leo; off++ {
		b, err := e.log.Read(off, 1)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatalf("Read(%d,1): %v", off, err)
		}
		if off < h.BaseOffset || off > h.LastOffset() {
			t.Fatalf("Read(%d) gave batch [%d,%d]", off, h.BaseOffset, h.LastOffset())
		}
		pos, err := e.log.PositionOf(off)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := e.log.ReadSegmentRange(pos.SegmentBaseOffset, pos.Position, pos.Position+int64(len(b)))
		if err != nil || !bytes.Equal(raw, b) {
			t.Fatalf("PositionOf(%d)=%+v does not hold the batch: %v", off, pos, err)
		}
	}
	// maxBytes cuts at whole batches.
	b, err := e.log.Read(0, sizes[0]+sizes[1]+sizes[2]-1)
	if err != nil || len(b) != sizes[0]+sizes[1] {
		t.Fatalf("Read(0, 3 batches-1) = %d bytes, %v; want %d", len(b), err, sizes[0]+sizes[1])
	}
	if len(e.log.mu.segs[0].index) < 10 {
		t.Fatalf("index has %d entries; interval not applied", len(e.log.mu.segs[0].index))
	}
}

func TestRollOnSizeAndTime(t *testing.T) {
	one := len(batch(1, 100))
	e := newEnv(t, Config{SegmentBytes: int64(3 * one), SegmentMs: 1000})
	for i := 0; i < 7; i++ {
		mustAppendLeader(t, e.log, batch(1, 100), 0)
	}
	segs := e.log.Segments()
	if len(segs) != 3 || segs[1].BaseOffset != 3 || segs[2].BaseOffset != 6 || segs[0].Size != int64(3*one) {
		t.Fatalf("segments %+v", segs)
	}
	if !strings.HasSuffix(segs[1].Path, "00000000000000000003.log") {
		t.Fatalf("path %s", segs[1].Path)
	}
	// One append of many batches splits across segments at batch boundaries.
	many := bytes.Repeat(batch(1, 100), 5)
	mustAppendLeader(t, e.log, many, 0)
	if n := len(e.log.Segments()); n != 4 {
		t.Fatalf("%d segments after a 5-batch append", n)
	}
	if hs := readAll(t, e.log); len(hs) != 12 {
		t.Fatalf("%d batches", len(hs))
	}
	// Index files of rolled segments exist in Kafka's layout.
	if _, err := e.fs.FileBytes(e.dir + "/00000000000000000000.index"); err != nil {
		t.Fatal(err)
	}

	tm := newEnv(t, Config{SegmentMs: 1000})
	mustAppendLeader(t, tm.log, batch(1, 1), 0)
	tm.clk.Advance(999 * time.Millisecond)
	mustAppendLeader(t, tm.log, batch(1, 1), 0)
	if n := len(tm.log.Segments()); n != 1 {
		t.Fatalf("rolled early: %d segments", n)
	}
	tm.clk.Advance(time.Millisecond)
	mustAppendLeader(t, tm.log, batch(1, 1), 0)
	if segs := tm.log.Segments(); len(segs) != 2 || segs[1].BaseOffset != 2 {
		t.Fatalf("time roll: %+v", segs)
	}
}

func TestSliceStopsAtEpochAndSegment(t *testing.T) {
	one := len(batch(1, 50))
	e := newEnv(t, Config{SegmentBytes: int64(4 * one)})
	for i := 0; i < 3; i++ {
		mustAppendLeader(t, e.log, batch(1, 50), 1)
	}
	mustAppendLeader(t, e.log, batch(1, 50), 2) // offset 3, same segment, new epoch
	mustAppendLeader(t, e.log, batch(1, 50), 2) // offset 4, new segment
	tests := []struct {
		from, max             int64
		first, last, next     int64
		epoch                 int32
		segBase, basePos, end int64
	}{
		{0, 1 << 20, 0, 2, 3, 1, 0, 0, int64(3 * one)},
		{0, int64(2*one) - 1, 0, 0, 1, 1, 0, 0, int64(one)},
		{1, 1, 1, 1, 2, 1, 0, int64(one), int64(2 * one)},
		{3, 1 << 20, 3, 3, 4, 2, 0, int64(3 * one), int64(4 * one)},
		{4, 1 << 20, 4, 4, 5, 2, 4, 0, int64(one)},
	}
	for _, tt := range tests {
		s, err := e.log.Slice(tt.from, int(tt.max))
		if err != nil {
			t.Fatalf("Slice(%d): %v", tt.from, err)
		}
		if s.FirstOffset != tt.first || s.LastOffset != tt.last || s.NextOffset != tt.next || s.LeaderEpoch != tt.epoch ||
			s.SegmentBaseOffset != tt.segBase || s.BasePosition != tt.basePos || s.EndPosition != tt.end {
			t.Fatalf("Slice(%d,%d) = %+v", tt.from, tt.max, s)
		}
		raw, _ := e.log.ReadSegmentRange(s.SegmentBaseOffset, s.BasePosition, s.EndPosition)
		if !bytes.Equal(raw, s.Data) {
			t.Fatalf("Slice(%d) data differs from the file", tt.from)
		}
		// SliceAt from the known position gives the same slice.
		at, err := e.log.SliceAt(SegmentPosition{SegmentBaseOffset: s.SegmentBaseOffset, Position: s.BasePosition}, tt.from, int(tt.max))
		if err != nil || !reflect.DeepEqual(at, s) {
			t.Fatalf("SliceAt(%d,%d) = %+v, %v; Slice gave %+v", tt.from, tt.max, at, err, s)
		}
		// SliceAtInto gives the same slice, read into the caller's
		// buffer (a dirty one: every byte is overwritten), unless its
		// first batch is longer than max and goes whole.
		var buf []byte
		into, err := e.log.SliceAtInto(SegmentPosition{SegmentBaseOffset: s.SegmentBaseOffset, Position: s.BasePosition}, tt.from, int(tt.max),
			func(n int) []byte { buf = bytes.Repeat([]byte{0xee}, n); return buf })
		if err != nil || !reflect.DeepEqual(into, s) {
			t.Fatalf("SliceAtInto(%d,%d) = %+v, %v; Slice gave %+v", tt.from, tt.max, into, err, s)
		}
		if inBuf := len(into.Data) > 0 && len(buf) > 0 && &into.Data[0] == &buf[0]; inBuf != (int64(len(s.Data)) <= tt.max) {
			t.Fatalf("SliceAtInto(%d,%d): data in the caller's buffer %v, want %v", tt.from, tt.max, inBuf, !inBuf)
		}
	}
	if s, err := e.log.Slice(5, 100); err != nil || len(s.Data) != 0 || s.NextOffset != 5 {
		t.Fatalf("Slice(LEO) = %+v, %v", s, err)
	}
	if s, err := e.log.SliceAt(SegmentPosition{SegmentBaseOffset: 4, Position: int64(one)}, 5, 100); err != nil || len(s.Data) != 0 || s.NextOffset != 5 {
		t.Fatalf("SliceAt(LEO) = %+v, %v", s, err)
	}
	// A position that is not where the offset's batch starts is refused.
	for _, bad := range []SegmentPosition{{0, int64(one)}, {0, 1}, {4, 0}, {7, 0}, {0, int64(4 * one)}, {0, -1}} {
		if _, err := e.log.SliceAt(bad, 0, 1<<20); !errors.Is(err, ErrNotBatchBoundary) {
			t.Fatalf("SliceAt(%+v, 0): %v, want ErrNotBatchBoundary", bad, err)
		}
	}
	mustAppendLeader(t, e.log, batch(3, 5), 2)
	if _, err := e.log.Slice(6, 100); !errors.Is(err, ErrNotBatchBoundary) {
		t.Fatalf("inside a batch: %v", err)
	}
}

func TestTruncate(t *testing.T) {
	one := len(batch(2, 50))
	e := newEnv(t, Config{SegmentBytes: int64(2 * one)})
	for i := int32(0); i < 6; i++ {
		mustAppendLeader(t, e.log, batch(2, 50), i/2) // epochs 0,0,1,1,2,2 at offsets 0,2,..,10
	}
	if err := e.log.SetHighWatermark(12); err != nil {
		t.Fatal(err)
	}
	if err := e.log.Truncate(5); !errors.Is(err, ErrNotBatchBoundary) {
		t.Fatalf("inside batch: %v", err)
	}
	ch := e.log.AppendNotify()
	if err := e.log.Truncate(6); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("truncation did not notify")
	}
	if e.log.LogEndOffset() != 6 || e.log.HighWatermark() != 6 {
		t.Fatalf("LEO %d HW %d", e.log.LogEndOffset(), e.log.HighWatermark())
	}
	if got := e.log.EpochEntries(); len(got) != 2 || got[1] != (EpochEntry{1, 4}) {
		t.Fatalf("epochs %v", got)
	}
	if segs := e.log.Segments(); len(segs) != 2 || segs[1].Size != int64(one) {
		t.Fatalf("segments %+v", segs)
	}
	if _, err := e.fs.FileBytes(e.dir + "/00000000000000000008.log"); err == nil {
		t.Fatal("later segment file still exists")
	}
	info := mustAppendLeader(t, e.log, batch(2, 50), 3)
	if info.FirstOffset != 6 {
		t.Fatalf("append after truncate at %d", info.FirstOffset)
	}
	e.reopen()
	if hs := readAll(t, e.log); len(hs) != 4 || hs[3].PartitionLeaderEpoch != 3 {
		t.Fatalf("after reopen: %+v", hs)
	}
	if e, o := e.log.EndOffsetForEpoch(1); e != 1 || o != 6 {
		t.Fatalf("EndOffsetForEpoch(1) = %d, %d", e, o)
	}
	if err := e.log.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if e.log.LogEndOffset() != 0 || len(e.log.EpochEntries()) != 0 {
		t.Fatalf("truncate to 0: LEO %d epochs %v", e.log.LogEndOffset(), e.log.EpochEntries())
	}
	if err := e.log.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if e.log.LogStartOffset() != 100 || e.log.LogEndOffset() != 100 || e.log.HighWatermark() != 100 {
		t.Fatal("TruncateFullyAndStartAt")
	}
	if info := mustAppendLeader(t, e.log, batch(1, 5), 4); info.FirstOffset != 100 {
		t.Fatalf("first offset %d", info.FirstOffset)
	}
	e.reopen()
	if e.log.LogStartOffset() != 100 || e.log.LogEndOffset() != 101 {
		t.Fatalf("reopen: start %d end %d", e.log.LogStartOffset(), e.log.LogEndOffset())
	}
}

func TestRetention(t *testing.T) {
	one := len(batch(1, 50))
	e := newEnv(t, Config{SegmentBytes: int64(one), RetentionMs: 60_000})
	for i := 0; i < 5; i++ {
		b := kafkalogtest.MakeBatchN(0, 0, 1, 50, t0.UnixMilli()+int64(i)*10_000)
		mustAppendLeader(t, e.log, b, 0)
	}
	e.log.SetHighWatermark(1)
	e.clk.Advance(75 * time.Second) // batches 0 and 1 are older than 60 s
	n, err := e.log.DeleteRetentionExpired(math.MaxInt64)
	if err != nil || n != 1 {
		t.Fatalf("deleted %d, %v; want 1 (the high watermark holds the second)", n, err)
	}
	e.log.SetHighWatermark(5)
	if n, err := e.log.DeleteRetentionExpired(math.MaxInt64); err != nil || n != 1 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if e.log.LogStartOffset() != 2 {
		t.Fatalf("log start %d", e.log.LogStartOffset())
	}
	if _, err := e.log.Read(1, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	e.clk.Advance(time.Hour)
	if n, _ := e.log.DeleteRetentionExpired(math.MaxInt64); n != 2 || len(e.log.Segments()) != 1 {
		t.Fatalf("deleted %d, active must stay", n)
	}
	e.reopen()
	if e.log.LogStartOffset() != 4 || e.log.LogEndOffset() != 5 {
		t.Fatalf("after reopen start %d end %d", e.log.LogStartOffset(), e.log.LogEndOffset())
	}

	// A bound below the high watermark (the remote-WAL upload) holds segments too.
	c := newEnv(t, Config{SegmentBytes: int64(one), RetentionMs: 1})
	for i := 0; i < 4; i++ {
		mustAppendLeader(t, c.log, batch(1, 50), 0)
	}
	c.log.SetHighWatermark(4)
	c.clk.Advance(time.Hour)
	if n, err := c.log.DeleteRetentionExpired(2); err != nil || n != 2 || c.log.LogStartOffset() != 2 {
		t.Fatalf("bounded at 2: deleted %d, %v, start %d", n, err, c.log.LogStartOffset())
	}

	b := newEnv(t, Config{SegmentBytes: int64(one), RetentionBytes: int64(2 * one), RetentionMs: -1})
	for i := 0; i < 5; i++ {
		mustAppendLeader(t, b.log, batch(1, 50), 0)
	}
	b.log.SetHighWatermark(5)
	if n, _ := b.log.DeleteRetentionExpired(math.MaxInt64); n != 3 || b.log.LogStartOffset() != 3 {
		t.Fatalf("bytes retention deleted %d, start %d", n, b.log.LogStartOffset())
	}
}

func TestReopenRestoresState(t *testing.T) {
	e := newEnv(t, Config{SegmentBytes: 1000, HighWatermarkCheckpointMs: -1})
	for i := int32(0); i < 20; i++ {
		mustAppendLeader(t, e.log, batch(2, 60), i/5)
	}
	if err := e.log.SetHighWatermark(30); err != nil {
		t.Fatal(err)
	}
	before := readAll(t, e.log)
	epochs := e.log.EpochEntries()
	e.reopen()
	after := readAll(t, e.log)
	if len(before) != len(after) || e.log.HighWatermark() != 30 || e.log.LogEndOffset() != 40 {
		t.Fatalf("reopen: %d vs %d batches, HW %d", len(before), len(after), e.log.HighWatermark())
	}
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("batch %d differs", i)
		}
	}
	if got := e.log.EpochEntries(); len(got) != len(epochs) || got[3] != epochs[3] {
		t.Fatalf("epochs %v want %v", got, epochs)
	}
	if v, ok := e.log.LatestEpoch(); !ok || v != 3 {
		t.Fatalf("latest epoch %d %v", v, ok)
	}
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.Read(0, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := e.log.AppendAsLeader(batch(1, 1), 3); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	e.open()
}

func TestRecoveryTruncatesTornTail(t *testing.T) {
	e := newEnv(t, Config{})
	for i := 0; i < 3; i++ {
		mustAppendLeader(t, e.log, batch(2, 30), 0)
	}
	e.log.Close()
	seg := e.dir + "/00000000000000000000.log"
	data, _ := e.fs.FileBytes(seg)
	good := len(data)
	torn := append(data, batch(1, 30)[:40]...)
	if err := e.fs.WriteFile(seg, torn); err != nil {
		t.Fatal(err)
	}
	e.open()
	if e.log.LogEndOffset() != 6 || e.log.Segments()[0].Size != int64(good) {
		t.Fatalf("LEO %d size %d", e.log.LogEndOffset(), e.log.Segments()[0].Size)
	}
	if !strings.Contains(e.logs.String(), "droppedBytes=40") || !strings.Contains(e.logs.String(), "position="+strconv.Itoa(good)) {
		t.Fatalf("no warning with dropped bytes and position:\n%s", e.logs.String())
	}
	if got, _ := e.fs.FileBytes(seg); len(got) != good {
		t.Fatalf("file not truncated: %d", len(got))
	}
	// A flipped byte in the middle batch drops it and the one after.
	e.log.Close()
	data, _ = e.fs.FileBytes(seg)
	one := len(batch(2, 30))
	data[one+70] ^= 1
	e.fs.WriteFile(seg, data)
	e.open()
	if e.log.LogEndOffset() != 2 {
		t.Fatalf("LEO %d after corruption of the second batch", e.log.LogEndOffset())
	}
}

func TestAppendNotify(t *testing.T) {
	e := newEnv(t, Config{})
	ch := e.log.AppendNotify()
	if ch2 := e.log.AppendNotify(); ch2 != ch {
		t.Fatal("two channels before an append")
	}
	select {
	case <-ch:
		t.Fatal("fired before append")
	default:
	}
	mustAppendLeader(t, e.log, batch(1, 1), 0)
	select {
	case <-ch:
	default:
		t.Fatal("not fired by append")
	}
	ch = e.log.AppendNotify()
	e.log.Close()
	<-ch // Close wakes waiters; a hang here fails the test by timeout
	e.log = nil
}

// OnChange is called after each change a reader can see, after the
// change is visible and with no lock held (the hook reads the log).
func TestOnChange(t *testing.T) {
	var e *env
	var seen []string
	cfg := Config{SegmentBytes: 200}
	cfg.OnChange = func() {
		seen = append(seen, fmt.Sprintf("leo=%d hw=%d start=%d", e.log.LogEndOffset(), e.log.HighWatermark(), e.log.LogStartOffset()))
	}
	e = newEnv(t, cfg)
	for range 4 {
		mustAppendLeader(t, e.log, batch(1, 100), 0)
	}
	if err := e.log.SetHighWatermark(3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.IncrementLogStartOffset(2); err != nil {
		t.Fatal(err)
	}
	if err := e.log.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if err := e.log.TruncateFullyAndStartAt(10); err != nil {
		t.Fatal(err)
	}
	want := []string{"leo=1 hw=0 start=0", "leo=2 hw=0 start=0", "leo=3 hw=0 start=0", "leo=4 hw=0 start=0",
		"leo=4 hw=3 start=0", "leo=4 hw=3 start=2", "leo=3 hw=3 start=2", "leo=10 hw=10 start=10"}
	if !slices.Equal(seen, want) {
		t.Fatalf("OnChange saw\n%q\nwant\n%q", seen, want)
	}
}

func TestWriteFaultAppendsNothing(t *testing.T) {
	e := newEnv(t, Config{})
	mustAppendLeader(t, e.log, batch(1, 10), 0)
	boom := errors.New("boom")
	e.fs.SetFault(func(op FSOp, name string) error {
		if op == OpWrite && strings.HasSuffix(name, ".log") {
			return boom
		}
		return nil
	})
	if _, err := e.log.AppendAsLeader(batch(1, 10), 0); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	e.fs.SetFault(nil)
	if e.log.LogEndOffset() != 1 {
		t.Fatalf("LEO %d", e.log.LogEndOffset())
	}
	if info := mustAppendLeader(t, e.log, batch(1, 10), 0); info.FirstOffset != 1 {
		t.Fatalf("next append at %d", info.FirstOffset)
	}
	if hs := readAll(t, e.log); len(hs) != 2 {
		t.Fatalf("%d batches", len(hs))
	}
	// A failed fsync fails the log.
	e.fs.SetFault(func(op FSOp, name string) error {
		if op == OpSync {
			return boom
		}
		return nil
	})
	if err := e.log.Flush(); !errors.Is(err, boom) {
		t.Fatalf("flush: %v", err)
	}
	e.fs.SetFault(nil)
	if _, err := e.log.AppendAsLeader(batch(1, 10), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failed fsync: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{SegmentBytes: 10}, {SegmentBytes: 1 << 32}, {SegmentMs: -1}, {RetentionMs: -2}, {RetentionBytes: -5},
		{FlushMessages: -1}, {FlushMs: -1}, {IndexIntervalBytes: -1}, {MaxBatchBytes: 10},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	var c Config
	if err := c.Validate(); err != nil || c.SegmentBytes != 1<<30 || c.IndexIntervalBytes != 4096 || c.FS == nil || c.Clock == nil {
		t.Fatalf("defaults %+v %v", c, err)
	}
}

func TestCheckpointFormat(t *testing.T) {
	e := newEnv(t, Config{HighWatermarkCheckpointMs: -1})
	mustAppendLeader(t, e.log, batch(2, 1), 3)
	mustAppendLeader(t, e.log, batch(2, 1), 5)
	e.log.SetHighWatermark(3)
	if err := e.log.Flush(); err != nil { // appends leave the epoch checkpoint to Flush, roll and Close
		t.Fatal(err)
	}
	b, err := e.fs.FileBytes(e.dir + "/leader-epoch-checkpoint")
	if err != nil || string(b) != "0\n2\n3 0\n5 2\n" {
		t.Fatalf("leader-epoch-checkpoint %q %v", b, err)
	}
	b, _ = e.fs.FileBytes(e.dir + "/replication-offset-checkpoint")
	if string(b) != "0\n1\n3\n" {
		t.Fatalf("hw checkpoint %q", b)
	}
	var _ io.ReaderAt = (*memFile)(nil)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestAppendInfoBatches(t *testing.T) {
	l := newEnv(t, Config{}).log
	a := testBatchP(t, 7, 3, 10, 2)
	b := testBatchP(t, -1, -1, -1, 1)
	info, err := l.AppendAsLeader(append(append([]byte{}, a...), b...), 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []BatchInfo{
		{BaseOffset: 0, LastOffset: 1, LeaderEpoch: 4, ProducerID: 7, ProducerEpoch: 3, BaseSequence: 10, LastOffsetDelta: 1, RecordCount: 2},
		{BaseOffset: 2, LastOffset: 2, LeaderEpoch: 4, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastOffsetDelta: 0, RecordCount: 1},
	}
	for i := range want {
		want[i].MaxTimestamp = info.Batches[i].MaxTimestamp
	}
	if !reflect.DeepEqual(info.Batches, want) {
		t.Fatalf("batches\n got %+v\nwant %+v", info.Batches, want)
	}
	if got := want[0]; got.LastSequence() != 11 {
		t.Fatalf("last sequence %d", got.LastSequence())
	}
	// The follower path reports the same headers for the same bytes.
	f := newEnv(t, Config{}).log
	data, _ := l.Read(0, 1<<20)
	finfo, err := f.AppendAsFollower(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(finfo.Batches, info.Batches) {
		t.Fatalf("follower batches %+v, leader %+v", finfo.Batches, info.Batches)
	}
}

func TestIncrementSequenceWraps(t *testing.T) {
	for _, c := range []struct{ seq, n, want int32 }{
		{0, 0, 0}, {5, 4, 9}, {math.MaxInt32, 0, math.MaxInt32}, {math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1}, {math.MaxInt32 - 4, 4, math.MaxInt32},
	} {
		if got := IncrementSequence(c.seq, c.n); got != c.want {
			t.Errorf("IncrementSequence(%d, %d) = %d, want %d", c.seq, c.n, got, c.want)
		}
	}
}

// testBatchP is a batch of n records by producer pid (-1: none) at epoch
// and base sequence seq.
func testBatchP(tb testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	tb.Helper()
	recs := make([]kafkalogtest.Record, n)
	for i := range recs {
		recs[i] = kafkalogtest.Record{Value: []byte{byte(i), byte(seq)}}
	}
	if pid < 0 {
		pid = 0 // Encode writes 0 as -1
	}
	return kafkalogtest.Encode(kafkalogtest.BatchSpec{
		BaseTimestamp: t0.UnixMilli(), ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Records: recs,
	})
}

// TestEndPositionMatchesPositionOf: EndPosition is PositionOf(LogEndOffset)
// without the lookup, across appends and segment rolls.
func TestEndPositionMatchesPositionOf(t *testing.T) {
	one := len(batch(1, 100))
	e := newEnv(t, Config{SegmentBytes: int64(3 * one)})
	for i := 0; i < 8; i++ {
		leo, end := e.log.EndPosition()
		pos, err := e.log.PositionOf(leo)
		if err != nil || leo != e.log.LogEndOffset() || pos != end {
			t.Fatalf("after %d appends: EndPosition %d %+v, PositionOf %+v, %v", i, leo, end, pos, err)
		}
		mustAppendLeader(t, e.log, batch(1, 100), 0)
	}
	if n := len(e.log.Segments()); n < 3 {
		t.Fatalf("%d segments; the test needs rolls", n)
	}
}

package kafkalog

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// table returns a copy of the log's producer table.
func table(l *Log) map[int64]ProducerEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := map[int64]ProducerEntry{}
	for id := range l.mu.producers.m {
		out[id], _ = l.mu.producers.entry(id)
	}
	return out
}

// replayed is the table a replay of every batch in the log gives: what
// the log's table must equal whatever happened to it (no retention).
func replayed(tb testing.TB, l *Log) map[int64]ProducerEntry {
	tb.Helper()
	st := newProducerState(l.LogStartOffset())
	for _, h := range readAll(tb, l) {
		st.update(batchInfoOf(h))
	}
	out := map[int64]ProducerEntry{}
	for id := range st.m {
		out[id], _ = st.entry(id)
	}
	return out
}

func sameTable(tb testing.TB, what string, got, want map[int64]ProducerEntry) {
	tb.Helper()
	norm := func(m map[int64]ProducerEntry) map[int64]ProducerEntry {
		for id, e := range m {
			if len(e.Batches) == 0 {
				e.Batches = nil
			}
			m[id] = e
		}
		return m
	}
	if !reflect.DeepEqual(norm(got), norm(want)) {
		tb.Fatalf("%s: producer table\n got %+v\nwant %+v", what, got, want)
	}
}

func snapshotFiles(tb testing.TB, e *env) []int64 {
	tb.Helper()
	e.log.writeMu.Lock()
	defer e.log.writeMu.Unlock()
	offs, err := e.log.snapshotOffsets()
	if err != nil {
		tb.Fatal(err)
	}
	return offs
}

func TestProducerStateUpdateKeepsWindow(t *testing.T) {
	st := newProducerState(0)
	off := int64(0)
	for seq := int32(0); seq < 8; seq++ {
		st.update(BatchInfo{BaseOffset: off, LastOffset: off + 1, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 2 * seq, LastOffsetDelta: 1, RecordCount: 2})
		off += 2
	}
	e, _ := st.entry(9)
	if len(e.Batches) != ProducerBatchWindow || e.Batches[0].FirstSeq != 6 || e.Batches[4].LastSeq != 15 {
		t.Fatalf("window %+v", e.Batches)
	}
	// A newer epoch starts afresh; a control batch moves the epoch only.
	st.update(BatchInfo{BaseOffset: off, LastOffset: off, ProducerID: 9, ProducerEpoch: 3, Control: true})
	if e, _ := st.entry(9); e.Epoch != 3 || len(e.Batches) != 0 {
		t.Fatalf("after marker %+v", e)
	}
	st.update(BatchInfo{BaseOffset: off + 1, LastOffset: off + 1, ProducerID: -1})
	if len(st.m) != 1 || st.end != off+2 {
		t.Fatalf("non-idempotent batch changed the table: %d producers, end %d", len(st.m), st.end)
	}
}

// TestProducerStateSurvivesEverything drives a log with small segments
// through seeded random appends (several producers, epoch bumps, batches
// without a producer), truncations, clean reopens, crashes that drop
// unsynced bytes, corrupted and deleted snapshots, and checks after each
// step that the producer table equals a replay of the whole log.
func TestProducerStateSurvivesEverything(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		e := newEnv(t, Config{SegmentBytes: 600, IndexIntervalBytes: 128, FlushMessages: int64(1 + rng.IntN(8)), ProducerSnapshots: 1 + rng.IntN(3)})
		seq := map[int64]int32{}
		epoch := map[int64]int16{}
		var leaderEpoch int32
		maxSegs := 0
		for step := 0; step < 120; step++ {
			what := ""
			switch r := rng.IntN(100); {
			case r < 70:
				what = "append"
				var in []byte
				for n := 1 + rng.IntN(2); n > 0; n-- {
					pid := int64(rng.IntN(5)) // 0: no producer
					if pid == 0 {
						in = append(in, testBatchP(t, -1, -1, -1, 1+rng.IntN(3))...)
						continue
					}
					if rng.IntN(15) == 0 {
						epoch[pid]++
						seq[pid] = 0
					}
					k := 1 + rng.IntN(3)
					in = append(in, testBatchP(t, pid, epoch[pid], seq[pid], k)...)
					seq[pid] += int32(k)
				}
				if rng.IntN(20) == 0 {
					leaderEpoch++
				}
				mustAppendLeader(t, e.log, in, leaderEpoch)
			case r < 78:
				hs := readAll(t, e.log)
				if len(hs) == 0 {
					continue
				}
				to := hs[rng.IntN(len(hs))].BaseOffset
				what = "truncate"
				if err := e.log.Truncate(to); err != nil {
					t.Fatalf("seed %d: truncate %d: %v", seed, to, err)
				}
				for _, o := range snapshotFiles(t, e) {
					if o > to {
						t.Fatalf("seed %d: snapshot %d survived truncation to %d", seed, o, to)
					}
				}
				// The client's sequences are not the log's any more; the
				// test only checks the table, so carry on from the log.
			case r < 86:
				what = "reopen"
				e.reopen()
			case r < 94:
				what = "crash"
				e.crash(e.fs.CrashClone(rng))
			default:
				e.log.Close() // writes a snapshot at the log end
				offs := snapshotFiles(t, e)
				path := e.log.snapshotPath(offs[len(offs)-1])
				e.log = nil
				what = "corrupt snapshot"
				f, err := e.fs.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				size, _ := f.Size()
				b := make([]byte, 1)
				pos := rng.Int64N(size)
				f.ReadAt(b, pos)
				b[0] ^= 1 << rng.IntN(8)
				f.WriteAt(b, pos)
				f.Sync()
				f.Close()
				e.logs.Reset()
				e.open()
				if !strings.Contains(e.logs.String(), "unusable producer-state snapshot") {
					t.Fatalf("seed %d: corrupt snapshot not logged:\n%s", seed, e.logs.String())
				}
			}
			sameTable(t, what, table(e.log), replayed(t, e.log))
			maxSegs = max(maxSegs, len(e.log.Segments()))
			if n := len(snapshotFiles(t, e)); n > e.cfg.ProducerSnapshots {
				t.Fatalf("seed %d: %d snapshots kept, bound %d", seed, n, e.cfg.ProducerSnapshots)
			}
		}
		if maxSegs < 3 {
			t.Fatalf("seed %d: at most %d segments: the test did not roll", seed, maxSegs)
		}
	}
}

// TestProducerStateFromSnapshotBeyondLogStart: retention deletes the
// segments holding a producer's batches; its state survives through the
// snapshot at the new log start, and older snapshots are deleted.
func TestProducerStateFromSnapshotBeyondLogStart(t *testing.T) {
	one := len(testBatchP(t, 5, 0, 0, 1))
	e := newEnv(t, Config{SegmentBytes: int64(one), RetentionMs: 60_000, ProducerSnapshots: 10})
	mustAppendLeader(t, e.log, testBatchP(t, 5, 0, 0, 1), 0)
	mustAppendLeader(t, e.log, testBatchP(t, 5, 0, 1, 1), 0)
	for i := 0; i < 3; i++ {
		mustAppendLeader(t, e.log, testBatchP(t, 6, 0, int32(i), 1), 0)
	}
	want := table(e.log)
	if got := snapshotFiles(t, e); !reflect.DeepEqual(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("snapshots %v, want one per roll", got)
	}
	e.log.SetHighWatermark(5)
	e.clk.Advance(time.Hour)
	if n, err := e.log.DeleteRetentionExpired(math.MaxInt64); err != nil || n != 4 {
		t.Fatalf("retention deleted %d, %v", n, err)
	}
	if got := snapshotFiles(t, e); !reflect.DeepEqual(got, []int64{4}) {
		t.Fatalf("snapshots %v after retention, want [4]", got)
	}
	if err := e.log.Flush(); err != nil {
		t.Fatal(err)
	}
	e.crash(e.fs.CrashClone(rand.New(rand.NewPCG(1, 1))))
	sameTable(t, "after retention and crash", table(e.log), want)
	if pe, ok := e.log.ProducerEntry(5); !ok || pe.Batches[len(pe.Batches)-1].LastSeq != 1 {
		t.Fatalf("producer 5 lost: %+v %v", pe, ok)
	}
}

func TestProducerStateRebuildDisabled(t *testing.T) {
	e := newEnv(t, Config{SegmentBytes: 200, ProducerStateRebuildDisabled: true})
	for i := int32(0); i < 5; i++ {
		mustAppendLeader(t, e.log, testBatchP(t, 3, 0, i, 2), 0)
	}
	if _, ok := e.log.ProducerEntry(3); !ok {
		t.Fatal("appends must still be tracked")
	}
	e.reopen()
	if _, ok := e.log.ProducerEntry(3); ok || len(snapshotFiles(t, e)) != 0 {
		t.Fatal("rebuild disabled, yet state came back or snapshots were written")
	}
}

func TestTruncateFullyForgetsProducers(t *testing.T) {
	e := newEnv(t, Config{SegmentBytes: 200})
	for i := int32(0); i < 5; i++ {
		mustAppendLeader(t, e.log, testBatchP(t, 3, 0, i, 2), 0)
	}
	if err := e.log.TruncateFullyAndStartAt(4); err != nil {
		t.Fatal(err)
	}
	if e.log.ProducerCount() != 0 || len(snapshotFiles(t, e)) != 0 {
		t.Fatalf("%d producers, snapshots %v", e.log.ProducerCount(), snapshotFiles(t, e))
	}
	e.reopen()
	if e.log.ProducerCount() != 0 {
		t.Fatal("producers back after reopen")
	}
}

func TestProducerSnapshotCodec(t *testing.T) {
	st := newProducerState(100)
	st.update(BatchInfo{BaseOffset: 10, LastOffset: 12, ProducerID: 1 << 40, ProducerEpoch: 7, BaseSequence: 2147483646, LastOffsetDelta: 2, MaxTimestamp: -1})
	st.update(BatchInfo{BaseOffset: 20, LastOffset: 20, ProducerID: 3, ProducerEpoch: 0, BaseSequence: 0})
	st.update(BatchInfo{BaseOffset: 21, LastOffset: 21, ProducerID: 4, ProducerEpoch: 1, Control: true})
	st.end = 100
	b := encodeProducerSnapshot(&st)
	got, err := decodeProducerSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.end, st.end) || len(got.m) != 3 {
		t.Fatalf("decoded %+v", got)
	}
	for id, e := range st.m {
		g := got.m[id]
		if g.Epoch != e.Epoch || !reflect.DeepEqual(append([]ProducerBatch{}, g.Batches...), append([]ProducerBatch{}, e.Batches...)) {
			t.Fatalf("producer %d: %+v, want %+v", id, g, e)
		}
	}
	if e := got.m[1<<40]; e.Batches[0].LastSeq != 0 {
		t.Fatalf("wrapped last sequence %d", e.Batches[0].LastSeq)
	}
	if !bytes.Equal(encodeProducerSnapshot(&got), b) {
		t.Fatal("re-encoding differs")
	}
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(b)) }
	fixCRC := func(b []byte) []byte {
		be := b[6:10]
		c := crc32c(b[10:])
		be[0], be[1], be[2], be[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
		return b
	}
	cases := map[string][]byte{
		"empty":          {},
		"short":          b[:snapshotHeaderSize-1],
		"magic":          mut(func(b []byte) []byte { b[0] = 'X'; return b }),
		"version":        mut(func(b []byte) []byte { b[5] = 9; return b }),
		"crc":            mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }),
		"torn":           fixCRC(bytes.Clone(b[:len(b)-3])),
		"trailing":       fixCRC(append(bytes.Clone(b), 0)),
		"count too big":  mut(func(b []byte) []byte { b[21] = 200; return fixCRC(b) }),
		"too many batch": mut(func(b []byte) []byte { b[snapshotHeaderSize+18] = 6; return fixCRC(b) }),
		"batch above snapshot offset": mut(func(b []byte) []byte {
			b[17] = 5 // snapshot offset 5, batches at 10..
			return fixCRC(b)
		}),
	}
	for name, in := range cases {
		if _, err := decodeProducerSnapshot(in); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: err %v, want ErrCorruptSnapshot", name, err)
		}
	}
}

func crc32c(b []byte) uint32 { return BatchCRC(append(make([]byte, offAttributes), b...)) }

func FuzzDecodeProducerSnapshot(f *testing.F) {
	st := newProducerState(0)
	for i := int64(0); i < 12; i++ {
		st.update(BatchInfo{BaseOffset: i, LastOffset: i, ProducerID: i % 3, ProducerEpoch: int16(i / 7), BaseSequence: int32(i)})
	}
	f.Add(encodeProducerSnapshot(&st))
	empty := newProducerState(42)
	f.Add(encodeProducerSnapshot(&empty))
	f.Add([]byte("KWPS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeProducerSnapshot(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// What decodes re-encodes to the same bytes: nothing is dropped.
		if re := encodeProducerSnapshot(&got); !bytes.Equal(re, b) {
			t.Fatalf("re-encoded %x, input %x", re, b)
		}
		for _, e := range got.m {
			if len(e.Batches) > ProducerBatchWindow {
				t.Fatalf("%d batches", len(e.Batches))
			}
		}
	})
}

// BenchmarkOpenProducerState measures Open of a log of 20 MiB in 1 MiB
// segments written by 1000 idempotent producers (in memory), with the
// producer table loaded from the snapshot Close wrote, rebuilt from the
// whole log (snapshots deleted), or not built at all.
func BenchmarkOpenProducerState(b *testing.B) {
	fs := NewMemFS()
	cfg := Config{FS: fs, SegmentBytes: 1 << 20, Logger: discardLogger()}
	l, err := Open("/bench", cfg)
	if err != nil {
		b.Fatal(err)
	}
	seqs := make([]int32, 1000)
	var batches int
	for size := int64(0); size < 20<<20; batches++ {
		pid := batches % len(seqs)
		bt := testBatchP(b, int64(pid+1), 0, seqs[pid], 4)
		seqs[pid] += 4
		info, err := l.AppendAsLeader(bt, 0)
		if err != nil {
			b.Fatal(err)
		}
		size += int64(info.Bytes)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	snaps, _ := fs.ReadDir("/bench")
	for _, mode := range []string{"snapshot", "replay", "disabled"} {
		b.Run("state="+mode, func(b *testing.B) {
			c := cfg
			c.ProducerStateRebuildDisabled = mode == "disabled"
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if mode == "replay" {
					for _, n := range snaps {
						if _, ok := parseSnapshotName(n); ok {
							fs.Remove("/bench/" + n)
						}
					}
				}
				b.StartTimer()
				l, err := Open("/bench", c)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if mode != "disabled" && l.ProducerCount() != len(seqs) {
					b.Fatalf("%d producers, want %d", l.ProducerCount(), len(seqs))
				}
				if err := l.Close(); err != nil { // writes the snapshot again
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(batches), "batches")
		})
	}
}

// Producers whose latest batch is ProducerIDExpirationMs old are
// forgotten by RemoveExpiredProducers and stay forgotten across a reopen
// (whether the table comes from the snapshot or from the log).
func TestProducerExpiry(t *testing.T) {
	e := newEnv(t, Config{SegmentBytes: 300, ProducerIDExpirationMs: 60_000})
	old := kafkalogtest.Encode(kafkalogtest.BatchSpec{BaseTimestamp: t0.UnixMilli(), ProducerID: 1, Records: []kafkalogtest.Record{{Value: []byte("a")}}})
	mustAppendLeader(t, e.log, old, 0)
	e.clk.Advance(50 * time.Second)
	recent := kafkalogtest.Encode(kafkalogtest.BatchSpec{BaseTimestamp: e.clk.Now().UnixMilli(), ProducerID: 2, Records: []kafkalogtest.Record{{Value: []byte("b")}}})
	mustAppendLeader(t, e.log, recent, 0)
	if n := e.log.RemoveExpiredProducers(); n != 0 {
		t.Fatalf("removed %d within the expiration", n)
	}
	e.clk.Advance(10 * time.Second) // producer 1 is 60 s old, producer 2 10 s
	if n := e.log.RemoveExpiredProducers(); n != 1 {
		t.Fatalf("removed %d, want producer 1", n)
	}
	if _, ok := e.log.ProducerEntry(1); ok {
		t.Fatal("producer 1 still known")
	}
	e.reopen() // the Close snapshot leaves it out
	if _, ok := e.log.ProducerEntry(1); ok || e.log.ProducerCount() != 1 {
		t.Fatalf("after reopen: %d producers", e.log.ProducerCount())
	}
	e.log.Close()
	for _, o := range snapshotFiles(t, e) {
		e.fs.Remove(e.log.snapshotPath(o))
	}
	e.open() // a full replay drops expired producers too
	if _, ok := e.log.ProducerEntry(1); ok {
		t.Fatal("replay brought back an expired producer")
	}
	if pe, ok := e.log.ProducerEntry(2); !ok || pe.LastTimestamp != t0.Add(50*time.Second).UnixMilli() {
		t.Fatalf("producer 2: %+v %v", pe, ok)
	}
}

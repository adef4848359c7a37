package kafkalog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// kv is one record as a consumer sees it.
type kv struct {
	offset int64
	key    string
	value  []byte // nil: tombstone
	ts     int64
}

// compactWorkload appends n records over keys distinct keys in batches of
// 1..maxBatch records with a mix of codecs and producers; a share of the
// records are tombstones. It returns every record appended, by offset.
func compactWorkload(tb testing.TB, l *Log, rng *rand.Rand, n, keys, maxBatch int, tombstoneShare float64) []kv {
	tb.Helper()
	var all []kv
	ts := t0.UnixMilli()
	for len(all) < n {
		cnt := 1 + rng.Intn(maxBatch)
		var recs []kafkalogtest.Record
		base := l.LogEndOffset()
		for i := 0; i < cnt; i++ {
			k := fmt.Sprintf("key-%06d", rng.Intn(keys))
			var v []byte
			if rng.Float64() >= tombstoneShare {
				v = []byte(fmt.Sprintf("v%d-%d", base+int64(i), rng.Intn(1000)))
			}
			recs = append(recs, kafkalogtest.Record{Key: []byte(k), Value: v, TimestampDelta: int64(i)})
			all = append(all, kv{offset: base + int64(i), key: k, value: v, ts: ts + int64(i)})
		}
		codec := rng.Intn(5)
		spec := kafkalogtest.BatchSpec{BaseTimestamp: ts, Records: recs}
		if pid := rng.Intn(4); pid > 0 {
			spec.ProducerID = int64(pid)
			spec.BaseSequence = int32(base)
		}
		b := kafkalogtest.Encode(spec)
		if codec != CodecNone {
			raw := kafkalogtest.Records(spec)
			spec.Records = nil
			spec.RawRecords = kafkalogtest.Compress(codec, raw)
			spec.RecordCount, spec.LastOffsetDelta = int32(cnt), int32(cnt-1)
			spec.MaxTimestamp = ts + int64(cnt-1)
			spec.Attributes = int16(codec)
			b = kafkalogtest.Encode(spec)
		}
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			tb.Fatalf("append: %v", err)
		}
		ts += 10
	}
	return all
}

// readRecords reads every record from the log start to the log end.
func readRecords(tb testing.TB, l *Log) []kv {
	tb.Helper()
	var out []kv
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		data, err := l.Read(off, 1<<20)
		if err != nil {
			tb.Fatalf("read %d: %v", off, err)
		}
		next := off
		err = splitStoredBatches(data, 1<<30, func(h BatchHeader, b []byte) error {
			next = h.NextOffset()
			return eachStoredRecord(h, b, func(r record) {
				o := h.BaseOffset + int64(r.offsetDelta)
				if o < off {
					return
				}
				var v []byte
				if !r.tombstone {
					v = valueOf(r.raw)
				}
				out = append(out, kv{offset: o, key: string(r.key), value: v, ts: h.BaseTimestamp + r.tsDelta})
			})
		})
		if err != nil {
			tb.Fatalf("batches at %d: %v", off, err)
		}
		off = next
	}
	return out
}

// expectCompacted is what a consumer must read after cleaning offsets below
// end with the given tombstone horizon: below end, each key's last record
// (its tombstone only if not older than horizon); from end on, everything.
func expectCompacted(all []kv, end, horizon int64) []kv {
	last := map[string]int64{}
	for _, r := range all {
		if r.offset < end {
			last[r.key] = r.offset
		}
	}
	var out []kv
	for _, r := range all {
		if r.offset >= end {
			out = append(out, r)
			continue
		}
		if last[r.key] != r.offset {
			continue
		}
		if r.value == nil && r.ts < horizon {
			continue
		}
		out = append(out, r)
	}
	return out
}

func sameRecords(tb testing.TB, got, want []kv) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.offset != w.offset || g.key != w.key || !bytes.Equal(g.value, w.value) || (g.value == nil) != (w.value == nil) || g.ts != w.ts {
			tb.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestCompactKeepsLatestPerKey(t *testing.T) {
	for _, seed := range []int64{1, 2} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			e := newEnv(t, Config{SegmentBytes: 16 << 10, IndexIntervalBytes: 512})
			rng := rand.New(rand.NewSource(seed))
			all := compactWorkload(t, e.log, rng, 8_000, 800, 20, 0.05)
			if err := e.log.SetHighWatermark(e.log.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
			segs := e.log.Segments()
			act := segs[len(segs)-1].BaseOffset
			st, err := e.log.Compact(CompactConfig{UpTo: e.log.HighWatermark(), MinCleanableDirtyRatio: 0.5, DeleteRetentionMs: -1})
			if err != nil {
				t.Fatal(err)
			}
			if !st.Cleaned || st.End != act || st.RecordsOut >= st.RecordsIn {
				t.Fatalf("stats %+v, active segment at %d", st, act)
			}
			want := expectCompacted(all, act, -1<<62)
			sameRecords(t, readRecords(t, e.log), want)
			// It survives a reopen, and a reopen that verifies every
			// batch (no recovery point).
			e.reopen()
			sameRecords(t, readRecords(t, e.log), want)
			e.log.Close()
			e.fs.Remove(e.dir + "/" + recoveryPointCheckpointFile)
			e.open()
			sameRecords(t, readRecords(t, e.log), want)
			if bytes.Contains(e.logs.Bytes(), []byte("truncating torn")) {
				t.Fatalf("recovery cut a compacted segment:\n%s", e.logs.String())
			}

			// More writes: the next pass cleans the new dirty section
			// against the clean one, and tombstones older than the
			// retention go.
			all = append(all, compactWorkload(t, e.log, rng, 4_000, 800, 20, 0.2)...)
			e.log.SetHighWatermark(e.log.LogEndOffset())
			segs = e.log.Segments()
			act = segs[len(segs)-1].BaseOffset
			st, err = e.log.Compact(CompactConfig{UpTo: e.log.HighWatermark(), DeleteRetentionMs: 5_000, Force: true})
			if err != nil {
				t.Fatal(err)
			}
			var newest int64
			for _, r := range all {
				if r.offset < act {
					newest = max(newest, r.ts)
				}
			}
			want = expectCompacted(all, act, newest-5_000)
			sameRecords(t, readRecords(t, e.log), want)
			if st.Tombstones == 0 {
				t.Fatalf("no tombstone dropped: %+v", st)
			}
		})
	}
}

func TestCompactDirtyRatioAndUpTo(t *testing.T) {
	e := newEnv(t, Config{SegmentBytes: 8 << 10})
	rng := rand.New(rand.NewSource(7))
	compactWorkload(t, e.log, rng, 3_000, 100, 10, 0)
	// Nothing below the high watermark 0 is cleanable.
	st, err := e.log.Compact(CompactConfig{UpTo: 0, MinCleanableDirtyRatio: 0.5})
	if err != nil || st.Cleaned {
		t.Fatalf("cleaned above the HW: %+v %v", st, err)
	}
	e.log.SetHighWatermark(e.log.LogEndOffset())
	if st, err = e.log.Compact(CompactConfig{UpTo: e.log.HighWatermark(), MinCleanableDirtyRatio: 0.5}); err != nil || !st.Cleaned {
		t.Fatalf("first pass: %+v %v", st, err)
	}
	// A second pass finds nothing dirty.
	if st, err = e.log.Compact(CompactConfig{UpTo: e.log.HighWatermark(), MinCleanableDirtyRatio: 0.01}); err != nil || st.Cleaned {
		t.Fatalf("second pass: %+v %v", st, err)
	}
	// A little new data is below the ratio; forcing cleans it.
	compactWorkload(t, e.log, rng, 300, 100, 10, 0)
	e.log.SetHighWatermark(e.log.LogEndOffset())
	st, err = e.log.Compact(CompactConfig{UpTo: e.log.HighWatermark(), MinCleanableDirtyRatio: 0.99})
	if err != nil || st.Cleaned || st.DirtyRatio == 0 {
		t.Fatalf("below ratio: %+v %v", st, err)
	}
	if _, err := e.log.Compact(CompactConfig{MinCleanableDirtyRatio: 2}); !errors.Is(err, errConfig) {
		t.Fatalf("ratio 2: %v", err)
	}
}

// Two replicas holding the same batches and cleaning to the same offset
// hold the same bytes, whatever their earlier passes.
func TestCompactIdenticalOnReplicas(t *testing.T) {
	a := newEnv(t, Config{SegmentBytes: 16 << 10})
	b := newEnv(t, Config{SegmentBytes: 16 << 10})
	rng := rand.New(rand.NewSource(11))
	compactWorkload(t, a.log, rng, 4_000, 500, 20, 0.1)
	// b gets the leader's batches as a follower.
	copyLog := func(from int64) {
		for off := from; off < a.log.LogEndOffset(); {
			data, err := a.log.Read(off, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			info, err := b.log.AppendAsFollower(data)
			if err != nil {
				t.Fatal(err)
			}
			off = info.LastOffset + 1
		}
	}
	copyLog(0)
	cfg := func(l *Log) CompactConfig {
		l.SetHighWatermark(l.LogEndOffset())
		return CompactConfig{UpTo: l.HighWatermark(), DeleteRetentionMs: 100, Force: true}
	}
	// a cleans once in the middle; b does not.
	if _, err := a.log.Compact(cfg(a.log)); err != nil {
		t.Fatal(err)
	}
	end := a.log.LogEndOffset()
	compactWorkload(t, a.log, rng, 2_000, 500, 20, 0.1)
	copyLog(end)
	for _, e := range []*env{a, b} {
		if _, err := e.log.Compact(cfg(e.log)); err != nil {
			t.Fatal(err)
		}
	}
	sa, sb := a.log.Segments(), b.log.Segments()
	if len(sa) != len(sb) {
		t.Fatalf("%d vs %d segments", len(sa), len(sb))
	}
	for i := range sa {
		ba, _ := a.fs.FileBytes(sa[i].Path)
		bb, _ := b.fs.FileBytes(sb[i].Path)
		if !bytes.Equal(ba, bb) {
			t.Fatalf("segment %d differs (%d vs %d bytes)", sa[i].BaseOffset, len(ba), len(bb))
		}
	}
}

// A crash at any point of a pass leaves either the old or the new segment,
// never a mix, and the log reads the same records either way.
func TestCompactCrash(t *testing.T) {
	for step := 0; step < 8; step++ {
		t.Run(fmt.Sprint("crashAt=", step), func(t *testing.T) {
			e := newEnv(t, Config{SegmentBytes: 8 << 10})
			rng := rand.New(rand.NewSource(int64(step)))
			all := compactWorkload(t, e.log, rng, 1_500, 200, 10, 0)
			e.log.SetHighWatermark(e.log.LogEndOffset())
			e.log.Flush()
			segs := e.log.Segments()
			act := segs[len(segs)-1].BaseOffset
			ops := 0
			var clone *MemFS
			e.fs.SetFault(func(op FSOp, name string) error {
				if op == OpRename || op == OpSyncDir {
					if ops == step && clone == nil {
						clone = e.fs.CrashClone(randv2.New(randv2.NewPCG(uint64(step), 1)))
					}
					ops++
				}
				return nil
			})
			if _, err := e.log.Compact(CompactConfig{UpTo: e.log.HighWatermark(), Force: true, DeleteRetentionMs: -1}); err != nil {
				t.Fatal(err)
			}
			e.fs.SetFault(nil)
			if clone == nil {
				t.Skipf("the pass made only %d renames/syncs", ops)
			}
			e.crash(clone)
			got := readRecords(t, e.log)
			// Every key's latest record below act is there, once, with
			// its offset; records a finished segment swap dropped are
			// gone, the others may remain.
			byOff := map[int64]kv{}
			for _, r := range all {
				byOff[r.offset] = r
			}
			latest := expectCompacted(all, act, -1<<62)
			need := map[int64]bool{}
			for _, r := range latest {
				need[r.offset] = true
			}
			prev := int64(-1)
			for _, r := range got {
				w, ok := byOff[r.offset]
				if !ok || r.key != w.key || !bytes.Equal(r.value, w.value) || r.offset <= prev {
					t.Fatalf("after crash: %+v (want %+v, prev %d)", r, w, prev)
				}
				prev = r.offset
				delete(need, r.offset)
			}
			if len(need) != 0 {
				t.Fatalf("after crash %d latest records are missing", len(need))
			}
		})
	}
}

func TestReadAcrossCompactedGaps(t *testing.T) {
	e := newEnv(t, Config{SegmentBytes: 2 << 10})
	// Segment after segment of the same key: cleaning empties all but
	// the last record of it.
	for i := 0; i < 200; i++ {
		b := kafkalogtest.Encode(kafkalogtest.BatchSpec{BaseTimestamp: t0.UnixMilli(), Records: []kafkalogtest.Record{{Key: []byte("k"), Value: []byte(fmt.Sprint(i))}}})
		mustAppendLeader(t, e.log, b, 0)
	}
	for i := 0; i < 50; i++ {
		b := kafkalogtest.Encode(kafkalogtest.BatchSpec{BaseTimestamp: t0.UnixMilli(), Records: []kafkalogtest.Record{{Key: []byte(fmt.Sprint("other", i)), Value: []byte("x")}}})
		mustAppendLeader(t, e.log, b, 0)
	}
	e.log.SetHighWatermark(e.log.LogEndOffset())
	if _, err := e.log.Compact(CompactConfig{UpTo: e.log.HighWatermark(), Force: true}); err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, e.log)
	if len(got) == 0 || got[0].key != "k" || got[0].offset != 199 {
		t.Fatalf("first record after cleaning: %+v", got[:1])
	}
	// A read at an offset that is gone returns the next batch.
	data, err := e.log.Read(5, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ParseBatchHeader(data)
	if h.BaseOffset != 199 {
		t.Fatalf("read at 5 starts at %d, want 199", h.BaseOffset)
	}
	if pos, err := e.log.PositionOf(5); err != nil || pos.SegmentBaseOffset == 0 && pos.Position != 0 {
		t.Fatalf("PositionOf(5) = %+v, %v", pos, err)
	}
	if e.log.LogStartOffset() != 0 {
		t.Fatalf("compaction moved the log start to %d", e.log.LogStartOffset())
	}
}

func FuzzValidateStoredBatch(f *testing.F) {
	f.Add(kafkalogtest.MakeBatchN(0, 0, 3, 10, 1))
	f.Add(kafkalogtest.Encode(kafkalogtest.BatchSpec{Records: []kafkalogtest.Record{{Key: []byte("a"), Value: nil}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := validateStoredBatch(b)
		if err != nil {
			return
		}
		if h.Size() != len(b) || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
			t.Fatalf("accepted %+v for %d bytes", h, len(b))
		}
		// What it accepts the cleaner can walk.
		_ = splitRecords(b[BatchHeaderSize:], h, func(record) {})
	})
}

// A follower of a compacted topic copies the leader's compacted segments
// (gaps, sparse batches) as they are; one that is not told the topic is
// compacted refuses the gap.
func TestFollowerCopiesCompactedLeader(t *testing.T) {
	leader := newEnv(t, Config{SegmentBytes: 8 << 10, Compacted: true})
	compactWorkload(t, leader.log, rand.New(rand.NewSource(5)), 4_000, 300, 10, 0.1)
	leader.log.SetHighWatermark(leader.log.LogEndOffset())
	if _, err := leader.log.Compact(CompactConfig{UpTo: leader.log.HighWatermark(), Force: true}); err != nil {
		t.Fatal(err)
	}
	for _, compacted := range []bool{true, false} {
		f := newEnv(t, Config{SegmentBytes: 8 << 10, Compacted: compacted})
		var err error
		for off := int64(0); off < leader.log.LogEndOffset() && err == nil; {
			var data []byte
			if data, err = leader.log.Read(off, 1<<20); err != nil {
				t.Fatal(err)
			}
			var info AppendInfo
			if info, err = f.log.AppendAsFollower(data); err == nil {
				off = info.LastOffset + 1
			}
		}
		if !compacted {
			if err == nil {
				t.Fatal("a follower of an uncompacted topic took offset gaps")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sameRecords(t, readRecords(t, f.log), readRecords(t, leader.log))
		f.reopen()
		sameRecords(t, readRecords(t, f.log), readRecords(t, leader.log))
	}
}

package kafkalog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// TestCrashRecovery appends under a random flush pattern, crashes keeping
// a random part of the unsynced writes (torn writes included) and checks
// that the reopened log holds every fsynced batch, only whole valid
// batches, and exactly the bytes appended.
func TestCrashRecovery(t *testing.T) {
	torn := 0
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		e := newEnv(t, Config{SegmentBytes: 2048, FlushMessages: int64(1 + rng.IntN(20)), IndexIntervalBytes: 256})
		var appended [][]byte // by append order; one batch per append
		durable := int64(0)
		epoch := int32(0)
		for i := 0; i < 40; i++ {
			if rng.IntN(10) == 0 {
				epoch++
			}
			b := kafkalogtest.MakeBatchN(0, 0, 1+rng.IntN(4), 1+rng.IntN(120), int64(i))
			info := mustAppendLeader(t, e.log, b, epoch)
			got, err := e.log.Read(info.FirstOffset, 1)
			if err != nil {
				t.Fatal(err)
			}
			appended = append(appended, got)
			if rng.IntN(8) == 0 {
				if err := e.log.Flush(); err != nil {
					t.Fatal(err)
				}
				durable = e.log.LogEndOffset()
			}
			if e.log.w.unflushed == 0 { // the flush policy or a roll fsynced
				durable = e.log.LogEndOffset()
			}
		}
		finalLEO := e.log.LogEndOffset()
		e.crash(e.fs.CrashClone(rng))
		if strings.Contains(e.logs.String(), "truncating torn") {
			torn++
		}
		leo := e.log.LogEndOffset()
		if leo < durable || leo > finalLEO {
			t.Fatalf("seed %d: recovered LEO %d, durable %d, final %d", seed, leo, durable, finalLEO)
		}
		hs := readAll(t, e.log)
		off := int64(0)
		for i, h := range hs {
			b, err := e.log.Read(h.BaseOffset, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, appended[i]) {
				t.Fatalf("seed %d: batch %d at offset %d differs from the appended one", seed, i, off)
			}
			off = h.NextOffset()
		}
		// The leader-epoch cache is exactly the epochs of the batches that
		// survived: none lost with a checkpoint write the crash dropped
		// (appends do not write it), none past the log end.
		if got, want := e.log.EpochEntries(), epochStartsOf(hs); !slices.Equal(got, want) {
			t.Fatalf("seed %d: epochs after recovery %v, the batches say %v", seed, got, want)
		}
		// The recovered log accepts appends where it ended.
		if info := mustAppendLeader(t, e.log, batch(1, 5), epoch); info.FirstOffset != leo {
			t.Fatalf("seed %d: append after recovery at %d, want %d", seed, info.FirstOffset, leo)
		}
		e.log.Close()
		e.log = nil
	}
	if torn == 0 {
		t.Fatal("no seed produced a torn tail; the crash model is not exercised")
	}
	t.Logf("%d of 60 crashes left a torn tail", torn)
}

// epochStartsOf is the leader-epoch cache that batches hs (from the log
// start) imply: where each epoch above the one before it starts.
func epochStartsOf(hs []BatchHeader) []EpochEntry {
	var es []EpochEntry
	for _, h := range hs {
		if n := len(es); h.PartitionLeaderEpoch >= 0 && (n == 0 || h.PartitionLeaderEpoch > es[n-1].Epoch) {
			es = append(es, EpochEntry{Epoch: h.PartitionLeaderEpoch, StartOffset: h.BaseOffset})
		}
	}
	return es
}

// TestEpochCheckpointCrashBetweenAppendAndWrite crashes after an append
// that starts a new leader epoch and before the epoch checkpoint is
// written (an append does not write it; roll, Flush and Close do): with
// the batches fsynced (flush.messages=1), recovery finds the epoch in the
// segment; with them lost, the epoch is gone too; after a roll, the
// checkpoint holds the epochs below the recovery point.
func TestEpochCheckpointCrashBetweenAppendAndWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		flush   bool // Flush after the first epoch (checkpoint written)
		roll    bool // roll a segment after epoch 2 starts
		durable bool // the epoch-2 batches are fsynced before the crash
	}{
		{name: "data-fsynced", cfg: Config{FlushMessages: 1}, flush: true, durable: true},
		{name: "data-lost", cfg: Config{}, flush: true},
		{name: "no-checkpoint-ever", cfg: Config{FlushMessages: 1}, durable: true},
		{name: "after-roll", cfg: Config{FlushMessages: 1, SegmentBytes: 4096}, flush: true, roll: true, durable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cfg)
			mustAppendLeader(t, e.log, batch(3, 50), 1)
			if tc.flush {
				if err := e.log.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := e.fs.FileBytes(e.dir + "/leader-epoch-checkpoint")
			info := mustAppendLeader(t, e.log, batch(2, 50), 2)
			if after, _ := e.fs.FileBytes(e.dir + "/leader-epoch-checkpoint"); !bytes.Equal(before, after) {
				t.Fatalf("the append wrote the epoch checkpoint: %q, was %q", after, before)
			}
			want := []EpochEntry{{Epoch: 1, StartOffset: 0}}
			if tc.durable {
				want = append(want, EpochEntry{Epoch: 2, StartOffset: info.FirstOffset})
			}
			if tc.roll {
				for len(e.log.Segments()) < 3 {
					mustAppendLeader(t, e.log, batch(4, 200), 2)
				}
				mustAppendLeader(t, e.log, batch(1, 10), 3) // in the active segment only
				want = append(want, EpochEntry{Epoch: 3, StartOffset: e.log.LogEndOffset() - 1})
			}
			if !tc.durable {
				want = []EpochEntry{{Epoch: 1, StartOffset: 0}}
			}
			leo := e.log.LogEndOffset()
			e.crash(e.fs.CrashClone(nil)) // only what was fsynced
			if tc.durable && e.log.LogEndOffset() != leo {
				t.Fatalf("LEO %d after the crash, want %d (fsynced)", e.log.LogEndOffset(), leo)
			}
			if !tc.durable && e.log.LogEndOffset() != 3 {
				t.Fatalf("LEO %d after the crash, want 3 (the unsynced batches lost)", e.log.LogEndOffset())
			}
			got := e.log.EpochEntries()
			if !slices.Equal(got, want) {
				t.Fatalf("epochs after the crash %v, want %v", got, want)
			}
			if !slices.Equal(got, epochStartsOf(readAll(t, e.log))) {
				t.Fatalf("epochs %v do not match the batches", got)
			}
			if len(want) > 1 {
				if fe, off := e.log.EndOffsetForEpoch(1); fe != 1 || off != want[1].StartOffset {
					t.Fatalf("EndOffsetForEpoch(1) = %d, %d; want 1, %d", fe, off, want[1].StartOffset)
				}
			}
			// The recovered cache was written: a second crash keeps it.
			e.crash(e.fs.CrashClone(nil))
			if got := e.log.EpochEntries(); !slices.Equal(got, want) {
				t.Fatalf("epochs after a second crash %v, want %v", got, want)
			}
		})
	}
}

// TestConcurrentReadersSeeWholeBatches runs one writer and several
// readers on the real file system; readers check every batch's CRC.
func TestConcurrentReadersSeeWholeBatches(t *testing.T) {
	l, err := Open(t.TempDir(), Config{SegmentBytes: 64 << 10, IndexIntervalBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const appends = 400
	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for {
				select {
				case <-done:
					return
				default:
				}
				leo := l.LogEndOffset()
				if leo == 0 {
					<-l.AppendNotify()
					continue
				}
				off := rng.Int64N(leo)
				b, err := l.Read(off, 1+rng.IntN(8192))
				if err == nil {
					err = SplitBatches(b, func(BatchHeader, []byte) error { return nil })
				}
				if err == nil {
					_, err = l.Slice(l.LogStartOffset(), 4096)
				}
				if err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
					errc <- err
					return
				}
			}
		}(uint64(r))
	}
	for i := 0; i < appends; i++ {
		if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(0, 0, 1+i%5, 50+i%300, int64(i)), int32(i/100)); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if n := len(readAll(t, l)); n != appends {
		t.Fatalf("%d batches", n)
	}
}

func FuzzRecover(f *testing.F) {
	b1 := kafkalogtest.MakeBatchN(0, 1, 3, 20, 1)
	b2 := kafkalogtest.MakeBatchN(3, 1, 1, 200, 1)
	b3 := kafkalogtest.MakeBatchN(4, 2, 2, 7, 1)
	all := bytes.Join([][]byte{b1, b2, b3}, nil)
	f.Add(all)
	f.Add(all[:len(all)-3])
	f.Add(all[:len(b1)+20])
	f.Add(append(bytes.Clone(b1), kafkalogtest.MakeBatchN(9, 1, 1, 1, 1)...)) // offset gap
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := NewMemFS()
		const dir = "/p"
		if err := fs.WriteFile(dir+"/00000000000000000000.log", data); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, Config{FS: fs, Logger: discardLogger(), IndexIntervalBytes: 64})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		segs := l.Segments()
		if len(segs) != 1 {
			t.Fatalf("%d segments", len(segs))
		}
		kept, err := l.ReadSegmentRange(0, 0, segs[0].Size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, kept) {
			t.Fatal("recovered segment is not a prefix of the input")
		}
		next := int64(0)
		if err := SplitBatches(kept, func(h BatchHeader, _ []byte) error {
			if h.BaseOffset != next {
				t.Fatalf("batch at %d, want %d", h.BaseOffset, next)
			}
			next = h.NextOffset()
			return nil
		}); err != nil && !errors.Is(err, ErrBatchTooLarge) {
			t.Fatalf("recovered bytes invalid: %v", err)
		}
		if l.LogEndOffset() != next {
			t.Fatalf("LEO %d, batches end at %d", l.LogEndOffset(), next)
		}
		readAll(t, l)
	})
}

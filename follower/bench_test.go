package follower

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/internal/clock"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/mem"
)

// doneReporter closes done when tp reaches target.
type doneReporter struct {
	tp     metadata.TopicPartition
	target int64
	done   chan struct{}
}

func (r *doneReporter) ReportLogEnd(tp metadata.TopicPartition, leo int64) {
	if tp == r.tp && leo == r.target {
		close(r.done)
	}
}

// BenchmarkRebuild rebuilds a 16 MiB log of 1 KiB records from the mem
// store (its objects interleave a second partition the follower does not
// follow) and compares, in the same run, with a plain copy of the same
// bytes plus CRC32C. It reports MB/s (of log rebuilt), the baseline's
// MB/s, their ratio, and GETs per MiB rebuilt with and without coalescing.
func BenchmarkRebuild(b *testing.B) {
	clk := clock.NewManual(t0)
	st := mem.New()
	ix := newMemIndex()
	leader := newFakeLeader()
	rng := rand.New(rand.NewPCG(1, 2))
	logs := map[metadata.TopicPartition]*kafkalog.Log{}
	var lists [][]combiner.Slice
	for _, tp := range []metadata.TopicPartition{tp0, tp1} {
		l := openLog(b, kafkalog.NewMemFS(), "/leader/"+tp.String(), clk)
		for range 1000 { // 16 MiB of 1 KiB records
			if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(0, 1, 16, 1024, t0.UnixMilli()), 1); err != nil {
				b.Fatal(err)
			}
		}
		logs[tp] = l
		leader.set(tp, l, 1)
		lists = append(lists, cutSlices(b, tp, l, 0, l.LogEndOffset(), rng, 96<<10))
	}
	for _, o := range packObjects(b, st, "", interleave(rng, lists...), rng, 48, metadata.CodecNone) {
		ix.publish(o.key, o.entries...)
	}
	src := logs[tp0]
	target := src.LogEndOffset()
	_, segs := logBytes(b, src)
	raw := bytes.Join(segs, nil)
	for _, coalesce := range []bool{true, false} {
		name := "coalesce=on"
		if !coalesce {
			name = "coalesce=off"
		}
		b.Run(name+"/record=1KiB", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			var gets int64
			var ours, base time.Duration
			castagnoli := crc32.MakeTable(crc32.Castagnoli)
			dst := make([]byte, len(raw))
			for b.Loop() {
				// Baseline: copy the bytes and CRC32C them once.
				start := time.Now()
				copy(dst, raw)
				if crc32.Checksum(dst, castagnoli) == 0 {
					b.Fatal("zero crc")
				}
				base += time.Since(start)

				start = time.Now()
				fl, err := kafkalog.Open("/f", kafkalog.Config{FS: kafkalog.NewMemFS(), Clock: clk, SegmentBytes: 64 << 20})
				if err != nil {
					b.Fatal(err)
				}
				rep := &doneReporter{tp: tp0, target: target, done: make(chan struct{})}
				cfg := Config{Store: st, Index: ix, Leader: leader, LeaderClient: leader, Reporter: rep, Clock: clk, HedgeDelay: -1}
				if !coalesce {
					cfg.MaxRangeBytes, cfg.MergeGapBytes = 1, 0
				}
				f, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := f.AddPartition(tp0, fl); err != nil {
					b.Fatal(err)
				}
				<-rep.done
				f.Close()
				ours += time.Since(start)
				gets += f.Metrics().GETs
				if fl.LogEndOffset() != target {
					b.Fatal("not rebuilt")
				}
			}
			n := float64(b.N)
			mib := float64(len(raw)) / (1 << 20)
			mbs := func(d time.Duration) float64 { return float64(len(raw)) * n / 1e6 / d.Seconds() }
			perCore := mbs(ours) / float64(runtime.GOMAXPROCS(0))
			b.ReportMetric(perCore, "MB/s/core")
			b.ReportMetric(mbs(base), "baseline-MB/s")
			b.ReportMetric(perCore/mbs(base), "ratio/core")
			b.ReportMetric(float64(gets)/n/mib, "GETs/MiB")
		})
	}
}

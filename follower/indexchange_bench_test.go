package follower

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/mem"
)

// leoReporter keeps every partition's last reported log end and wakes a
// waiter at each report.
type leoReporter struct {
	mu   sync.Mutex
	last map[metadata.TopicPartition]int64
	wake chan struct{}
}

func (r *leoReporter) ReportLogEnd(tp metadata.TopicPartition, leo int64) {
	r.mu.Lock()
	r.last[tp] = leo
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// waitUntil waits, on reports, until cond (called under the lock) holds.
func (r *leoReporter) waitUntil(cond func(last map[metadata.TopicPartition]int64) bool) {
	for {
		r.mu.Lock()
		ok := cond(r.last)
		r.mu.Unlock()
		if ok {
			return
		}
		<-r.wake
	}
}

// BenchmarkIndexChange: a follower of partitions=N, every one caught up,
// gets one object of one partition published at a time and appends it;
// an op is one index change carried through to the append, and
// index-reads/op counts the partitions whose slices the follower read
// from the index again for it. index_says=true: the index tells which
// partition changed (IndexChanges); false: it cannot, and every partition
// is read again. The clock stands still: only index changes and read
// completions wake the follower.
func BenchmarkIndexChange(b *testing.B) {
	for _, n := range []int{10, 1000} {
		for _, says := range []bool{true, false} {
			b.Run(fmt.Sprintf("partitions=%d/index_says=%v", n, says), func(b *testing.B) {
				clk := clock.NewManual(t0)
				st := mem.New()
				ix := newMemIndex()
				leader := newFakeLeader()
				rng := rand.New(rand.NewPCG(3, 4))
				hot := metadata.TopicPartition{Topic: "hot"}
				hl := openLog(b, kafkalog.NewMemFS(), "/leader/hot", clk)
				leader.set(hot, hl, 1)
				fillLeader(b, hl, rng, b.N, 1)
				// One batch a slice, one slice an object.
				objs := packObjects(b, st, "hot/", cutSlices(b, hot, hl, 0, hl.LogEndOffset(), rng, 1), rng, 1, metadata.CodecNone)
				want := map[metadata.TopicPartition]int64{}
				var others []combiner.Slice
				for i := range n - 1 {
					tp := metadata.TopicPartition{Topic: "other", Partition: int32(i)}
					l := openLog(b, kafkalog.NewMemFS(), "/leader/"+tp.String(), clk)
					leader.set(tp, l, 1)
					fillLeader(b, l, rng, 1, 1)
					want[tp] = l.LogEndOffset()
					others = append(others, cutSlices(b, tp, l, 0, l.LogEndOffset(), rng, 64<<10)...)
				}
				for _, o := range packObjects(b, st, "others/", others, rng, 48, metadata.CodecNone) {
					ix.publish(o.key, o.entries...)
				}
				counted := &perPartitionIndex{ix: ix}
				var index Index = counted
				if says {
					index = countingChanges{counted}
				}
				rep := &leoReporter{last: map[metadata.TopicPartition]int64{}, wake: make(chan struct{}, 1)}
				f, err := New(Config{Store: st, Index: index, Leader: leader, LeaderClient: leader, Reporter: rep, Clock: clk, HedgeDelay: -1})
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				add := func(tp metadata.TopicPartition) {
					if err := f.AddPartition(tp, openLog(b, kafkalog.NewMemFS(), "/follower/"+tp.String(), clk)); err != nil {
						b.Fatal(err)
					}
				}
				add(hot)
				for tp := range want {
					add(tp)
				}
				rep.waitUntil(func(last map[metadata.TopicPartition]int64) bool {
					for tp, w := range want {
						if last[tp] != w {
							return false
						}
					}
					return true
				})
				reads := func() (n int) {
					counted.mu.Lock()
					defer counted.mu.Unlock()
					for _, c := range counted.mu.n {
						n += c
					}
					return n
				}
				before := reads()
				b.ReportAllocs()
				b.ResetTimer()
				for _, o := range objs {
					ix.publish(o.key, o.entries...)
					end := o.entries[len(o.entries)-1].LastOffset + 1
					rep.waitUntil(func(last map[metadata.TopicPartition]int64) bool { return last[hot] >= end })
				}
				b.StopTimer()
				b.ReportMetric(float64(reads()-before)/float64(len(objs)), "index-reads/op")
			})
		}
	}
}

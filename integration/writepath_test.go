package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/remotewal"
)

// leaderLogs opens n partition logs with small segments, so slices must
// respect segment rolls.
func leaderLogs(t *testing.T, n int) map[metadata.TopicPartition]*kafkalog.Log {
	t.Helper()
	logs := make(map[metadata.TopicPartition]*kafkalog.Log, n)
	for i := 0; i < n; i++ {
		tp := metadata.TopicPartition{Topic: fmt.Sprintf("topic-%d", i%3), Partition: int32(i)}
		l, err := kafkalog.Open(t.TempDir(), kafkalog.Config{SegmentBytes: 48 << 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		logs[tp] = l
	}
	return logs
}

// produce appends batches of random shape to every log concurrently; half
// way through, each partition's leader epoch goes from 1 to 2, as after a
// re-election of the same broker.
func produce(t *testing.T, logs map[metadata.TopicPartition]*kafkalog.Log, batches int, seed uint64) {
	t.Helper()
	var wg sync.WaitGroup
	i := uint64(0)
	for tp, l := range logs {
		i++
		wg.Add(1)
		go func(tp metadata.TopicPartition, l *kafkalog.Log, seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 7))
			for b := 0; b < batches; b++ {
				epoch := int32(1)
				if b >= batches/2 {
					epoch = 2
				}
				recs := 1 + r.IntN(16)
				size := 64 + r.IntN(1024)
				if _, err := l.AppendAsLeader(kafkalogtest.MakeBatchN(0, 0, recs, size, time.Now().UnixMilli()), epoch); err != nil {
					t.Errorf("%s: append: %v", tp, err)
					return
				}
				if r.IntN(8) == 0 {
					time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
				}
			}
		}(tp, l, seed+i)
	}
	wg.Wait()
}

// leaderBytes is the concatenation of every segment file of the log.
func leaderBytes(t *testing.T, l *kafkalog.Log) []byte {
	t.Helper()
	var all []byte
	for _, s := range l.Segments() {
		b, err := l.ReadSegmentRange(s.BaseOffset, 0, s.Size)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestWritePathNamesEveryByteOnce drives real leader logs through the whole
// write path (remotewal tasks, combiner, object store, metadata on kfake's
// compacted topic) and checks, from a fresh consumer of the topic, that the
// metadata names every byte of every partition exactly once and in order,
// and that the named ranges of the stored objects hold exactly those bytes.
func TestWritePathNamesEveryByteOnce(t *testing.T) {
	for _, st := range stores() {
		t.Run("store="+st.name, func(t *testing.T) {
			writeAndVerify(t, st.open(t))
		})
	}
}

// writeAndVerify runs the write path into store and checks what the
// metadata topic then says. It returns the rebuilt state.
func writeAndVerify(t *testing.T, store objstore.Store) *metadata.State {
	t.Helper()
	logger := testLogger(t)
	emb, err := metadata.StartEmbedded(t.TempDir(), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	topicCfg := metadata.TopicConfig{Bootstrap: emb.Bootstrap(), Partitions: 8}
	pub, err := metadata.NewPublisher(topicCfg, clock.Real{}, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	wp, err := remotewal.NewWritePath(remotewal.WritePathConfig{
		Store:     store,
		Publisher: pub,
		Tasks:     remotewal.Config{UploadBytes: 32 << 10, Interval: 5 * time.Millisecond, ThreadPoolSize: 4},
		Combiner: combiner.Config{BrokerID: 1, Interval: 10 * time.Millisecond, UploadBytes: 128 << 10,
			ThreadPoolSize: 3, QueueSlices: 64, Codec: metadata.CodecNone},
		Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := leaderLogs(t, 12)
	for tp, l := range logs {
		if err := wp.Manager.StartPartition(tp, l, 2, 0); err != nil {
			t.Fatal(err)
		}
	}
	produce(t, logs, 120, 42)

	// Wait until every partition's metadata is published up to its log end.
	deadline := time.Now().Add(60 * time.Second)
	for tp, l := range logs {
		for {
			p, err := wp.Manager.PublishedOffset(tp)
			if err != nil {
				t.Fatal(err)
			}
			if p == l.LogEndOffset() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: published %d of %d; combiner %+v", tp, p, l.LogEndOffset(), wp.Combiner.Metrics())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wp.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cm := wp.Combiner.Metrics()
	t.Logf("combiner: %d objects uploaded, %d published, %d bytes", cm.ObjectsUp, cm.ObjectsPub, cm.BytesUploaded)

	// A fresh consumer rebuilds the index from the topic alone.
	state := metadata.NewState()
	cons, err := metadata.StartConsumer(ctx, metadata.ConsumerConfig{TopicConfig: topicCfg}, state, clock.Real{}, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	select {
	case <-cons.Ready():
	case <-ctx.Done():
		t.Fatal("metadata consumer never became ready")
	}
	if err := cons.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	checkMetadataCoversLogs(t, ctx, store, state, logs)

	// The objects describe themselves: an auditor listing the store
	// finds exactly the objects the metadata names, with the same entries.
	byKey := map[string][]metadata.SliceEntry{}
	for tp := range logs {
		for _, s := range state.Slices(tp, 0) {
			byKey[s.ObjectKey] = append(byKey[s.ObjectKey], s.SliceEntry)
		}
	}
	listed := 0
	if err := objstore.ListAll(ctx, store, "", func(o objstore.ObjectInfo) error {
		listed++
		entries, _, err := objformat.ReadFooter(ctx, store, o.Key)
		if err != nil {
			return fmt.Errorf("footer of %s: %w", o.Key, err)
		}
		if len(entries) != len(byKey[o.Key]) {
			return fmt.Errorf("object %s: footer has %d entries, metadata %d", o.Key, len(entries), len(byKey[o.Key]))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if listed != len(byKey) || int64(listed) != cm.ObjectsPub {
		t.Fatalf("store lists %d objects, metadata names %d, combiner published %d", listed, len(byKey), cm.ObjectsPub)
	}
	return state
}

// checkMetadataCoversLogs asserts that for every partition the FINISHED
// slices in state are contiguous from offset 0 to the log end, never
// overlap, each holds batches of one leader epoch, at most the slice's
// (the uploader's epoch: older for batches an older leader appended), and
// their stored bytes (read by range and CRC-checked) concatenate to the
// leader's segment bytes.
func checkMetadataCoversLogs(t *testing.T, ctx context.Context, store objstore.Store, state *metadata.State, logs map[metadata.TopicPartition]*kafkalog.Log) {
	t.Helper()
	for tp, l := range logs {
		slices := state.Slices(tp, 0)
		var rebuilt []byte
		next := int64(0)
		for i, s := range slices {
			if s.BaseOffset != next {
				t.Fatalf("%s slice %d: base offset %d, want %d (gap or overlap)", tp, i, s.BaseOffset, next)
			}
			stored, err := store.GetRange(ctx, s.ObjectKey, s.Position, s.Length)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := objformat.ReadSlice(stored, s.SliceEntry)
			if err != nil {
				t.Fatalf("%s slice %d: %v", tp, i, err)
			}
			first := int32(-1)
			if err := kafkalog.SplitBatches(raw, func(h kafkalog.BatchHeader, _ []byte) error {
				if first < 0 {
					first = h.PartitionLeaderEpoch
				}
				if h.PartitionLeaderEpoch != first || h.PartitionLeaderEpoch > s.LeaderEpoch {
					return fmt.Errorf("batch at %d has epoch %d in a slice of epoch %d starting with epoch %d", h.BaseOffset, h.PartitionLeaderEpoch, s.LeaderEpoch, first)
				}
				return nil
			}); err != nil {
				t.Fatalf("%s slice %d: %v", tp, i, err)
			}
			rebuilt = append(rebuilt, raw...)
			next = s.LastOffset + 1
		}
		if next != l.LogEndOffset() {
			t.Fatalf("%s: metadata ends at %d, log end %d", tp, next, l.LogEndOffset())
		}
		if !bytes.Equal(rebuilt, leaderBytes(t, l)) {
			t.Fatalf("%s: stored bytes differ from the leader's segments (%d vs %d bytes)", tp, len(rebuilt), len(leaderBytes(t, l)))
		}
	}
}

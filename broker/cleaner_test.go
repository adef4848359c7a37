package broker

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactedTopicOnEveryReplica produces 100,000 keys (with overwrites
// and tombstones) to a compacted RF 3 topic, runs the cleaner on every
// replica and checks each replica's log, and what a consumer reads, against
// a reference map; replicas that cleaned the same range hold the same
// bytes.
func TestCompactedTopicOnEveryReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("produces 250,000 records")
	}
	c := startCluster(t, []string{"az1", "az2", "az1"}, func(cfg *Config) { cfg.LogCleanerDisable = true })
	admin := newClient(t, c)
	const topic = "compacted"
	createTopic(t, admin, topic, 1, 3, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "262144", "min.cleanable.dirty.ratio": "0.1",
	})
	cl := newClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))

	const keys, records = 100_000, 250_000
	rng := rand.New(rand.NewSource(1))
	latest := make(map[string][]byte, keys) // nil value: tombstone
	// A hang guard only: under -race on a loaded 2-core machine the whole
	// test has taken two minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var produceErr atomic.Pointer[error]
	for i := 0; i < records; {
		var batch []*kgo.Record
		for j := 0; j < 1000 && i < records; j, i = j+1, i+1 {
			// Every key at least once, then random overwrites.
			k := i
			if i >= keys {
				k = rng.Intn(keys)
			}
			key := fmt.Sprintf("k%06d", k)
			var v []byte
			if i >= keys && rng.Intn(20) == 0 {
				v = nil // tombstone
			} else {
				v = []byte(fmt.Sprintf("v%d", i))
			}
			latest[key] = v
			batch = append(batch, &kgo.Record{Key: []byte(key), Value: v})
		}
		// Asynchronously (the producer pipelines, in order): 250 rounds
		// of acks=all one after the other were most of the test's time.
		for _, r := range batch {
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					produceErr.CompareAndSwap(nil, &err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if err := produceErr.Load(); err != nil {
		t.Fatalf("produce: %v", *err)
	}

	tp := TopicPartition{Topic: topic, Partition: 0}
	ts, _ := c.ctrl.Topic(topic)
	leader := c.broker(ts.Partitions[0].Leader)
	leo := mustLog(t, leader, tp).LogEndOffset()
	waitFor(t, "every replica at the leader's high watermark", 30*time.Second, func() bool {
		for _, b := range c.brokers {
			if l := mustLog(t, b, tp); l.LogEndOffset() != leo || l.HighWatermark() != leo {
				return false
			}
		}
		return true
	}, c.sources()...)
	var ends []int64
	for _, b := range c.brokers {
		res := b.CleanLogs()
		if len(res) != 1 || res[0].Err != nil || !res[0].Stats.Cleaned {
			t.Fatalf("broker %d cleaner: %+v", b.cfg.BrokerID, res)
		}
		st := res[0].Stats
		t.Logf("broker %d: %d → %d records, %d → %d bytes, cleaned below %d", b.cfg.BrokerID, st.RecordsIn, st.RecordsOut, st.BytesIn, st.BytesOut, st.End)
		ends = append(ends, st.End)
		got, dups := lastWins(t, mustLog(t, b, tp), st.End)
		if dups != 0 {
			t.Fatalf("broker %d: %d superseded records below the cleaned end %d", b.cfg.BrokerID, dups, st.End)
		}
		sameMap(t, fmt.Sprintf("broker %d log", b.cfg.BrokerID), got, latest)
	}
	// Same range cleaned everywhere → the same bytes everywhere.
	ref := mustLog(t, c.brokers[0], tp).Segments()
	for i, b := range c.brokers[1:] {
		if ends[i+1] != ends[0] {
			t.Fatalf("cleaned ends differ: %v", ends)
		}
		segs := mustLog(t, b, tp).Segments()
		if len(segs) != len(ref) {
			t.Fatalf("broker %d has %d segments, broker 1 %d", b.cfg.BrokerID, len(segs), len(ref))
		}
		for j := range ref {
			x, err1 := mustLog(t, c.brokers[0], tp).ReadSegmentRange(ref[j].BaseOffset, 0, ref[j].Size)
			y, err2 := mustLog(t, b, tp).ReadSegmentRange(segs[j].BaseOffset, 0, segs[j].Size)
			if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
				t.Fatalf("segment %d differs between broker 1 and %d (%v %v)", ref[j].BaseOffset, b.cfg.BrokerID, err1, err2)
			}
		}
	}

	// A consumer reading the whole topic sees the latest value of every
	// key (tombstones included), fewer records than were produced, and
	// offsets in order.
	cons := newClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	seen := map[string][]byte{}
	var n int
	last := int64(-1)
	for last < leo-1 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			seen[string(r.Key)] = r.Value
			n++
		})
	}
	sameMap(t, "consumer", seen, latest)
	if n >= records {
		t.Fatalf("consumer read %d records of %d produced: nothing was compacted", n, records)
	}
}

func mustLog(t testing.TB, b *Broker, tp TopicPartition) *kafkalog.Log {
	t.Helper()
	l, ok := b.PartitionLog(tp)
	if !ok {
		t.Fatalf("broker %d has no log for %s", b.cfg.BrokerID, tp)
	}
	return l
}

// lastWins reads a whole log, returning the last value per key and how
// many records below end are not the last of their key.
func lastWins(t testing.TB, l *kafkalog.Log, end int64) (map[string][]byte, int) {
	t.Helper()
	type at struct {
		off int64
		v   []byte
	}
	all := map[string][]at{}
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		data, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		for p := 0; p < len(data); {
			h, err := kafkalog.ParseBatchHeader(data[p:])
			if err != nil {
				t.Fatal(err)
			}
			if err := kafkalog.EachRecord(data[p:p+h.Size()], func(r kafkalog.Record) {
				all[string(r.Key)] = append(all[string(r.Key)], at{r.Offset, r.Value})
			}); err != nil {
				t.Fatal(err)
			}
			p += h.Size()
			off = h.NextOffset()
		}
	}
	out := map[string][]byte{}
	dups := 0
	for k, as := range all {
		out[k] = as[len(as)-1].v
		for _, a := range as[:len(as)-1] {
			if a.off < end && as[len(as)-1].off < end {
				dups++
			}
		}
	}
	return out, dups
}

func sameMap(t testing.TB, what string, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || !bytes.Equal(g, w) || (g == nil) != (w == nil) {
			t.Fatalf("%s: key %s = %q, want %q", what, k, g, w)
		}
	}
}

// Retention deletes segments of topics whose cleanup.policy includes
// delete, never of a compact-only one.
func TestRetentionFollowsCleanupPolicy(t *testing.T) {
	c := startCluster(t, []string{"az1"}, func(cfg *Config) { cfg.LogCleanerDisable = true })
	admin := newClient(t, c)
	for _, tc := range []struct {
		policy string
		purges bool
	}{{"compact", false}, {"compact,delete", true}, {"delete", true}} {
		topic := "ret-" + strings.ReplaceAll(tc.policy, ",", "-")
		createTopic(t, admin, topic, 1, 1, map[string]string{"cleanup.policy": tc.policy, "segment.bytes": "1024", "retention.ms": "1"})
		cl := newClient(t, c, kgo.DefaultProduceTopic(topic))
		for i := 0; i < 50; i++ {
			// Timestamps far in the past: every sealed segment is expired.
			r := &kgo.Record{Key: []byte(fmt.Sprint("k", i%5)), Value: bytes.Repeat([]byte("v"), 100), Timestamp: time.Unix(1_000_000, 0)}
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		l := mustLog(t, c.brokers[0], TopicPartition{Topic: topic})
		waitFor(t, "the high watermark at the log end", 10*time.Second, func() bool { return l.HighWatermark() == l.LogEndOffset() }, c.sources()...)
		c.brokers[0].enforceRetention()
		if moved := l.LogStartOffset() > 0; moved != tc.purges {
			t.Fatalf("cleanup.policy=%s: log start %d after retention (want purged=%v)", tc.policy, l.LogStartOffset(), tc.purges)
		}
	}
}

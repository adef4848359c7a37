package broker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/changefeed/feedtest"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestToldMeansWritten: a follower's long poll parked at the leader, on a
// connection the follower then closes (the fetcher cuts its poll:
// cutPollLocked), is answered when the HW moves; that answer is never
// read, so it must not count the HW as told. Otherwise the follower's
// next long poll, on a new connection, waits for news it never got: for
// ever here, on a manual clock that does not move. Brokers 2 and 3 are
// played by the test over the wire.
func TestToldMeansWritten(t *testing.T) {
	clk := clock.NewManual(t0)
	mem := NewMemController(nil, 1000)
	b, err := New(Config{
		BrokerID: 1, Rack: "az1", Listener: "127.0.0.1:0", LogDir: t.TempDir(),
		Controller: mem, Ledger: ledger.New(), Logger: testLogger(t, slog.LevelWarn), Clock: clk,
		LeaderImbalanceCheckInterval: 24 * time.Hour, ReplicaLagTimeMax: 24 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, id := range []int32{2, 3} {
		if _, err := mem.RegisterBroker(BrokerInfo{ID: id, Host: "127.0.0.1", Port: 1, Rack: "az2"}); err != nil {
			t.Fatal(err)
		}
	}
	const topic = "told"
	ts, err := mem.CreateTopic(TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: topic, Partition: 0}
	if ts.Partitions[0].Leader != 1 {
		if _, err := mem.ElectLeader(tp, 1); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "broker 1 leads", 10*time.Second, func() bool {
		st, ok := b.PartitionStatus(tp)
		return ok && st.IsLeader && len(st.State.ISR) == 3
	}, b, mem)
	p := b.partition(tp)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(n int) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: value(i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	dial := func() *wireClient {
		t.Helper()
		c, err := dialWire(b.cfg.Dial, b.Addr(), "test-follower", 5*time.Second, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.close)
		return c
	}
	request := func(id int32, offset int64, maxWait time.Duration) *kmsg.FetchRequest {
		req := replicaFetchAt(p, topic, id, offset)
		req.MaxWaitMillis, req.MinBytes = int32(maxWait.Milliseconds()), 1
		return req
	}
	// The wall-clock deadline only bounds a hung test: the manual clock
	// never moves here, so a poll the leader parks is never answered.
	fetch := func(c *wireClient, id int32, offset int64, maxWait time.Duration) int64 {
		t.Helper()
		r, err := c.roundTrip(request(id, offset, maxWait), time.Now().Add(20*time.Second))
		if err != nil {
			t.Fatalf("fetch of replica %d at %d: %v (a long poll the leader parked for news it had counted as told)", id, offset, err)
		}
		rp := r.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			t.Fatalf("fetch of replica %d at %d: %v", id, offset, kerr.ErrorForCode(rp.ErrorCode))
		}
		return rp.HighWatermark
	}
	a, bb := dial(), dial()
	produce(10)
	fetch(a, 2, 10, 0)
	fetch(bb, 3, 10, 0) // both followers have 10: the HW is 10
	if hw := fetch(a, 2, 10, 0); hw != 10 {
		t.Fatalf("HW %d, want 10", hw)
	}
	produce(5)
	fetch(a, 2, 15, 0) // replica 2 has 15 and was told HW 10

	// Replica 2 long-polls at 15; the leader parks it (nothing new).
	go func() { a.roundTrip(request(2, 15, time.Hour), time.Now().Add(time.Minute)) }()
	// Parked: watched, then its timeout armed on the wheel (which arms the
	// manual clock). From here the HW moving completes it in the call
	// that moves it, before that call's own answer.
	waitFor(t, "replica 2's long poll parked", 10*time.Second, func() bool {
		return b.fetchWait.Metrics().TimerEntries > 0
	}, b, feedtest.Armed(clk))
	a.abort() // the fetcher cuts it (cutPollLocked)
	// Replica 3 catches up: the HW moves to 15, and the parked poll is
	// answered with it (built in this fetch's handler), onto the closed
	// connection.
	fetch(bb, 3, 15, 0)
	if hw := p.log.HighWatermark(); hw != 15 {
		t.Fatalf("HW %d, want 15", hw)
	}
	// Its next poll, on a new connection, is answered at once with the HW
	// it never read.
	if hw := fetch(dial(), 2, 15, time.Hour); hw != 15 {
		t.Fatalf("HW %d, want 15", hw)
	}
}

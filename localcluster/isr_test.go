package localcluster

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/kclient"
)

// TestISRHoldsUnderContinuousProduce: with no fault, followers that keep
// fetching stay in the ISR however fast the leader's log end moves
// (issue 12 saw remotewal followers dropped 31 times in 60 s with
// replica.lag.time.max.ms=3000). Async acks=all produce keeps the
// leader's log end moving between every two follower fetches; the test
// counts the ISR shrinks the leaders proposed. KWAL_ISR_SOAK=60s runs it
// longer (the measurement in the issue); CI runs 8 s.
func TestISRHoldsUnderContinuousProduce(t *testing.T) {
	d := 8 * time.Second
	if v := os.Getenv("KWAL_ISR_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("KWAL_ISR_SOAK=%q: %v", v, err)
		}
	}
	const lag = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
	defer cancel()
	// The S3 Express latency model and the default remote.wal.* settings:
	// a remotewal follower trails the leader by an upload and a read.
	lc, cl := startWithTopic(t, ctx, Config{StorageURL: "mem://", LatencyModel: "s3express", RemoteWAL: broker.RemoteWALConfig{CombinerTaskInterval: broker.DefaultCombinerTaskInterval},
		Tweak: func(c *broker.Config) { c.ReplicaLagTimeMax = lag }},
		"soak-rw", 3, kgo.ProducerLinger(0), kgo.MaxBufferedRecords(2000))
	if err := kclient.CreateTopic(ctx, cl, "soak-classic", 3, 3, nil, false); err != nil {
		t.Fatal(err)
	}
	// An acks=1 producer beside the acks=all one, as kwal chaos runs: its
	// appends do not wait for the followers, so the leader's log end runs
	// ahead of a remotewal follower by the upload and read-back pipeline.
	one, err := kgo.NewClient(kgo.SeedBrokers(lc.Bootstrap()...), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(2000))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	var acked, failed atomic.Int64
	value := make([]byte, 200)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, c := range []*kgo.Client{cl, one} {
			for _, topic := range []string{"soak-rw", "soak-classic"} {
				c.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
						return
					}
					acked.Add(1)
				})
			}
		}
	}
	for _, c := range []*kgo.Client{cl, one} {
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var shrinks, expands int64
	for _, b := range lc.Brokers {
		s, e := b.ISRProposals()
		shrinks, expands = shrinks+s, expands+e
	}
	t.Logf("%v of continuous acks=all produce (lag %v): %d acknowledged, %d failed; ISR shrinks %d, expands %d",
		d, lag, acked.Load(), failed.Load(), shrinks, expands)
	if shrinks != 0 {
		t.Errorf("%d ISR shrinks without a fault", shrinks)
	}
	if acked.Load() == 0 {
		t.Fatal("nothing acknowledged")
	}
}

package localcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/internal/kclient"
	"github.com/kwal/kwal/objstore/ledger"
)

// The cluster kwal demo, the benches and kwal broker run (rwnode's
// production assembly over a ledger-wrapped store) must count every PUT
// of a combined object as the combiner's: a request with another
// component, or none, means a writer that does not tag its requests is
// wired in, and the cost model would misattribute them.
func TestCombinerPutsAreTaggedInProductionAssembly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lc, err := Start(ctx, Config{
		Dir: t.TempDir(), StorageURL: "mem://", LatencyModel: "none",
		RemoteWAL: broker.RemoteWALConfig{CombinerTaskInterval: 5 * time.Millisecond},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lc.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(lc.Bootstrap()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("tagged"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := kclient.CreateTopic(ctx, cl, "tagged", 2, 3, map[string]string{broker.TopicConfigRemoteWAL: "true"}, false); err != nil {
		t.Fatal(err)
	}
	// acks=all in remotewal mode answers only after every follower read
	// the bytes back from the store, so each record below was PUT first.
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var puts int64
	for i, l := range lc.Ledgers {
		for _, r := range l.Snapshot().Requests {
			if r.Kind != ledger.Put {
				continue
			}
			if r.Component != combiner.Component {
				t.Errorf("broker %d: %d PUTs recorded with component %q, want %q", i+1, r.Requests, r.Component, combiner.Component)
			}
			puts += r.Requests
		}
	}
	if puts == 0 {
		t.Fatal("no PUT reached the ledger: the store is not ledger-wrapped, or nothing was uploaded")
	}
}

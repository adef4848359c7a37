package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kwal/kwal/cmd/kwal/internal/brokerbench"
)

// A tiny one-broker run with real processes (the test binary stands for
// kwal): kfake, a classic and a remotewal `kwal broker`, each with a
// producer and a consumer process; every throughput is measured (CPU may
// round to 0 at 10 ms ticks for 3 MB),
// and the consumer read back every byte produced (RunOneBroker fails
// otherwise).
func TestBenchBrokerOneBrokerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker and client processes")
	}
	t.Setenv(childAsKwalEnv, "1")
	rep, err := brokerbench.RunOneBroker(context.Background(), brokerbench.OneBrokerConfig{
		Exe: os.Args[0], Records: 3000, RecordBytes: 1024, Partitions: 2, Runs: 1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(brokerbench.OneBrokerTargets) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(brokerbench.OneBrokerTargets))
	}
	for _, r := range rep.Rows {
		if r.MedianProduceMBps <= 0 || r.MedianConsumeMBps <= 0 || r.MedianProduceCPUPerGB < 0 {
			t.Errorf("%s: produce %v MB/s, consume %v MB/s, %v CPU-s/GB produced", r.Target, r.MedianProduceMBps, r.MedianConsumeMBps, r.MedianProduceCPUPerGB)
		}
	}
	if rep.Rows[0].Target != "kfake" || rep.Rows[0].ConsumeVsKfake != 1 {
		t.Errorf("first row %s, consume vs kfake %v", rep.Rows[0].Target, rep.Rows[0].ConsumeVsKfake)
	}
	var buf bytes.Buffer
	brokerbench.WriteOneBrokerTable(&buf, rep)
	if err := brokerbench.WriteOneBrokerPNG(&bytes.Buffer{}, rep, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kwal-remotewal", "broker CPU-s/GB consumed", "vs kfake"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

package brokerbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestLoopback(t *testing.T) {
	bw, err := loopbackMBps(8 << 20)
	if err != nil || bw <= 0 {
		t.Fatalf("loopback: %v MB/s, %v", bw, err)
	}
}

// A tiny real run: every target is measured and the table has ratios.
func TestTinyRun(t *testing.T) {
	rep, err := Run(context.Background(), Config{Records: 2000, RecordBytes: 512, Partitions: 2, Runs: 1, LatencyModel: "none"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 7 {
		t.Fatalf("%d rows, want 7 (3 targets × 2 acks + loopback)", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if r.MedianMBps <= 0 {
			t.Fatalf("%s acks=%s measured %v MB/s", r.Target, r.Acks, r.MedianMBps)
		}
	}
	var buf bytes.Buffer
	WriteTable(&buf, rep)
	if !strings.Contains(buf.String(), "vs kfake") || !strings.Contains(buf.String(), "kwal-remotewal") {
		t.Fatalf("table:\n%s", buf.String())
	}
}

package replbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// A short real run: every stage is measured for the slices that made it
// through, and the table names them all.
func TestTinyRun(t *testing.T) {
	r, err := Run(context.Background(), Config{
		Partitions: 3, BatchBytes: 2048, RateMBps: 0.5, Duration: 700 * time.Millisecond,
		Interval: 10 * time.Millisecond, TaskInterval: 5 * time.Millisecond, LatencyModel: "none",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Slices == 0 || r.Objects == 0 || r.GETs == 0 {
		t.Fatalf("nothing measured: %+v", r)
	}
	if r.P50["total"] <= 0 || r.P99["total"] < r.P50["total"] {
		t.Fatalf("total lag p50 %v p99 %v", r.P50["total"], r.P99["total"])
	}
	var buf bytes.Buffer
	WriteTable(&buf, []*Result{r})
	for _, s := range Stages {
		if !strings.Contains(buf.String(), s) {
			t.Fatalf("table lacks stage %s:\n%s", s, buf.String())
		}
	}
}

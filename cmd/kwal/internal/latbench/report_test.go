package latbench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/objstore/latency"
)

// syntheticReport has three repetitions of two modes of E2E in the
// headline and one sweep setting.
func syntheticReport() *Report {
	lat, _ := latency.Preset("s3express")
	r := &Report{
		Env: Env{NumCPU: 2, GOMAXPROCS: 2, GoVersion: "go1.x", GOOS: "linux", GOARCH: "amd64", Started: "2025-01-01T00:00:00Z"},
		Config: ReportConfig{Reps: 3, LatencyModel: lat, CrossAZOneWay: 500 * time.Microsecond, ReplicationFactor: 2,
			Racks: brokerRacks(), StoreSheet: "s3express-2025", NetworkSheet: "aws-cross-az", HoursPerMonth: 720,
			CrossAZDirectionsBilled: 2, Brokers: 3, E2ERecords: 100, E2ERate: 100, PerfRecords: 1000, PerfRecordBytes: 2000},
		Link: []LinkFigures{{ConfiguredOneWay: 500 * time.Microsecond, MeasuredMeanOneWay: 600 * time.Microsecond, DelayedWrites: 10}},
	}
	head := Setting{10 * time.Millisecond, 4 << 20}
	for rep := 0; rep < 3; rep++ {
		for _, mode := range []string{Classic, RemoteWAL} {
			base := time.Millisecond
			if mode == RemoteWAL {
				base = 20 * time.Millisecond
			}
			samples := make([]time.Duration, 100)
			for i := range samples {
				samples[i] = base + time.Duration(i+rep)*100*time.Microsecond
			}
			run := RunResult{Headline: true, Setting: head, Step: Step{Workload: E2E, Mode: mode, Rep: rep},
				Records: 100, Samples: samples, Latency: Summarize(samples), RecordsPerSec: float64(100 + rep),
				CostUSD: float64(10 * (rep + 1)), CostLines: map[string]float64{"PUT requests": float64(rep)}}
			if mode == RemoteWAL {
				run.Ledger = LedgerFigures{Puts: 100, Gets: 100, BytesPut: 160_000, BytesGot: 160_000, PutsPerSec: 100, GetsPerSec: 100}
			} else {
				run.Ledger = LedgerFigures{CrossAZBytes: 170_000}
			}
			r.Runs = append(r.Runs, run)
			sw := run
			sw.Phase, sw.Headline, sw.Setting, sw.Workload = 1, false, Setting{50 * time.Millisecond, 64 << 10}, Stream
			r.Runs = append(r.Runs, sw)
		}
	}
	r.Aggregate()
	return r
}

func TestAggregateMedians(t *testing.T) {
	r := syntheticReport()
	if len(r.Rows) != 4 {
		t.Fatalf("%d rows, want 4", len(r.Rows))
	}
	row := r.Rows[0]
	if row.Workload != E2E || row.Mode != Classic || row.Reps != 3 || !row.Headline {
		t.Fatalf("first row %+v", row)
	}
	// p50 of rep k is 1 ms + (49+k)*0.1 ms; the median over reps is k=1.
	if want := time.Millisecond + 50*100*time.Microsecond; row.P50 != want {
		t.Errorf("P50 = %v, want %v", row.P50, want)
	}
	if row.RecordsPerSec != 101 || row.CostUSD != 20 || row.CostLines["PUT requests"] != 1 {
		t.Errorf("medians: rec/s %v, cost %v, lines %v", row.RecordsPerSec, row.CostUSD, row.CostLines)
	}
	if rw := r.Rows[1]; rw.AvgObjectBytes != 1600 || rw.PutsPerSec != 100 {
		t.Errorf("remotewal row %+v", rw)
	}
}

func TestWriteMarkdown(t *testing.T) {
	r := syntheticReport()
	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"ran on 2 cores (runtime.NumCPU() = 2",
		"median over 3 repetitions",
		"`s3express`", "PUT median 4ms / p99 10ms",
		"delivered 500µs later (a 1ms round trip)", "delayed by 600µs on average",
		"`s3express-2025`", "`aws-cross-az`",
		"## Headline (interval=10ms object=4MiB)",
		"| e2e-acks1 | classic | 6.00 |",
		"## Sweep", "| 50ms | 64KiB | remotewal |",
		"cost-latency.png", "cdf-e2e-acks1.png",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

func TestWriteFiles(t *testing.T) {
	r := syntheticReport()
	dir := t.TempDir()
	files, err := r.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ReportMarkdown, ReportJSON, TradeoffPNG, CDFFile(E2E)} {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s not written (wrote %v): %v", name, files, err)
		}
		if strings.HasSuffix(name, ".png") && !bytes.HasPrefix(data, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG", name)
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, ReportJSON))
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Rows) != len(r.Rows) || len(back.Runs) != len(r.Runs) || back.Runs[0].Samples != nil {
		t.Errorf("JSON round trip: %d rows, %d runs", len(back.Rows), len(back.Runs))
	}
}

// TestTargetFromTheRunsOwnFigures: the bound is built from the classic
// row, the interval and the timed PUTs and GETs of the remote-WAL runs,
// not from the model's nominal figures; a run without timed requests has
// no target, and one slower than the bound misses it.
func TestTargetFromTheRunsOwnFigures(t *testing.T) {
	r := syntheticReport()
	if _, ok := TargetOf(r.rowsFor(true)); ok {
		t.Fatal("a target without timed PUTs and GETs")
	}
	ms := time.Millisecond
	for i := range r.Runs {
		run := &r.Runs[i]
		if run.Mode == RemoteWAL && run.Headline {
			k := time.Duration(run.Rep)
			run.StorePut = Summary{N: 10, P50: 5*ms + k*ms, P99: 20 * ms}
			run.StoreGet = Summary{N: 10, P50: 2 * ms, P99: 9*ms + k*ms}
			run.Stages = map[string]Summary{StageHW: {N: 1, P50: ms + k*ms, P99: 3 * ms}}
		}
	}
	r.Aggregate()
	tg, ok := TargetOf(r.rowsFor(true))
	if !ok {
		t.Fatal("no target")
	}
	var c, rw Row
	for _, row := range r.rowsFor(true) {
		if row.Mode == Classic {
			c = row
		} else {
			rw = row
		}
	}
	// Medians over the three runs: PUT p50 6 ms, GET p99 10 ms.
	if want := c.P50 + 5*ms + 6*ms + 2*ms + TargetSlack; tg.BoundP50 != want {
		t.Errorf("p50 bound %v, want %v", tg.BoundP50, want)
	}
	if want := c.P99 + 10*ms + 20*ms + 10*ms + TargetSlack; tg.BoundP99 != want {
		t.Errorf("p99 bound %v, want %v", tg.BoundP99, want)
	}
	if tg.MeasuredP50 != rw.P50 || tg.RatioP50 != float64(rw.P50)/float64(tg.BoundP50) || tg.MetP50 != (rw.P50 <= tg.BoundP50) {
		t.Errorf("p50: %+v against row p50 %v", tg, rw.P50)
	}
	if r.Target == nil || *r.Target != tg {
		t.Errorf("report's target %+v, want %+v", r.Target, tg)
	}
	if rw.StageP50[StageHW] != 2*ms {
		t.Errorf("hw stage p50 %v, want the median 2ms", rw.StageP50[StageHW])
	}
	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Target", "| p50 | " + fmtMs(rw.P50) + " | " + fmtMs(tg.BoundP50), "### Where the end-to-end time goes"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestTracerStages splits a record at its marks and leaves out records
// whose marks are missing or out of order.
func TestTracerStages(t *testing.T) {
	tr := &offsetTracer{}
	tr.mu.marks = map[int64]*offsetMarks{}
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	seen := int64(5)
	tr.mark(&seen, 8, at(1), func(m *offsetMarks) *time.Time { return &m.leaderLog })
	seen = 5
	tr.mark(&seen, 7, at(10), func(m *offsetMarks) *time.Time { return &m.followerLog })
	seen = 5
	tr.mark(&seen, 6, at(12), func(m *offsetMarks) *time.Time { return &m.followerHW })
	tr.mark(&seen, 7, at(13), func(m *offsetMarks) *time.Time { return &m.followerHW })
	tr.mark(&seen, 7, at(99), func(m *offsetMarks) *time.Time { return &m.followerHW }) // nothing new
	got := tr.stages([]consumedRecord{
		{offset: 5, created: at(0), consumed: at(14)},
		{offset: 6, created: at(0), consumed: at(15)},
		{offset: 7, created: at(0), consumed: at(20)}, // not in the follower's log
		{offset: 4, created: at(0), consumed: at(20)}, // before the watchers
	})
	want := map[string][2]time.Duration{ // min, max
		StageProduce: {time.Millisecond, time.Millisecond}, StageReplicate: {9 * time.Millisecond, 9 * time.Millisecond},
		StageHW: {2 * time.Millisecond, 3 * time.Millisecond}, StageDeliver: {2 * time.Millisecond, 2 * time.Millisecond},
	}
	for s, w := range want {
		sm := got[s]
		if sm.N != 2 || sm.P50 != w[0] || sm.Max != w[1] {
			t.Errorf("%s: %+v, want 2 samples from %v to %v", s, sm, w[0], w[1])
		}
	}
}

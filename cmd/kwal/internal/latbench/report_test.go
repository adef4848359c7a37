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

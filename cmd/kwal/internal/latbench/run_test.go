package latbench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunTiny runs a tiny benchmark end to end against a real in-process
// cluster: E2E and the producer/consumer perf tests, both modes, three
// repetitions, no sweep, then writes the report.
func TestRunTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	cfg := Config{
		Quick: true, NoSweep: true, Workloads: []Workload{E2E, Produce, Consume},
		E2ERecords: 30, E2ERate: 300, PerfRecords: 200, Dir: t.TempDir(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 3*2*3 || len(rep.Rows) != 3*2 {
		t.Fatalf("%d runs, %d rows", len(rep.Runs), len(rep.Rows))
	}
	// The kernel may account CPU time in ticks, so one short run can show
	// none; all of them cannot.
	var cpu time.Duration
	for _, run := range rep.Runs {
		if run.Duplicates != 0 || run.OutOfOrder != 0 {
			t.Errorf("%s %s rep %d: %d duplicates, %d out of order", run.Workload, run.Mode, run.Rep, run.Duplicates, run.OutOfOrder)
		}
		want := map[Workload]int{E2E: 30, Produce: 200, Consume: 200}[run.Workload]
		if run.Records != want || run.Latency.N == 0 || run.RecordsPerSec <= 0 || run.Window <= 0 {
			t.Errorf("%s %s rep %d: %d records (want %d), latency %+v, %v rec/s", run.Workload, run.Mode, run.Rep, run.Records, want, run.Latency, run.RecordsPerSec)
		}
		if run.Workload == E2E {
			// Every record is marked at every boundary; how many have
			// their marks in order (and so count in the stages) depends
			// on when the watchers' goroutines ran, so only the bound by
			// the records is checked for those.
			if run.StageRecords != run.Records {
				t.Errorf("%s %s rep %d: %d of %d records marked at every stage boundary", run.Workload, run.Mode, run.Rep, run.StageRecords, run.Records)
			}
			for _, st := range E2EStages {
				if sm := run.Stages[st]; sm.N > run.Records {
					t.Errorf("%s %s rep %d: stage %s has %d of %d records", run.Workload, run.Mode, run.Rep, st, sm.N, run.Records)
				}
			}
			if run.Mode == RemoteWAL && (run.StorePut.N == 0 || run.StoreGet.N == 0 || run.StorePut.P50 <= 0) {
				t.Errorf("remotewal e2e rep %d: store timings %+v / %+v", run.Rep, run.StorePut, run.StoreGet)
			}
		}
		if run.Workload == Produce && (run.Wire.Requests == 0 || run.Wire.RequestBytes <= 0 || run.Wire.RTT.Mean <= 0) {
			t.Errorf("%s %s rep %d: wire figures %+v", run.Workload, run.Mode, run.Rep, run.Wire)
		}
		cpu += run.CPU
		switch {
		case run.Workload == Consume:
			// Reads from the follower in its own rack: nothing to upload.
		case run.Mode == RemoteWAL:
			if run.Ledger.Puts == 0 || run.Ledger.Gets == 0 || run.CostUSD <= 0 {
				t.Errorf("remotewal %s rep %d: ledger %+v, $%v", run.Workload, run.Rep, run.Ledger, run.CostUSD)
			}
			if b := run.Ledger.CrossAZByComponent["replica-fetch"]; b > run.Bytes/2 {
				t.Errorf("remotewal %s rep %d: %d record bytes crossed racks by replica fetch", run.Workload, run.Rep, b)
			}
		default:
			if run.Ledger.Puts != 0 || run.Ledger.CrossAZByComponent["replica-fetch"] < run.Bytes {
				t.Errorf("classic %s rep %d: ledger %+v for %d bytes", run.Workload, run.Rep, run.Ledger, run.Bytes)
			}
		}
	}
	if cpu <= 0 {
		t.Error("no CPU time measured over all the runs")
	}
	if len(rep.InFlight) != 2 || rep.InFlight[1].RTTForHalfClassic <= 0 {
		t.Errorf("in-flight bounds %+v", rep.InFlight)
	}
	if rep.Config.Store != storeName(DefaultStorageURL) {
		t.Errorf("store %q, want the default %q", rep.Config.Store, storeName(DefaultStorageURL))
	}
	if mean, n := rep.Link[0].MeasuredMeanOneWay, rep.Link[0].DelayedWrites; n == 0 || mean < rep.Config.CrossAZOneWay {
		t.Errorf("network model: %d delayed writes, mean %v", n, mean)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := rep.WriteFiles(out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ReportMarkdown, ReportJSON, CDFFile(E2E), CDFFile(Produce), CDFFile(Consume)} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
}

// TestRunTinyPartitions runs the producer and consumer perf tests on
// topics of several partitions (Config.ProducePartitions): the producer
// writes to the leaders of every broker, the consumer reads every record
// back from all partitions, and the followers of every partition catch up
// before a run ends.
func TestRunTinyPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	cfg := Config{
		Quick: true, NoSweep: true, Workloads: []Workload{Produce, Consume, ProduceAll},
		PerfRecords: 400, ProducePartitions: 4, Dir: t.TempDir(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 3*2*3 {
		t.Fatalf("%d runs", len(rep.Runs))
	}
	for _, run := range rep.Runs {
		if run.Records != 400 {
			t.Errorf("%s %s rep %d: %d records, want 400", run.Workload, run.Mode, run.Rep, run.Records)
		}
		if run.Workload != Consume && run.Wire.Connections < 2 {
			t.Errorf("%s %s rep %d: produced to %d brokers, want the leaders of 4 partitions on at least 2", run.Workload, run.Mode, run.Rep, run.Wire.Connections)
		}
		// The brokers' histograms: every acks=all produce waited; only the
		// remote WAL PUTs and GETs.
		if run.Workload == ProduceAll && run.Path["acks_all_wait"].Count == 0 {
			t.Errorf("%s %s rep %d: no acks=all wait observed: %+v", run.Workload, run.Mode, run.Rep, run.Path)
		}
		if run.Workload != Consume {
			_, put := run.Path["put"]
			_, get := run.Path["get"]
			if (run.Mode == RemoteWAL) != (put && get) {
				t.Errorf("%s %s rep %d: stages %+v", run.Workload, run.Mode, run.Rep, run.Path)
			}
		}
	}
	if rep.Config.ProducePartitions != 4 {
		t.Errorf("report states %d partitions, want 4", rep.Config.ProducePartitions)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"unthrottled, 4 partitions (the KIP's runs: 1)",
		"These topics have 4 partitions (`--partitions`)",
		"| produce-acksall | remotewal | 3 | 5 |",
		"### Where a produced record's time goes on the brokers",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
}

package latbench

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// parityRuns has reps repetitions of both produce workloads in both modes,
// with the records/s and CPU given per mode and repetition.
func parityRuns(reps int, rate func(w Workload, mode string, rep int) float64) []RunResult {
	var runs []RunResult
	for rep := range reps {
		for _, w := range []Workload{Produce, ProduceAll} {
			for _, mode := range []string{Classic, RemoteWAL} {
				rps := rate(w, mode, rep)
				cpu := 10 * time.Millisecond // per MB below: 2 MB a run
				if mode == RemoteWAL {
					cpu = 8 * time.Millisecond
				}
				runs = append(runs, RunResult{Headline: true, Step: Step{Workload: w, Mode: mode, Rep: rep},
					Records: 1000, Bytes: 2_000_000, CPU: 2 * cpu, RecordsPerSec: rps, MBPerSec: rps * 2000 / 1e6})
			}
		}
	}
	return runs
}

// TestParityFromTheRunsOwnFigures: target 2 is the remote WAL's median
// records/s over classic's, the per-repetition pairs are each
// repetition's two modes, and it is met only at the wanted ratio over at
// least three repetitions.
func TestParityFromTheRunsOwnFigures(t *testing.T) {
	// acks=1: classic 100, 110, 90; remote WAL 95, 88, 99 (medians 100 and
	// 95: 0.95). acks=all: classic 100 each time, remote WAL 20, 30, 25.
	rate := func(w Workload, mode string, rep int) float64 {
		switch {
		case mode == Classic && w == Produce:
			return []float64{100, 110, 90}[rep]
		case mode == Classic:
			return 100
		case w == Produce:
			return []float64{95, 88, 99}[rep]
		}
		return []float64{20, 30, 25}[rep]
	}
	r := &Report{Runs: parityRuns(3, rate)}
	r.Aggregate()
	if len(r.Parity) != 2 {
		t.Fatalf("%d parity rows, want 2: %+v", len(r.Parity), r.Parity)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	a1, all := r.Parity[0], r.Parity[1]
	if a1.Workload != Produce || all.Workload != ProduceAll {
		t.Fatalf("workloads %v, %v", a1.Workload, all.Workload)
	}
	near("acks=1 ratio", a1.Ratio, 0.95)
	near("acks=1 want", a1.Want, ParityWantAcks1)
	if want := []float64{0.95, 0.8, 1.1}; len(a1.PerRep) != 3 || !slices.EqualFunc(a1.PerRep, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Errorf("acks=1 per repetition %v, want %v", a1.PerRep, want)
	}
	near("acks=1 CPU ratio", a1.CPURatio, 10.0/8.0)
	if !a1.Met {
		t.Error("acks=1 at 0.95 over 3 repetitions: not met")
	}
	near("acks=all ratio", all.Ratio, 0.25)
	if all.Met {
		t.Error("acks=all at 0.25: met")
	}

	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"### Target: producer parity",
		"| produce-acks1 | 0.95 | ≥ 0.90 | 0.95, 0.80, 1.10 | 0.80 – 1.10 | 1.25 | met |",
		"| produce-acksall | 0.25 | ≥ 0.50 | 0.20, 0.30, 0.25 | 0.20 – 0.30 | 1.25 | missed |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

// TestParityNeedsThreeRepetitionsAndBothModes: two repetitions at the
// ratio are not "met"; a workload without its classic runs gets no row.
func TestParityNeedsThreeRepetitionsAndBothModes(t *testing.T) {
	same := func(Workload, string, int) float64 { return 100 }
	r := &Report{Runs: parityRuns(2, same)}
	r.Aggregate()
	if len(r.Parity) != 2 || r.Parity[0].Ratio != 1 || r.Parity[0].Met {
		t.Fatalf("two repetitions at 1.0: %+v", r.Parity)
	}
	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "at the target, on fewer than 3 repetitions") {
		t.Errorf("markdown does not say the repetitions are too few:\n%s", b.String())
	}

	var runs []RunResult
	for _, run := range parityRuns(3, same) {
		if !(run.Workload == ProduceAll && run.Mode == Classic) {
			runs = append(runs, run)
		}
	}
	r = &Report{Runs: runs}
	r.Aggregate()
	if len(r.Parity) != 1 || r.Parity[0].Workload != Produce {
		t.Fatalf("acks=all without classic runs: %+v", r.Parity)
	}
	// Repetitions one mode lacks are left out of the pairs.
	runs = parityRuns(3, same)
	runs = slices.DeleteFunc(runs, func(run RunResult) bool { return run.Mode == RemoteWAL && run.Rep == 1 })
	r = &Report{Runs: runs}
	r.Aggregate()
	if got := r.Parity[0].PerRep; len(got) != 2 {
		t.Errorf("per repetition %v, want the two repetitions both modes ran", got)
	}
	// E2E rows are not producer parity.
	if ps := ParityOf(syntheticReport().rowsFor(true), syntheticReport().Runs); len(ps) != 0 {
		t.Errorf("parity of E2E rows: %+v", ps)
	}
}

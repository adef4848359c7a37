package latbench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Wanted producer parity (issue 14's target 2): the remote WAL's
// producer throughput over classic's in the same run.
const (
	ParityWantAcks1   = 0.9
	ParityWantAcksAll = 0.5
)

// Parity is issue 14's target 2 for one produce workload, from the
// headline runs of one report: the remote WAL's records/s over classic's.
type Parity struct {
	Workload Workload `json:"workload"`
	// Want is the ratio the target asks for.
	Want float64 `json:"want"`
	// Ratio is the remote WAL's median records/s over classic's median
	// (the headline rows' figures).
	Ratio float64 `json:"ratio"`
	// PerRep is, for each repetition both modes ran, the remote WAL's
	// records/s over classic's in that repetition, in repetition order.
	// The plan runs the two modes of a repetition back to back, so a pair
	// saw about the same machine; the spread of PerRep is how much one
	// run moves there.
	PerRep []float64 `json:"per_rep"`
	// CPURatio is classic's median CPU ms per MB over the remote WAL's:
	// above 1, the remote WAL spent less CPU per MB produced. On a shared
	// machine throughput follows the CPU share a run gets; this does not.
	CPURatio float64 `json:"cpu_ratio,omitempty"`
	// Met: Ratio ≥ Want over at least three repetitions of each mode
	// (the medians of ≥ 3).
	Met bool `json:"met"`
}

// parityWant is the target's ratio for w; ok is false for workloads the
// target does not name.
func parityWant(w Workload) (float64, bool) {
	switch w {
	case Produce:
		return ParityWantAcks1, true
	case ProduceAll:
		return ParityWantAcksAll, true
	}
	return 0, false
}

// ParityOf computes the parity of each produce workload that has both
// modes among rows (one phase's) and runs (the same phase's), in the
// rows' order.
func ParityOf(rows []Row, runs []RunResult) []Parity {
	type key struct {
		w    Workload
		mode string
	}
	byKey := map[key]Row{}
	for _, row := range rows {
		byKey[key{row.Workload, row.Mode}] = row
	}
	var out []Parity
	for _, row := range rows {
		want, ok := parityWant(row.Workload)
		if !ok || row.Mode != RemoteWAL {
			continue
		}
		c, ok := byKey[key{row.Workload, Classic}]
		if !ok || c.RecordsPerSec <= 0 {
			continue
		}
		p := Parity{Workload: row.Workload, Want: want, Ratio: row.RecordsPerSec / c.RecordsPerSec}
		if row.CPUMsPerMB > 0 && c.CPUMsPerMB > 0 {
			p.CPURatio = c.CPUMsPerMB / row.CPUMsPerMB
		}
		p.PerRep = perRepRatios(runs, row.Phase, row.Workload)
		p.Met = p.Ratio >= want && row.Reps >= 3 && c.Reps >= 3
		out = append(out, p)
	}
	return out
}

// perRepRatios pairs phase's runs of w by repetition: remote WAL's
// records/s over classic's, for the repetitions both modes ran.
func perRepRatios(runs []RunResult, phase int, w Workload) []float64 {
	classic, remote := map[int]float64{}, map[int]float64{}
	for _, run := range runs {
		if run.Phase != phase || run.Workload != w {
			continue
		}
		switch run.Mode {
		case Classic:
			classic[run.Rep] = run.RecordsPerSec
		case RemoteWAL:
			remote[run.Rep] = run.RecordsPerSec
		}
	}
	var reps []int
	for rep, c := range classic {
		if _, ok := remote[rep]; ok && c > 0 {
			reps = append(reps, rep)
		}
	}
	slices.Sort(reps)
	out := make([]float64, 0, len(reps))
	for _, rep := range reps {
		out = append(out, remote[rep]/classic[rep])
	}
	return out
}

// writeParity prints target 2 for the headline's produce workloads.
// partitions is the produce topics' partition count: issue 14's target
// is for the KIP's one, so with more the section says what it compares.
func writeParity(b *strings.Builder, ps []Parity, partitions int) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(b, "### Target: producer parity (`%s`, `%s`)\n\n", Produce, ProduceAll)
	if partitions > 1 {
		fmt.Fprintf(b, "These topics have %d partitions (`--partitions`); the target is stated for the KIP's workload 2, one partition, so a verdict here compares the modes on this topic, not the workload the target names.\n\n", partitions)
	}
	fmt.Fprintf(b, "The remote WAL's producer throughput over classic's in this run: the median records/s of each mode (the rows above), and, for each repetition, the two modes' records/s in that repetition, which ran back to back. The spread of those pairs is how much one run moves on this machine; a ratio near the target is not settled by one run. `CPU` is classic's CPU ms per MB over the remote WAL's (the in-flight table): above 1, the remote WAL spent less CPU per MB produced.\n\n")
	fmt.Fprintf(b, "| workload | remotewal ÷ classic | wanted | per repetition | min – max | CPU per MB, classic ÷ remotewal | |\n|---|--:|--:|---|---|--:|---|\n")
	for _, p := range ps {
		reps := make([]string, len(p.PerRep))
		for i, x := range p.PerRep {
			reps[i] = fmt.Sprintf("%.2f", x)
		}
		spread := "-"
		if len(p.PerRep) > 0 {
			spread = fmt.Sprintf("%.2f – %.2f", slices.Min(p.PerRep), slices.Max(p.PerRep))
		}
		cpu := "-"
		if p.CPURatio > 0 {
			cpu = fmt.Sprintf("%.2f", p.CPURatio)
		}
		verdict := "met"
		switch {
		case p.Met:
		case p.Ratio >= p.Want:
			verdict = "at the target, on fewer than 3 repetitions"
		default:
			verdict = "missed"
		}
		fmt.Fprintf(b, "| %s | %.2f | ≥ %.2f | %s | %s | %s | %s |\n", p.Workload, p.Ratio, p.Want, cmp.Or(strings.Join(reps, ", "), "-"), spread, cpu, verdict)
	}
	b.WriteString("\n")
}

package purgbench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kwal/kwal/cmd/kwal/internal/benchreport"
)

// Config chooses the sizes of a Run.
type Config struct {
	// Quick shrinks every workload so the whole run fits a CI budget.
	Quick bool
	// Runs is how many times each (contestant, workload) runs; figures are
	// medians. Default 3.
	Runs int
	// Seed seeds every workload; all contestants get the same seeds.
	Seed uint64
	// Progress, if set, gets one line per finished row.
	Progress io.Writer
}

// Validate fills defaults and rejects nonsense.
func (c *Config) Validate() error {
	if c.Runs == 0 {
		c.Runs = 3
	}
	if c.Runs < 0 {
		return errors.New("purgbench: runs must be positive")
	}
	if c.Seed == 0 {
		c.Seed = 1176
	}
	return nil
}

// Row is one contestant on one workload: the median of every figure over
// the runs, each run's figures, and the ratio of the best other
// contestant's main figure to this one's (above 1 means this one is faster).
type Row struct {
	Contestant string    `json:"contestant"`
	Workload   string    `json:"workload"`
	Median     Figures   `json:"median"`
	Runs       []Figures `json:"runs"`
	// Ratio compares the workload's main figure (ns/op for T1, CPU per
	// timer for T2 and P, CPU per second for I) with the best other
	// contestant, null excluded; 0 when not applicable.
	Ratio float64 `json:"ratio_vs_best_other,omitempty"`
}

// Report is the result of a Run.
type Report struct {
	Config  Config        `json:"config"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Rows    []Row         `json:"rows"`
}

// Contestants in table order.
var Contestants = []string{Kwal, Runtime, Russell, Null}

// Run runs every workload for every contestant, side by side in this
// process.
func Run(cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Config: cfg}
	t1ops, t1pending, t2n := 1_000_000, 10_000, 1_000_000
	rates := []float64{50_000, 100_000, 200_000, 400_000}
	pdur, idur := time.Second, time.Second
	if cfg.Quick {
		t1ops, t2n = 200_000, 100_000
		rates = []float64{50_000, 200_000}
		pdur, idur = 100*time.Millisecond, 250*time.Millisecond
	}
	add := func(c, w string, f func(run int) Figures) {
		r := Row{Contestant: c, Workload: w}
		t0 := time.Now()
		for i := 0; i < cfg.Runs; i++ {
			r.Runs = append(r.Runs, f(i))
		}
		r.Median = median(r.Runs)
		rep.Rows = append(rep.Rows, r)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "done %-12s %-26s %5.1fs\n", c, w, time.Since(t0).Seconds())
		}
	}
	// Idle first: after P the heap is large and GC and leftover goroutines
	// of other contestants would be charged to whoever runs next.
	for _, c := range Contestants[:3] {
		add(c, "I pending=10000", func(int) Figures { return I(c, 10_000, idur) })
	}
	for _, g := range []int{1, 2} {
		w := fmt.Sprintf("T1 goroutines=%d", g)
		for _, c := range Contestants {
			add(c, w, func(run int) Figures { return T1(c, t1pending, t1ops, g, cfg.Seed+uint64(run)) })
		}
	}
	for _, c := range Contestants[:3] {
		add(c, fmt.Sprintf("T2 timers=%d", t2n), func(run int) Figures { return T2(c, t2n, cfg.Seed+uint64(run)) })
	}
	for _, mix := range Mixes {
		for _, rate := range rates {
			w := fmt.Sprintf("P mix=%s rate=%dk", mix.Name, int(rate/1000))
			floor := make([]Figures, cfg.Runs)
			add("load-only", w, func(run int) Figures {
				floor[run] = P("", rate, pdur, mix, ViaForce, cfg.Seed+uint64(run))
				return floor[run]
			})
			for _, c := range Contestants[:3] {
				add(c, w, func(run int) Figures {
					f := P(c, rate, pdur, mix, ViaForce, cfg.Seed+uint64(run))
					f.NetCPUNsPerReq = f.CPUNsPerTimer - floor[run].CPUNsPerTimer
					return f
				})
			}
			if rate != checkRate {
				continue
			}
			// The same load with completions through CheckAndComplete; the
			// load alone is the same, so it shares the floor.
			add(Kwal, fmt.Sprintf("P check mix=%s rate=%dk", mix.Name, int(rate/1000)), func(run int) Figures {
				f := P(Kwal, rate, pdur, mix, ViaCheck, cfg.Seed+uint64(run))
				f.NetCPUNsPerReq = f.CPUNsPerTimer - floor[run].CPUNsPerTimer
				return f
			})
		}
	}
	ratios(rep.Rows)
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// checkRate is the one rate at which P also runs with completions through
// CheckAndComplete (kwal only: the watcher layer is the same code for every
// contestant, and the full run must stay under three minutes).
const checkRate = 50_000

// main returns the figure a workload is judged by; lower is better.
func mainFigure(workload string, f Figures) float64 {
	switch workload[0] {
	case 'T':
		if workload[1] == '1' {
			return f.NsPerOp
		}
		return f.CPUNsPerTimer
	case 'P':
		if strings.HasPrefix(workload, "P check") {
			return 0 // kwal only: nothing to compare with
		}
		return f.NetCPUNsPerReq
	case 'I':
		return f.CPUMsPerSec
	}
	return 0
}

func ratios(rows []Row) {
	for i := range rows {
		r := &rows[i]
		if r.Contestant == Null || r.Contestant == "load-only" {
			continue
		}
		best := 0.0
		for _, o := range rows {
			if o.Workload != r.Workload || o.Contestant == r.Contestant || o.Contestant == Null || o.Contestant == "load-only" {
				continue
			}
			if v := mainFigure(o.Workload, o.Median); v > 0 && (best == 0 || v < best) {
				best = v
			}
		}
		if own := mainFigure(r.Workload, r.Median); own > 0 && best > 0 {
			r.Ratio = best / own
		}
	}
}

func median(fs []Figures) Figures {
	pick := func(get func(Figures) float64) float64 {
		xs := make([]float64, len(fs))
		for i, f := range fs {
			xs[i] = get(f)
		}
		slices.Sort(xs)
		if len(xs)%2 == 1 {
			return xs[len(xs)/2]
		}
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return Figures{
		NsPerOp:        pick(func(f Figures) float64 { return f.NsPerOp }),
		AllocsPerOp:    pick(func(f Figures) float64 { return f.AllocsPerOp }),
		CPUNsPerTimer:  pick(func(f Figures) float64 { return f.CPUNsPerTimer }),
		NetCPUNsPerReq: pick(func(f Figures) float64 { return f.NetCPUNsPerReq }),
		P99LateMs:      pick(func(f Figures) float64 { return f.P99LateMs }),
		MaxLateMs:      pick(func(f Figures) float64 { return f.MaxLateMs }),
		TargetRate:     pick(func(f Figures) float64 { return f.TargetRate }),
		Rate:           pick(func(f Figures) float64 { return f.Rate }),
		Fired:          pick(func(f Figures) float64 { return f.Fired }),
		Expected:       pick(func(f Figures) float64 { return f.Expected }),
		PeakGoroutines: pick(func(f Figures) float64 { return f.PeakGoroutines }),
		CPUMsPerSec:    pick(func(f Figures) float64 { return f.CPUMsPerSec }),
	}
}

// WriteTable prints the report as an aligned table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tcontestant\tns/op\tallocs/op\tCPU ns/timer\tnet CPU ns/req\tp99 late ms\trate/s\tfired/expected\tpeak goroutines\tCPU ms/s\tratio vs best other\t")
	num := func(v float64, prec int) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.*f", prec, v)
	}
	for _, row := range r.Rows {
		f := row.Median
		fe := "-"
		if f.Expected > 0 || f.Fired > 0 {
			fe = fmt.Sprintf("%.0f/%.0f", f.Fired, f.Expected)
		}
		rate := "-"
		if f.TargetRate > 0 {
			rate = fmt.Sprintf("%.0fk/%.0fk", f.Rate/1000, f.TargetRate/1000)
		}
		late := "-"
		if f.P99LateMs != 0 || f.Fired > 0 {
			late = fmt.Sprintf("%.2f", f.P99LateMs)
		}
		ratio := "-"
		if row.Ratio > 0 {
			ratio = fmt.Sprintf("%.2fx", row.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", row.Workload, row.Contestant,
			num(f.NsPerOp, 1), allocs(row.Workload, f.AllocsPerOp), num(f.CPUNsPerTimer, 0), num(f.NetCPUNsPerReq, 0), late, rate, fe,
			num(f.PeakGoroutines, 0), num(f.CPUMsPerSec, 3), ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nmedians of %d runs, %s in %v; CPU from getrusage includes GC and the harness\n"+
		"P: every contestant runs the real purgatory.Purgatory; runtime and russellluo arm its timeouts through\n"+
		"purgatory.Timeouts. The completer calls ForceComplete on each request when its latency has passed, as\n"+
		"Kafka's CompletionQueue does; \"P check\" rows complete through CheckAndComplete(first key) instead.\n"+
		"net CPU subtracts the load-only run with the same seed.\n",
		r.Config.Runs, strings.TrimSpace(quick(r.Config.Quick)), r.Elapsed.Round(time.Second))
	return err
}

func allocs(workload string, v float64) string {
	if workload[:2] != "T1" {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func quick(q bool) string {
	if q {
		return "quick sizes"
	}
	return "full sizes"
}

// WriteJSON writes every figure of the report.
func (r *Report) WriteJSON(w io.Writer) error { return benchreport.WriteJSON(w, r) }

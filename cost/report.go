package cost

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// ReportSchema names the JSON layout of Report; bump it on any change
// that breaks a reader.
const ReportSchema = "kwal.cost.report/v1"

// KIPStore is the object-store sheet the KIP's table was priced with.
const KIPStore = "s3express-2023"

// Report is everything `kwal cost` prints, as written by --json.
type Report struct {
	Schema     string          `json:"schema"`
	Model      Model           `json:"model"`
	Workload   Workload        `json:"workload"`
	Params     []Param         `json:"params"`
	Sheets     []Sheet         `json:"sheets"`
	KIP        KIPReproduction `json:"kip"`
	Full       []Comparison    `json:"full"` // everything counted, one per object-store sheet
	Sweeps     []Sweep         `json:"sweeps"`
	BreakEvens []BreakEven     `json:"break_evens"`
	Curves     []Curve         `json:"curves"`
	Sources    []SourcedFigure `json:"sources"`
}

// breakEvenIntervals are the upload intervals of the break-even table.
func breakEvenIntervals() []time.Duration {
	return []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
		50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
}

// BuildReport computes the whole report for w with every object-store
// sheet of book.
func (m Model) BuildReport(w Workload, book *Book) (Report, error) {
	if err := m.Validate(); err != nil {
		return Report{}, err
	}
	if err := w.Validate(); err != nil {
		return Report{}, err
	}
	r := Report{Schema: ReportSchema, Model: m, Workload: w, Params: w.Params(m), Sheets: book.Sheets("")}
	stores := book.Sheets(KindObjectStore)
	kipStore, err := book.Sheet(KIPStore)
	if err != nil {
		return Report{}, err
	}
	if r.KIP, err = m.ReproduceKIP(w, kipStore, book); err != nil {
		return Report{}, err
	}
	for _, s := range stores {
		cmp, err := m.Compare(w, FullCounting(), s, book)
		if err != nil {
			return Report{}, err
		}
		r.Full = append(r.Full, cmp)
	}
	if r.Sweeps, err = m.Sensitivity(w, stores, book); err != nil {
		return Report{}, err
	}
	if r.BreakEvens, err = m.BreakEvens(w, stores, breakEvenIntervals(), book); err != nil {
		return Report{}, err
	}
	if r.Curves, err = m.Curves(w, stores, 40, 80, book); err != nil {
		return Report{}, err
	}
	for _, s := range r.Sheets {
		r.Sources = append(r.Sources, s.Figures()...)
	}
	return r, nil
}

func usd(v float64) string { return fmt.Sprintf("%10.2f", v) }

func newTab(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// WriteSummary prints the short summary of `kwal cost`.
func WriteSummary(out io.Writer, r Report) {
	fmt.Fprintf(out, "KIP-1176 appendix workload: %d x %s, %g GB/h per broker, one upload every %v, %g h kept; $ per broker-month (%g h).\n\n",
		r.Workload.Brokers, r.Workload.InstanceSheet, r.Workload.InboundGBPerHour, r.Workload.UploadInterval, r.Workload.RetentionHours, r.Model.HoursPerMonth)
	t := newTab(out)
	fmt.Fprintln(t, "counting\tstore\tbaseline $\tremote WAL $\tsaving %\t")
	c := r.KIP.Comparison
	fmt.Fprintf(t, "KIP table (KIP's storage rows)\t%s\t%s\t%s\t%8.1f\t\n", r.KIP.Store,
		usd(KIPBaselineStorageInstance+c.Baseline.Group(GroupTransfer)), usd(KIPRemoteStorageInstance+c.RemoteWAL.Group(GroupTransfer)), r.KIP.ReductionPct)
	for _, f := range r.Full {
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%8.1f\t\n", f.Counting.Name, f.Store, usd(f.Baseline.TotalUSD), usd(f.RemoteWAL.TotalUSD), f.SavingPct)
	}
	t.Flush()
	fmt.Fprintln(out)
	writeBreakEvens(out, r, func(b BreakEven) bool { return b.UploadInterval == r.Workload.UploadInterval.String() })
}

// WriteKIP prints the reproduced KIP table with its assumptions, what it
// leaves out, and then the tables with everything counted.
func WriteKIP(out io.Writer, r Report) {
	fmt.Fprintln(out, "== Assumptions (named parameters) ==")
	t := newTab(out)
	for _, p := range r.Params {
		fmt.Fprintf(t, "  %s\t%s\t%s\n", p.Name, p.Value, p.Why)
	}
	fmt.Fprintf(t, "  cross-AZ directions billed\tKIP table: 1; full: %d\tAWS bills $0.01/GB out of one AZ and $0.01/GB into the other\n", FullCounting().CrossAZDirections)
	t.Flush()

	fmt.Fprintf(out, "\n== KIP-1176 appendix table, reproduced (%s, per broker-month) ==\n", r.KIP.Store)
	t = newTab(out)
	fmt.Fprintln(t, "row\tdesign\tKIP $\tmodel $\tresidual $\tderivation")
	for _, row := range r.KIP.Rows {
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", row.Row, row.Design, usd(row.KIPUSD), usd(row.ModelUSD), usd(row.ResidualUSD), row.Derivation)
	}
	t.Flush()
	fmt.Fprintf(out, "reduction: KIP %.0f%%, model %.1f%%\n", KIPReductionPct, r.KIP.ReductionPct)
	fmt.Fprintf(out, "\n%s\n", wrap(r.KIP.StorageFitNote, 100))

	fmt.Fprintln(out, "\n== What the KIP's figures leave out (priced with the same sheet) ==")
	t = newTab(out)
	fmt.Fprintln(t, "design\titem\tquantity\tunit\t$/month\tnote")
	for _, d := range []struct {
		name  string
		lines []Line
	}{{"baseline", r.KIP.Comparison.BaselineOmitted}, {"remote WAL", r.KIP.Comparison.RemoteWALOmitted}} {
		var sum float64
		for _, l := range d.lines {
			fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", d.name, l.Item, qty(l.Quantity), l.Unit, usd(l.USD), l.Note)
			sum += l.USD
		}
		fmt.Fprintf(t, "%s\t(sum left out)\t\t\t%s\t\n", d.name, usd(sum))
	}
	t.Flush()
	fmt.Fprintln(out, "Also left out by the KIP: the current S3 Express price sheet (Apr 2025), the per-GB fees above 512 KB, and the GETs that")
	fmt.Fprintln(out, "grow with partitions per broker when followers are spread over the fleet (see --sensitivity).")

	for _, f := range r.Full {
		fmt.Fprintf(out, "\n== Everything counted: %s ==\n", f.Store)
		t = newTab(out)
		fmt.Fprintln(t, "row\tbaseline $\tremote WAL $\t")
		for _, g := range []string{GroupStorageInstance, GroupTransfer} {
			fmt.Fprintf(t, "%s\t%s\t%s\t\n", g, usd(f.Baseline.Group(g)), usd(f.RemoteWAL.Group(g)))
		}
		fmt.Fprintf(t, "total\t%s\t%s\t\n", usd(f.Baseline.TotalUSD), usd(f.RemoteWAL.TotalUSD))
		fmt.Fprintf(t, "saving\t\t%s\t(%.1f%%)\n", usd(f.SavingUSD), f.SavingPct)
		t.Flush()
		t = newTab(out)
		fmt.Fprintln(t, "  design\titem\tquantity\tunit\tunit $\t$/month\tnote")
		for _, b := range []Breakdown{f.Baseline, f.RemoteWAL} {
			name := "baseline"
			if b.Sheet != "" {
				name = "remote WAL"
			}
			for _, l := range b.Lines {
				fmt.Fprintf(t, "  %s\t%s\t%s\t%s\t%.8g\t%s\t%s\n", name, l.Item, qty(l.Quantity), l.Unit, l.UnitUSD, usd(l.USD), l.Note)
			}
		}
		t.Flush()
	}
	fmt.Fprintln(out, "\n== Sources of every figure ==")
	t = newTab(out)
	for _, s := range r.Sources {
		fmt.Fprintf(t, "  %s\t%s\t%g\t%s\t%s\n", s.Sheet, s.Field, s.Value, s.Date, s.Source)
	}
	t.Flush()
}

// WriteSensitivity prints the sweeps and the break-even table.
func WriteSensitivity(out io.Writer, r Report) {
	for _, sw := range r.Sweeps {
		fmt.Fprintf(out, "\n== Sensitivity: %s (everything counted, $ per broker-month) ==\n", sw.Title)
		t := newTab(out)
		fmt.Fprintf(t, "setting\t%s\t\n", strings.Join(sw.Columns, "\t"))
		for _, row := range sw.Rows {
			cells := make([]string, len(row.Values))
			for i, v := range row.Values {
				cells[i] = fmt.Sprintf("%10.2f", v)
			}
			fmt.Fprintf(t, "%s\t%s\t\n", row.Label, strings.Join(cells, "\t"))
		}
		t.Flush()
		for _, n := range sw.Notes {
			fmt.Fprintf(out, "  %s\n", n)
		}
	}
	fmt.Fprintln(out)
	writeBreakEvens(out, r, func(BreakEven) bool { return true })
}

func writeBreakEvens(out io.Writer, r Report, keep func(BreakEven) bool) {
	fmt.Fprintln(out, "== Break-even: inbound MB/s per broker below which the remote WAL costs more ==")
	t := newTab(out)
	fmt.Fprintln(t, "counting\tstore\tupload interval\tbreak-even MB/s\t")
	for _, b := range r.BreakEvens {
		if !keep(b) {
			continue
		}
		v := fmt.Sprintf("%10.2f", b.MBps)
		if b.MBps < 0 {
			v = "     never"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t\n", b.Counting, b.Store, b.UploadInterval, v)
	}
	t.Flush()
}

func qty(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1e6:
		return fmt.Sprintf("%.4g M", v/1e6)
	default:
		return fmt.Sprintf("%.6g", v)
	}
}

func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(s) {
		if n > 0 && n+1+len(w) > width {
			b.WriteByte('\n')
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

package latbench

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/kwal/kwal/cmd/kwal/internal/benchreport"
)

func modeColor(mode string) color.Color {
	if mode == Classic {
		return benchreport.ClassicColor
	}
	return benchreport.RemoteWALColor
}

func palette(i int) color.Color {
	p := []color.Color{
		color.RGBA{R: 30, G: 110, B: 200, A: 255},
		color.RGBA{R: 20, G: 150, B: 60, A: 255},
		color.RGBA{R: 200, G: 130, B: 0, A: 255},
		color.RGBA{R: 140, G: 60, B: 170, A: 255},
		color.RGBA{R: 200, G: 30, B: 30, A: 255},
	}
	return p[i%len(p)]
}

func writePNG(p *plot.Plot, out io.Writer) error {
	return benchreport.WritePNG(out, p, 10*vg.Inch, 6*vg.Inch)
}

// WriteCDFPNG draws the latency CDF of workload w in each mode, every
// headline repetition pooled, on a log time axis.
func (r *Report) WriteCDFPNG(out io.Writer, w Workload) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s (%s store model, %v cross-AZ one way, %d reps pooled)",
		w, w.LatencyName(), r.Config.LatencyModel.Name, r.Config.CrossAZOneWay, r.Config.Reps)
	p.X.Label.Text = "latency (ms, log scale)"
	p.Y.Label.Text = "fraction of records at or below"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = ticks125{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	for _, mode := range []string{Classic, RemoteWAL} {
		var pooled []time.Duration
		for _, run := range r.Runs {
			if run.Headline && run.Workload == w && run.Mode == mode {
				pooled = append(pooled, run.Samples...)
			}
		}
		pts := CDF(pooled, 400)
		if len(pts) == 0 {
			continue
		}
		xy := make(plotter.XYs, len(pts))
		for i, pt := range pts {
			xy[i].X, xy[i].Y = max(pt[0], 0.001), pt[1]
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return fmt.Errorf("plot %s %s: %w", w, mode, err)
		}
		l.Color = modeColor(mode)
		l.Width = vg.Points(2)
		if mode == Classic {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		p.Add(l)
		s := Summarize(pooled)
		p.Legend.Add(fmt.Sprintf("%s (n=%d, p50 %s ms, p99 %s ms)", mode, s.N, fmtMs(s.P50), fmtMs(s.P99)), l)
	}
	return writePNG(p, out)
}

// WriteTradeoffPNG draws $ per broker-month against p99 end-to-end latency
// for every sweep setting: one line per object size through the intervals,
// and the classic runs as reference points.
func (r *Report) WriteTradeoffPNG(out io.Writer) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Cost against p99 end-to-end latency (%s store model, sheet %s, %v cross-AZ one way)",
		r.Config.LatencyModel.Name, r.Config.StoreSheet, r.Config.CrossAZOneWay)
	p.X.Label.Text = "p99 end-to-end latency (ms), median of repetitions"
	p.Y.Label.Text = "USD per broker-month, measured rates (storage and instances excluded)"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	sweep := r.rowsFor(false)
	var sizes []int64
	for _, row := range sweep {
		if row.Mode == RemoteWAL && !slices.Contains(sizes, row.Setting.UploadBytes) {
			sizes = append(sizes, row.Setting.UploadBytes)
		}
	}
	slices.Sort(sizes)
	for i, size := range sizes {
		var rows []Row
		for _, row := range sweep {
			if row.Mode == RemoteWAL && row.Setting.UploadBytes == size {
				rows = append(rows, row)
			}
		}
		slices.SortFunc(rows, func(a, b Row) int { return cmp.Compare(a.Setting.Interval, b.Setting.Interval) })
		xy := make(plotter.XYs, len(rows))
		labels := make([]string, len(rows))
		for j, row := range rows {
			xy[j].X, xy[j].Y = ms(row.P99), row.CostUSD
			labels[j] = " " + row.Setting.Interval.String()
		}
		l, s, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color, s.Color = palette(i), palette(i)
		l.Width = vg.Points(2)
		s.Shape = draw.CircleGlyph{}
		p.Add(l, s)
		p.Legend.Add(fmt.Sprintf("remotewal, object %s (labels: interval)", humanBytes(size)), l, s)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: labels})
		if err != nil {
			return err
		}
		p.Add(lb)
	}
	var cl plotter.XYs
	for _, row := range sweep {
		if row.Mode == Classic {
			cl = append(cl, plotter.XY{X: ms(row.P99), Y: row.CostUSD})
		}
	}
	if len(cl) > 0 {
		s, err := plotter.NewScatter(cl)
		if err != nil {
			return err
		}
		s.Color = modeColor(Classic)
		s.Shape = draw.BoxGlyph{}
		s.Radius = vg.Points(4)
		p.Add(s)
		p.Legend.Add("classic (one point per setting's runs)", s)
	}
	return writePNG(p, out)
}

// ticks125 labels a log axis at 1, 2 and 5 times each power of ten.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	lo = max(lo, 1e-3)
	for dec := math.Pow(10, math.Floor(math.Log10(lo))); dec <= hi; dec *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := m * dec
			if v >= lo && v <= hi {
				out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
	}
	return out
}

package brokerbench

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/kwal/kwal/cmd/kwal/internal/benchreport"
)

// WriteOneBrokerPNG plots the one-broker case's medians per target, as
// grouped bars: the produce and consume values of what picks from a row
// (MB/s, or broker CPU-seconds per GB).
func WriteOneBrokerPNG(out io.Writer, rep *OneBrokerReport, cpu bool) error {
	p := plot.New()
	if cpu {
		p.Title.Text = "one broker, RF 1, separate processes: broker CPU-seconds per GB (lower is better)"
		p.Y.Label.Text = "broker CPU-s / GB"
	} else {
		p.Title.Text = "one broker, RF 1, separate processes: throughput"
		p.Y.Label.Text = "MB/s"
	}
	p.Add(plotter.NewGrid())
	var prod, cons plotter.Values
	var names []string
	for _, r := range rep.Rows {
		names = append(names, r.Target)
		if cpu {
			prod, cons = append(prod, r.MedianProduceCPUPerGB), append(cons, r.MedianConsumeCPUPerGB)
		} else {
			prod, cons = append(prod, r.MedianProduceMBps), append(cons, r.MedianConsumeMBps)
		}
	}
	w := vg.Points(28)
	for i, s := range []struct {
		name string
		v    plotter.Values
		c    color.Color
	}{
		{"produce", prod, benchreport.ClassicColor},
		{"consume", cons, benchreport.RemoteWALColor},
	} {
		bars, err := plotter.NewBarChart(s.v, w)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		bars.Color, bars.LineStyle.Width = s.c, 0
		bars.Offset = vg.Length(2*i-1) * w / 2
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	p.Legend.Top = true
	p.NominalX(names...)
	p.Y.Min = 0
	top := 0.0
	for i := range prod {
		top = max(top, prod[i], cons[i])
	}
	p.Y.Max = 1.25 * top // room for the legend
	return benchreport.WritePNG(out, p, 8*vg.Inch, 5*vg.Inch)
}

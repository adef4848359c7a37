package cost

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WriteBreakEvenPNG draws r.Curves (monthly cost against inbound MB/s,
// instance excluded) with the break-even points at the workload's upload
// interval, as a PNG.
func WriteBreakEvenPNG(out io.Writer, r Report) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Remote WAL vs classic replication: $ per broker-month (upload every %v, %g h kept)",
		r.Workload.UploadInterval, r.Workload.RetentionHours)
	p.X.Label.Text = "inbound MB/s per broker"
	p.Y.Label.Text = "USD per broker-month, instance excluded (equal in both)"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	palette := []color.Color{
		color.RGBA{R: 200, G: 30, B: 30, A: 255},
		color.RGBA{R: 230, G: 140, B: 140, A: 255},
		color.RGBA{R: 30, G: 110, B: 200, A: 255},
		color.RGBA{R: 20, G: 150, B: 60, A: 255},
		color.RGBA{R: 140, G: 60, B: 170, A: 255},
		color.RGBA{R: 200, G: 130, B: 0, A: 255},
		color.RGBA{R: 90, G: 90, B: 90, A: 255},
	}
	for i, c := range r.Curves {
		pts := make(plotter.XYs, len(c.XY))
		for j, xy := range c.XY {
			pts[j].X, pts[j].Y = xy[0], xy[1]
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", c.Label, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(2)
		if i == 1 {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		p.Add(l)
		p.Legend.Add(c.Label, l)
	}

	// Break-even markers: where each remote curve meets the full baseline.
	var marks plotter.XYs
	var labels []string
	for _, b := range r.BreakEvens {
		if b.Counting != FullCounting().Name || b.UploadInterval != r.Workload.UploadInterval.String() || b.MBps <= 0 {
			continue
		}
		if len(r.Curves) == 0 || b.MBps > r.Curves[0].XY[len(r.Curves[0].XY)-1][0] {
			continue
		}
		marks = append(marks, plotter.XY{X: b.MBps, Y: interpolate(r.Curves[0].XY, b.MBps)})
		labels = append(labels, fmt.Sprintf("  %.1f MB/s (%s)", b.MBps, b.Store))
	}
	if len(marks) > 0 {
		s, err := plotter.NewScatter(marks)
		if err != nil {
			return err
		}
		s.GlyphStyle.Shape = draw.CircleGlyph{}
		s.GlyphStyle.Radius = vg.Points(4)
		p.Add(s)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: marks, Labels: labels})
		if err != nil {
			return err
		}
		p.Add(lb)
	}
	wt, err := p.WriterTo(11*vg.Inch, 7*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	_, err = wt.WriteTo(out)
	return err
}

func interpolate(xy [][2]float64, x float64) float64 {
	for i := 1; i < len(xy); i++ {
		if xy[i][0] >= x {
			a, b := xy[i-1], xy[i]
			if b[0] == a[0] {
				return b[1]
			}
			return a[1] + (b[1]-a[1])*(x-a[0])/(b[0]-a[0])
		}
	}
	if len(xy) == 0 {
		return 0
	}
	return xy[len(xy)-1][1]
}

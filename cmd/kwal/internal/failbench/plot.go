package failbench

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/kwal/kwal/cmd/kwal/internal/benchreport"
)

// WritePNG plots, per kill, the time to a new leader and to the first
// acknowledged acks=all produce, for each mode.
func WritePNG(out io.Writer, rep *Report) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("leader failover: session timeout %.0f ms, heartbeat %.0f ms, %s store model",
		rep.Config.SessionTimeoutMs, rep.Config.HeartbeatMs, rep.Config.LatencyModel)
	p.X.Label.Text = "kill"
	p.Y.Label.Text = "ms after the kill"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	colors := map[string]color.Color{"classic": benchreport.ClassicColor, "remotewal": benchreport.RemoteWALColor}
	for _, m := range rep.Modes {
		for _, series := range []struct {
			name  string
			get   func(Kill) float64
			shape draw.GlyphDrawer
			dash  []vg.Length
		}{
			{"new leader", func(k Kill) float64 { return k.ToLeaderMs }, draw.CircleGlyph{}, nil},
			{"first acks=all ack", func(k Kill) float64 { return k.ToFirstAckMs }, draw.TriangleGlyph{}, []vg.Length{vg.Points(4), vg.Points(3)}},
		} {
			xy := make(plotter.XYs, len(m.Kills))
			for i, k := range m.Kills {
				xy[i].X, xy[i].Y = float64(i+1), series.get(k)
			}
			line, points, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			c := colors[m.Mode]
			if c == nil {
				c = color.Black
			}
			line.Color, line.Dashes = c, series.dash
			points.Color, points.Shape = c, series.shape
			p.Add(line, points)
			p.Legend.Add(m.Mode+": "+series.name, line, points)
		}
	}
	p.Y.Min = 0
	return benchreport.WritePNG(out, p, 10*vg.Inch, 6*vg.Inch)
}

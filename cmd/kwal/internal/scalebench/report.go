package scalebench

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/kwal/kwal/cmd/kwal/internal/benchreport"
)

// WriteTable prints one column per partition count.
func WriteTable(w io.Writer, rep *Report) {
	c := rep.Config
	fmt.Fprintf(w, "scale: one broker leading N remotewal partitions at %.0f MB/s (batches of %d B, %d producers), %s store under the %q latency model,\n",
		c.RateMBps, c.BatchBytes, c.Producers, c.Store, c.LatencyModel)
	fmt.Fprintf(w, "combiner interval %.0f ms, upload bytes %d, embedded kfake metadata; window %.0f s after %.0f s warm-up; %d CPUs\n",
		c.CombinerInterval, c.UploadBytes, c.DurationS, c.WarmupS, c.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "partitions\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%d\t", r.Partitions)
	}
	fmt.Fprintln(tw)
	rows := []benchreport.Metric[Result]{
		benchreport.Row("produced MB/s", "%.1f", func(r Result) float64 { return r.ProducedMBps }),
		benchreport.Row("batches/s", "%.0f", func(r Result) float64 { return r.BatchesPerS }),
		benchreport.Row("PUTs/s", "%.1f", func(r Result) float64 { return r.PutsPerS }),
		benchreport.Row("PUT MB/s", "%.1f", func(r Result) float64 { return r.PutMBps }),
		benchreport.Row("slices per object", "%.0f", func(r Result) float64 { return r.SlicesPerPut }),
		benchreport.Row("unpublished at end MiB", "%.1f", func(r Result) float64 { return r.UnpublishedMB }),
		benchreport.Row("metadata events/s", "%.0f", func(r Result) float64 { return r.MetaEventsPerS }),
		benchreport.Row("metadata KB/s", "%.1f", func(r Result) float64 { return r.MetaBytesPerS / 1e3 }),
		benchreport.Row("metadata topic MB (run)", "%.2f", func(r Result) float64 { return float64(r.MetaBytes) / 1e6 }),
		benchreport.Row("metadata topic records", "%.0f", func(r Result) float64 { return float64(r.MetaRecords) }),
		benchreport.Row("metadata topic MB (steady, est.)", "%.0f", func(r Result) float64 { return r.MetaSteadyBytes / 1e6 }),
		benchreport.Row("follower bootstrap ms", "%.0f", func(r Result) float64 { return r.BootstrapMs }),
		benchreport.Row("bootstrap records", "%.0f", func(r Result) float64 { return float64(r.BootstrapRecords) }),
		benchreport.Row("heap in use MB (baseline)", "%.0f", func(r Result) float64 { return r.BaseHeapMB }),
		benchreport.Row("heap in use MB (end)", "%.0f", func(r Result) float64 { return r.HeapMB }),
		benchreport.Row("heap in use MB (peak)", "%.0f", func(r Result) float64 { return r.HeapPeakMB }),
	}
	if c.Store == "mem" {
		rows = append(rows, benchreport.Row("mem store objects MB (not in heap rows)", "%.0f", func(r Result) float64 { return r.StoreHeldMB }))
	}
	rows = append(rows, []benchreport.Metric[Result]{
		benchreport.Row("RSS MB (end)", "%.0f", func(r Result) float64 { return r.RSSMB }),
		benchreport.Row("RSS MB (peak)", "%.0f", func(r Result) float64 { return r.RSSPeakMB }),
		benchreport.Row("CPU-s per s", "%.2f", func(r Result) float64 { return r.CPUPerS }),
		benchreport.Row("CPU-ms per MB produced", "%.1f", func(r Result) float64 { return r.CPUmsPerMB }),
		benchreport.Row("GETs/s (priced)", "%.0f", func(r Result) float64 { return r.GetsPerS }),
		benchreport.Row("$ per broker-month", "%.2f", func(r Result) float64 { return r.CostUSD }),
	}...)
	benchreport.WriteRows(tw, rep.Results, rows)
	tw.Flush()
	items := map[string]bool{}
	for _, r := range rep.Results {
		for k := range r.CostLines {
			items[k] = true
		}
	}
	names := make([]string, 0, len(items))
	for k := range items {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "cost lines (%s; GETs of %d reading followers, one ranged GET per partition per object; metadata bytes × %.0f AZ crossings):\n",
		c.Sheet, c.Readers, c.MetadataCrossings)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, k := range names {
		fmt.Fprintf(tw, "  %s\t", k)
		for _, r := range rep.Results {
			fmt.Fprintf(tw, "%.2f\t", r.CostLines[k])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w, "memory and CPU are the whole process: the broker's remote-WAL node, the producing goroutines and the embedded kfake")
}

// WriteJSON writes the report.
func WriteJSON(w io.Writer, rep *Report) error { return benchreport.WriteJSON(w, rep) }

// WritePNG plots, against the partition count, PUTs/s, metadata KB/s,
// the follower's bootstrap time and the heap in use, one panel each.
func WritePNG(out io.Writer, rep *Report) error {
	panels := []struct {
		title, unit string
		get         func(Result) float64
	}{
		{"PUTs per second", "PUTs/s", func(r Result) float64 { return r.PutsPerS }},
		{"metadata published", "KB/s", func(r Result) float64 { return r.MetaBytesPerS / 1e3 }},
		{"follower metadata bootstrap", "ms", func(r Result) float64 { return r.BootstrapMs }},
		{"heap in use at the window's end", "MB", func(r Result) float64 { return r.HeapMB }},
	}
	const rows, cols = 2, 2
	width, height := 10*vg.Inch, 7*vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s (%.0f MB/s target)", pn.title, rep.Config.RateMBps)
		p.X.Label.Text = "leader partitions"
		p.Y.Label.Text = pn.unit
		p.Add(plotter.NewGrid())
		xy := make(plotter.XYs, len(rep.Results))
		for j, r := range rep.Results {
			xy[j].X, xy[j].Y = float64(r.Partitions), pn.get(r)
		}
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		c := benchreport.RemoteWALColor
		line.Color, points.Color, points.Shape = c, c, draw.CircleGlyph{}
		p.Add(line, points)
		p.Y.Min = 0
		plots[i/cols][i%cols] = p
	}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(out)
	return err
}

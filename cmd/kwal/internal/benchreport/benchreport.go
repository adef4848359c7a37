package benchreport

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// WriteJSON writes v as JSON indented by two spaces, one value a line.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WritePNG renders p at width × height as a PNG.
func WritePNG(out io.Writer, p *plot.Plot, width, height vg.Length) error {
	wt, err := p.WriterTo(width, height, "png")
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	_, err = wt.WriteTo(out)
	return err
}

// The colour of each replication mode in every chart, so that a reader
// comparing charts of different benches sees the same mode alike.
var (
	ClassicColor   color.Color = color.RGBA{R: 90, G: 90, B: 90, A: 255}
	RemoteWALColor color.Color = color.RGBA{R: 30, G: 110, B: 200, A: 255}
)

// Metric is one row of a table of results: its name, the fmt verb of its
// values and how a result gives its value.
type Metric[T any] struct {
	Name, Format string
	Get          func(T) float64
}

// Row is the Metric of name, format and get (a keyed literal without the
// keys, for tables of many rows).
func Row[T any](name, format string, get func(T) float64) Metric[T] {
	return Metric[T]{Name: name, Format: format, Get: get}
}

// WriteRows writes one tab-separated line per metric: its name, then its
// value in each result, each cell ended by a tab (for a tabwriter).
func WriteRows[T any](w io.Writer, results []T, metrics []Metric[T]) {
	for _, m := range metrics {
		fmt.Fprintf(w, "%s\t", m.Name)
		for _, r := range results {
			fmt.Fprintf(w, m.Format+"\t", m.Get(r))
		}
		fmt.Fprintln(w)
	}
}

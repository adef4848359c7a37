package benchreport

import (
	"bytes"
	"errors"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestWriteRows(t *testing.T) {
	type res struct{ n, mb float64 }
	var b bytes.Buffer
	WriteRows(&b, []res{{1, 2.25}, {30, 4}}, []Metric[res]{
		Row("partitions", "%.0f", func(r res) float64 { return r.n }),
		{Name: "MB/s", Format: "%.1f", Get: func(r res) float64 { return r.mb }},
	})
	if want := "partitions\t1\t30\t\nMB/s\t2.2\t4.0\t\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	WriteRows(&b, []res{{1, 2}}, nil)
	if b.Len() != 0 {
		t.Fatalf("no metrics wrote %q", b.String())
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, map[string]any{"a": []int{1}}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"a\": [\n    1\n  ]\n}\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	if err := WriteJSON(&b, func() {}); err == nil {
		t.Fatal("a func encoded without error")
	}
}

type failWriter struct{}

var errFull = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errFull }

func TestWritePNG(t *testing.T) {
	p := plot.New()
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p.Add(l)
	var b bytes.Buffer
	if err := WritePNG(&b, p, 2*vg.Inch, vg.Inch); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b.Bytes(), []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("not a PNG: % x", b.Bytes()[:min(8, b.Len())])
	}
	if err := WritePNG(failWriter{}, p, 2*vg.Inch, vg.Inch); !errors.Is(err, errFull) {
		t.Fatalf("a failed write gave %v", err)
	}
}

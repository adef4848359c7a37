package cost

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func setup(t *testing.T) (*Book, Model) {
	t.Helper()
	b, err := DefaultBook()
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, m
}

func sheet(t *testing.T, b *Book, name string) Sheet {
	t.Helper()
	s, err := b.Sheet(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func cents(v float64) int64 { return int64(math.Round(v * 100)) }

func TestKIPRowsToTheCent(t *testing.T) {
	b, m := setup(t)
	r, err := m.ReproduceKIP(KIPWorkload(), sheet(t, b, KIPStore), b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{ // design/row -> cents
		"baseline/transfer":   161280, // 112 GB/h x 720 h x 2 x $0.01
		"remote WAL/transfer": 64800,  // 100/s x 3600 x 720 x $0.0025/1000
		"remote WAL/total":    142400,
	}
	for _, row := range r.Rows {
		if c, ok := want[row.Design+"/"+row.Row]; ok {
			if got := cents(row.ModelUSD); got != c {
				t.Errorf("%s %s: got $%.2f, want $%.2f", row.Design, row.Row, row.ModelUSD, float64(c)/100)
			}
			delete(want, row.Design+"/"+row.Row)
		}
		// The fitted storage/instance rows stay within a dollar of the KIP.
		if math.Abs(row.ResidualUSD) >= 1 {
			t.Errorf("%s %s: residual $%.2f", row.Design, row.Row, row.ResidualUSD)
		}
	}
	if len(want) != 0 {
		t.Errorf("rows missing: %v", want)
	}
	if math.Round(r.ReductionPct) != KIPReductionPct {
		t.Errorf("reduction %.2f%%, want ~%v%%", r.ReductionPct, KIPReductionPct)
	}
	// The KIP counts PUTs only: GETs and storage must show up as left out.
	left := map[string]bool{}
	for _, l := range r.Comparison.RemoteWALOmitted {
		left[l.Item] = true
	}
	for _, item := range []string{ItemGet, ItemStorage} {
		if !left[item] {
			t.Errorf("%q not reported as left out by the KIP: %v", item, left)
		}
	}
}

func TestPerGBThreshold(t *testing.T) {
	b, m := setup(t)
	launch, current := sheet(t, b, "s3express-2023"), sheet(t, b, "s3express-2025")
	const kib = 1024
	const th = 512 * kib
	month := 720 * time.Hour
	gb := float64(1 << 30)
	tests := []struct {
		name  string
		store Sheet
		u     Usage
		item  string
		want  float64 // USD
	}{
		{"put below threshold", launch, Usage{Duration: month, Puts: 1000, BytesPut: 1000 * 300 * kib,
			PutSizes: []SizeCount{{300 * kib, 1000}}}, ItemUpload, 0},
		{"put at threshold", launch, Usage{Duration: month, Puts: 1, BytesPut: th,
			PutSizes: []SizeCount{{th, 1}}}, ItemUpload, 0},
		{"put 1 GiB above threshold", launch, Usage{Duration: month, Puts: 1, BytesPut: th + 1<<30,
			PutSizes: []SizeCount{{th + 1<<30, 1}}}, ItemUpload, 0.008},
		{"mixed sizes: only the excess", launch, Usage{Duration: month, Puts: 3, BytesPut: 100 + 2*(th+1<<29),
			PutSizes: []SizeCount{{100, 1}, {th + 1<<29, 2}}}, ItemUpload, 0.008},
		{"average-size fallback", launch, Usage{Duration: month, Puts: 2, BytesPut: 2 * (th + 1<<29)}, ItemUpload, 0.008},
		{"get above threshold", launch, Usage{Duration: month, Gets: 4, BytesGot: 4 * (th + 1<<28),
			GetSizes: []SizeCount{{th + 1<<28, 4}}}, ItemRetrieval, 0.0015},
		{"current prices charge every byte", current, Usage{Duration: month, Puts: 1000, BytesPut: 1000 * 300 * kib,
			PutSizes: []SizeCount{{300 * kib, 1000}}}, ItemUpload, 1000 * 300 * kib / gb * 0.0032},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bd, err := m.MonthlyCost(tt.u, tt.store)
			if err != nil {
				t.Fatal(err)
			}
			l, ok := bd.Line(tt.item)
			if !ok {
				t.Fatalf("no line %q", tt.item)
			}
			if math.Abs(l.USD-tt.want) > 1e-12 {
				t.Errorf("%s = $%.10f, want $%.10f", tt.item, l.USD, tt.want)
			}
		})
	}
}

func TestMonthlyCostExtrapolates(t *testing.T) {
	b, m := setup(t)
	s := sheet(t, b, "s3express-2023")
	// 100 PUT/s for one hour on two brokers: 50/s per broker for 720 h.
	u := Usage{Duration: time.Hour, Brokers: 2, Puts: 360000, CrossAZBytes: 2 << 30, StoredBytesAvg: 4 << 30}
	bd, err := m.MonthlyCost(u, s)
	if err != nil {
		t.Fatal(err)
	}
	put, _ := bd.Line(ItemPut)
	if got := cents(put.USD); got != 32400 {
		t.Errorf("PUTs $%.2f, want $324.00", put.USD)
	}
	xaz, _ := bd.Line(ItemCrossAZ + " (measured)")
	if got := cents(xaz.USD); got != 1440 { // 1 GB/h per broker x 720 x $0.02
		t.Errorf("cross-AZ $%.2f, want $14.40", xaz.USD)
	}
	st, _ := bd.Line(ItemStorage)
	if got := cents(st.USD); got != 32 { // 2 GB-month per broker x $0.16
		t.Errorf("storage $%.2f, want $0.32", st.USD)
	}
	for _, l := range bd.Lines {
		if l.Source == "" {
			t.Errorf("line %q has no source", l.Item)
		}
	}
}

func TestUsageInvalid(t *testing.T) {
	b, m := setup(t)
	s := sheet(t, b, "s3express-2025")
	for name, u := range map[string]Usage{
		"zero duration":   {},
		"negative puts":   {Duration: time.Hour, Puts: -1},
		"sizes mismatch":  {Duration: time.Hour, Puts: 2, PutSizes: []SizeCount{{10, 1}}},
		"negative stored": {Duration: time.Hour, StoredBytesAvg: -1},
	} {
		if _, err := m.MonthlyCost(u, s); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
	if _, err := m.MonthlyCost(Usage{Duration: time.Hour}, sheet(t, b, "ebs-gp3")); !errors.Is(err, ErrInvalid) {
		t.Errorf("block sheet as store: err %v", err)
	}
}

func TestSheetErrors(t *testing.T) {
	good, err := defaultSheets.ReadFile("sheets/s3express-2025.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file, field string
		data              string
	}{
		{"malformed", "bad.json", "", `{"name": "x",`},
		{"syntax", "bad.json", "", `{"name": "x" "kind": 1}`},
		{"unknown top field", "u.json", "colour", strings.Replace(string(good), `"region"`, `"colour": 1, "region"`, 1)},
		{"unknown price field", "u.json", "object_store.put_per_1001",
			strings.Replace(string(good), `"put_per_1000"`, `"put_per_1001"`, 1)},
		{"negative price", "n.json", "object_store.get_per_1000",
			strings.Replace(string(good), `"usd": 0.00003,`, `"usd": -0.00003,`, 1)},
		{"wrong type", "w.json", "object_store.put_per_1000.usd",
			strings.Replace(string(good), `"usd": 0.00113,`, `"usd": "cheap",`, 1)},
		{"missing source", "s.json", "object_store.storage_per_gb_month.source",
			strings.Replace(string(good), `"source": "https://aws.amazon.com/s3/faqs/ (Example 1: 10 GB-Month x $0.11)"`, `"source": ""`, 1)},
		{"unknown kind", "k.json", "kind", strings.Replace(string(good), `"kind": "object-store"`, `"kind": "tape"`, 1)},
		{"missing section", "m.json", "network", strings.Replace(string(good), `"kind": "object-store"`, `"kind": "network"`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSheet(tt.file, []byte(tt.data))
			var se *SheetError
			if !errors.As(err, &se) || !errors.Is(err, ErrSheet) {
				t.Fatalf("err %v, want *SheetError", err)
			}
			if se.File != tt.file || se.Field != tt.field {
				t.Errorf("error names file %q field %q, want %q %q (%v)", se.File, se.Field, tt.file, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.file) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("message %q does not name file and field", err)
			}
		})
	}
}

func TestLoadDir(t *testing.T) {
	good, _ := defaultSheets.ReadFile("sheets/s3express-2025.json")
	dir := t.TempDir()
	mine := strings.Replace(string(good), `"name": "s3express-2025"`, `"name": "my-store"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "mine.json"), []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := setup(t)
	if err := b.LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Sheet("my-store"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Sheet("nope"); !errors.Is(err, ErrNoSheet) {
		t.Errorf("err %v, want ErrNoSheet", err)
	}
	// The same name again is an error naming both files.
	dup := filepath.Join(t.TempDir(), "dup.json")
	if err := os.WriteFile(dup, good, 0o644); err != nil {
		t.Fatal(err)
	}
	b2, _ := setup(t)
	err := b2.LoadDir(filepath.Dir(dup))
	if !errors.Is(err, ErrSheet) || !strings.Contains(err.Error(), "dup.json") || !strings.Contains(err.Error(), "embedded:sheets/s3express-2025.json") {
		t.Errorf("duplicate: %v", err)
	}
}

func TestBreakEvenMonotone(t *testing.T) {
	b, m := setup(t)
	w := KIPWorkload()
	for _, name := range []string{"s3express-2023", "s3express-2025", "s3-standard"} {
		s := sheet(t, b, name)
		// Longer upload intervals mean fewer PUTs: the break-even falls.
		prev := math.Inf(1)
		for _, ms := range []int{5, 10, 20, 50, 100, 200} {
			x := w
			x.UploadInterval = time.Duration(ms) * time.Millisecond
			be, err := m.BreakEvenMBps(x, FullCounting(), s, b)
			if err != nil {
				t.Fatal(err)
			}
			if be <= 0 || be > prev {
				t.Errorf("%s %d ms: break-even %.3f MB/s, previous %.3f", name, ms, be, prev)
			}
			prev = be
		}
		// Dearer PUTs raise it.
		prev = 0
		for _, k := range []float64{0.5, 1, 2, 4} {
			d := s
			o := *s.ObjectStore
			o.PutPer1000.USD *= k
			d.ObjectStore = &o
			be, err := m.BreakEvenMBps(w, FullCounting(), d, b)
			if err != nil {
				t.Fatal(err)
			}
			if be < prev {
				t.Errorf("%s PUT x%g: break-even %.3f < %.3f", name, k, be, prev)
			}
			prev = be
		}
		// At the break-even the two designs cost the same.
		be, _ := m.BreakEvenMBps(w, FullCounting(), s, b)
		cmp, err := m.Compare(w.WithInboundMBps(be, m.BytesPerGB), FullCounting(), s, b)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(cmp.RemoteWAL.TotalUSD-cmp.Baseline.TotalUSD) > 0.01 {
			t.Errorf("%s at %.3f MB/s: remote $%.2f, baseline $%.2f", name, be, cmp.RemoteWAL.TotalUSD, cmp.Baseline.TotalUSD)
		}
	}
	// With fleet-wide follower spread and many partitions the remote WAL
	// costs more, so its break-even rises.
	x := w
	x.PartitionsPerBroker, x.FollowerSpread = 100, 89
	s := sheet(t, b, "s3express-2025")
	paired, _ := m.BreakEvenMBps(w, FullCounting(), s, b)
	spread, _ := m.BreakEvenMBps(x, FullCounting(), s, b)
	if !(spread > paired) {
		t.Errorf("spread break-even %.2f not above paired %.2f", spread, paired)
	}
}

func TestGetsPerObject(t *testing.T) {
	tests := []struct {
		p, s, f int
		layout  SliceLayout
		want    float64
	}{
		{1, 1, 1, LayoutGrouped, 1},
		{1000, 1, 1, LayoutGrouped, 1},
		{1, 89, 1, LayoutGrouped, 1},
		{2, 2, 1, LayoutGrouped, 1.5},
		{2, 2, 1, LayoutRandom, 1.5},
		{3, 2, 1, LayoutRandom, 2},
		{10, 1, 2, LayoutRandom, 2},
		{5, 1, 0, LayoutGrouped, 0},
	}
	for _, tt := range tests {
		w := Workload{PartitionsPerBroker: tt.p, FollowerSpread: tt.s, ReadingFollowers: tt.f, Layout: tt.layout}
		if got := w.GetsPerObject(); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%+v: %v, want %v", tt, got, tt.want)
		}
	}
}

func TestReportJSONSchema(t *testing.T) {
	b, m := setup(t)
	r, err := m.BuildReport(KIPWorkload(), b)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != ReportSchema {
		t.Errorf("schema %v", doc["schema"])
	}
	for _, k := range []string{"model", "workload", "params", "sheets", "kip", "full", "sweeps", "break_evens", "curves", "sources"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	kip := doc["kip"].(map[string]any)
	rows := kip["rows"].([]any)
	if len(rows) != 6 {
		t.Fatalf("kip rows %d", len(rows))
	}
	for _, k := range []string{"row", "design", "kip_usd", "model_usd", "residual_usd", "derivation"} {
		if _, ok := rows[0].(map[string]any)[k]; !ok {
			t.Errorf("kip row lacks %q", k)
		}
	}
	full := doc["full"].([]any)
	if len(full) != 3 {
		t.Errorf("full comparisons %d, want one per object-store sheet", len(full))
	}
	for _, f := range full {
		for _, design := range []string{"baseline", "remote_wal"} {
			bd := f.(map[string]any)[design].(map[string]any)
			for _, l := range bd["lines"].([]any) {
				line := l.(map[string]any)
				for _, k := range []string{"item", "group", "quantity", "unit", "unit_usd", "usd", "source"} {
					if _, ok := line[k]; !ok {
						t.Errorf("line lacks %q: %v", k, line)
					}
				}
				if line["source"] == "" {
					t.Errorf("line without source: %v", line)
				}
			}
		}
	}
	be := doc["break_evens"].([]any)[0].(map[string]any)
	for _, k := range []string{"store", "counting", "upload_interval", "mbps"} {
		if _, ok := be[k]; !ok {
			t.Errorf("break-even lacks %q", k)
		}
	}
	// Every figure in the sheets has a source and a date.
	for _, s := range r.Sources {
		if s.Source == "" || s.Date == "" {
			t.Errorf("figure %s %s lacks source or date", s.Sheet, s.Field)
		}
	}

	var png bytes.Buffer
	if err := WriteBreakEvenPNG(&png, r); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("chart is not a PNG")
	}
	var text bytes.Buffer
	WriteSummary(&text, r)
	WriteKIP(&text, r)
	WriteSensitivity(&text, r)
	for _, want := range []string{"1612.80", "648.00", "break-even", "s3express-2025"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks %q", want)
		}
	}
}

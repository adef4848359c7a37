package cost

import (
	"fmt"
	"math"
	"time"
)

// Sweep is one sensitivity table: a parameter varied, the rest held at
// the workload's values, everything counted.
type Sweep struct {
	Name    string     `json:"name"`
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    []SweepRow `json:"rows"`
	Notes   []string   `json:"notes,omitempty"`
}

// SweepRow is one setting of the parameter; Values align with Columns.
type SweepRow struct {
	Label  string    `json:"label"`
	Values []float64 `json:"values"`
}

// storeColumns: per store sheet, the remote-WAL total and the saving.
func storeColumns(stores []Sheet) []string {
	var c []string
	for _, s := range stores {
		c = append(c, s.Name+" $", s.Name+" saving %")
	}
	return c
}

func (m Model) storeValues(w Workload, stores []Sheet, book *Book) (baseline float64, vals []float64, err error) {
	for _, s := range stores {
		cmp, err := m.Compare(w, FullCounting(), s, book)
		if err != nil {
			return 0, nil, err
		}
		baseline = cmp.Baseline.TotalUSD
		vals = append(vals, cmp.RemoteWAL.TotalUSD, cmp.SavingPct)
	}
	return baseline, vals, nil
}

// Sensitivity returns the sweeps over upload interval, object size,
// partitions per broker and follower spread, replication factor and
// reading followers.
func (m Model) Sensitivity(w Workload, stores []Sheet, book *Book) ([]Sweep, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	var out []Sweep
	row := func(sw *Sweep, label string, w Workload, lead ...float64) error {
		base, vals, err := m.storeValues(w, stores, book)
		if err != nil {
			return err
		}
		sw.Rows = append(sw.Rows, SweepRow{Label: label, Values: append(append(lead, base), vals...)})
		return nil
	}

	iv := Sweep{Name: "upload-interval", Title: "Upload interval (object size follows: inbound x interval)",
		Columns: append([]string{"object KiB", "PUT/s", "baseline $"}, storeColumns(stores)...)}
	for _, ms := range []float64{5, 10, 20, 50, 100, 200, 500, 1000} {
		x := w
		x.UploadInterval = time.Duration(ms * float64(time.Millisecond))
		perSec, obj := x.Objects(m.BytesPerGB)
		if err := row(&iv, fmt.Sprintf("%g ms", ms), x, obj/1024, perSec); err != nil {
			return nil, err
		}
	}
	iv.Notes = []string{"Launch prices start charging per GB above 512 KiB objects (at about 15 ms here); current prices charge every byte."}
	out = append(out, iv)

	osz := Sweep{Name: "object-size", Title: "Object size (upload interval follows: size / inbound)",
		Columns: append([]string{"interval ms", "PUT/s", "baseline $"}, storeColumns(stores)...)}
	inBps := w.InboundGBPerHour * m.BytesPerGB / 3600
	for _, kib := range []float64{64, 128, 256, 512, 1024, 2048, 4096, 16384} {
		x := w
		x.UploadInterval = time.Duration(kib * 1024 / inBps * float64(time.Second))
		perSec, _ := x.Objects(m.BytesPerGB)
		if err := row(&osz, fmt.Sprintf("%g KiB", kib), x, float64(x.UploadInterval)/float64(time.Millisecond), perSec); err != nil {
			return nil, err
		}
	}
	out = append(out, osz)

	pp := Sweep{Name: "partitions", Title: "Partitions per broker (slices per object) x follower spread x slice layout",
		Columns: append([]string{"GETs/object", "baseline $"}, storeColumns(stores)...)}
	spreadAll := max(w.Brokers-1, 1)
	for _, sp := range []int{1, spreadAll} {
		for _, layout := range []SliceLayout{LayoutGrouped, LayoutRandom} {
			if sp == 1 && layout == LayoutRandom {
				continue // same as grouped: one follower broker
			}
			for _, p := range []int{1, 10, 100, 1000} {
				x := w
				x.PartitionsPerBroker, x.FollowerSpread, x.Layout = p, sp, layout
				if err := row(&pp, fmt.Sprintf("P=%d spread=%d %s", p, sp, layout), x, x.GetsPerObject()); err != nil {
					return nil, err
				}
			}
		}
	}
	pp.Notes = []string{
		"spread=1: every broker's followers sit on one other broker (the KIP's one leader, one reader).",
		fmt.Sprintf("spread=%d: Kafka's default assignment spreads followers over the whole fleet, so one object has slices for many follower brokers, each needing its own GET.", spreadAll),
		"Metadata events grow by one entry per slice.",
	}
	out = append(out, pp)

	rf := Sweep{Name: "replication", Title: "Baseline replication factor and remote-WAL reading followers",
		Columns: append([]string{"baseline RF", "reading followers", "baseline $"}, storeColumns(stores)...)}
	for _, r := range []int{2, 3} {
		for _, f := range []int{0, 1, 2} {
			x := w
			x.ReplicationFactor, x.ReadingFollowers = r, f
			if err := row(&rf, fmt.Sprintf("RF=%d vs %d reader(s)", r, f), x, float64(r), float64(f)); err != nil {
				return nil, err
			}
		}
	}
	rf.Notes = []string{"0 readers: the object store is the only other copy (the KIP's future RF=1 mode); consumers outside the leader's AZ then all cross AZs."}
	out = append(out, rf)
	return out, nil
}

// BreakEven is the inbound rate per broker below which the remote WAL
// costs more than the baseline.
type BreakEven struct {
	Store          string  `json:"store"`
	Counting       string  `json:"counting"`
	UploadInterval string  `json:"upload_interval"`
	MBps           float64 `json:"mbps"` // -1: the remote WAL never pays within 10 GB/s
}

// BreakEvenMBps finds the inbound MB/s per broker where the remote WAL's
// total equals the baseline's, by bisection. It returns 0 if the remote
// WAL is cheaper at any rate and -1 if it never is up to 10,000 MB/s.
func (m Model) BreakEvenMBps(w Workload, c Counting, store Sheet, book *Book) (float64, error) {
	diff := func(mbps float64) (float64, error) {
		cmp, err := m.Compare(w.WithInboundMBps(mbps, m.bytesPerGB()), c, store, book)
		if err != nil {
			return 0, err
		}
		return cmp.RemoteWAL.TotalUSD - cmp.Baseline.TotalUSD, nil
	}
	lo, hi := 1e-6, 1e4
	dlo, err := diff(lo)
	if err != nil {
		return 0, err
	}
	if dlo <= 0 {
		return 0, nil
	}
	dhi, err := diff(hi)
	if err != nil {
		return 0, err
	}
	if dhi > 0 {
		return -1, nil
	}
	for i := 0; i < 80 && hi-lo > 1e-9; i++ {
		mid := (lo + hi) / 2
		d, err := diff(mid)
		if err != nil {
			return 0, err
		}
		if d > 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2, nil
}

func (m Model) bytesPerGB() float64 {
	if m.BytesPerGB == 0 {
		return 1 << 30
	}
	return m.BytesPerGB
}

// BreakEvens tabulates BreakEvenMBps per store, counting and interval.
func (m Model) BreakEvens(w Workload, stores []Sheet, intervals []time.Duration, book *Book) ([]BreakEven, error) {
	var out []BreakEven
	for _, c := range []Counting{FullCounting(), KIPCounting()} {
		for _, s := range stores {
			for _, iv := range intervals {
				x := w
				x.UploadInterval = iv
				v, err := m.BreakEvenMBps(x, c, s, book)
				if err != nil {
					return nil, err
				}
				out = append(out, BreakEven{Store: s.Name, Counting: c.Name, UploadInterval: iv.String(), MBps: v})
			}
		}
	}
	return out, nil
}

// Curve is monthly cost against inbound MB/s, for the chart.
type Curve struct {
	Label string       `json:"label"`
	XY    [][2]float64 `json:"xy"` // (MB/s, USD per broker-month)
}

// Curves returns the baseline and remote-WAL totals (everything counted,
// instance excluded as it is equal in both) over 0..maxMBps.
func (m Model) Curves(w Workload, stores []Sheet, maxMBps float64, steps int, book *Book) ([]Curve, error) {
	if steps < 2 || !(maxMBps > 0) || math.IsInf(maxMBps, 0) || len(stores) == 0 {
		return nil, invalid("curves: steps %d, max %v, %d stores", steps, maxMBps, len(stores))
	}
	curves := make([]Curve, 2+len(stores))
	curves[0].Label = "baseline (everything counted)"
	curves[1].Label = "baseline (as the KIP counts)"
	for i, s := range stores {
		curves[2+i].Label = "remote WAL on " + s.Name
	}
	noInst := func(b Breakdown) float64 { t := b.TotalUSD; l, _ := b.Line(ItemInstance); return t - l.USD }
	for k := 0; k <= steps; k++ {
		x := maxMBps * float64(k) / float64(steps)
		if x == 0 {
			x = 1e-6
		}
		xw := w.WithInboundMBps(x, m.bytesPerGB())
		for i, s := range stores {
			full, err := m.Compare(xw, FullCounting(), s, book)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				kip, err := m.Compare(xw, KIPCounting(), s, book)
				if err != nil {
					return nil, err
				}
				curves[0].XY = append(curves[0].XY, [2]float64{x, noInst(full.Baseline)})
				curves[1].XY = append(curves[1].XY, [2]float64{x, noInst(kip.Baseline)})
			}
			curves[2+i].XY = append(curves[2+i].XY, [2]float64{x, noInst(full.RemoteWAL)})
		}
	}
	return curves, nil
}

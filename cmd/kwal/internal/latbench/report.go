package latbench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kwal/kwal/cost"
	"github.com/kwal/kwal/objstore/latency"

	"github.com/kwal/kwal/cmd/kwal/internal/benchreport"
)

// Env is the machine a report ran on.
type Env struct {
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	Started    string `json:"started"`
}

// ReportConfig is what a report states about how it was made.
type ReportConfig struct {
	Quick        bool          `json:"quick"`
	Reps         int           `json:"reps"`
	LatencyModel latency.Model `json:"latency_model"`
	// Store names the object store under the model; Metadata the Kafka
	// of the metadata topic.
	Store             string        `json:"store"`
	Metadata          string        `json:"metadata"`
	CrossAZOneWay     time.Duration `json:"cross_az_one_way_ns"`
	ReplicationFactor int16         `json:"replication_factor"`
	Racks             []string      `json:"racks"`
	Headline          Setting       `json:"headline_setting"`
	E2ERecords        int           `json:"e2e_records"`
	E2ERate           int           `json:"e2e_rate"`
	PerfRecords       int           `json:"perf_records"`
	// ProducePartitions: the partitions of the produce workloads' topics.
	ProducePartitions int           `json:"produce_partitions"`
	PerfRecordBytes   int           `json:"perf_record_bytes"`
	StreamRate        int           `json:"stream_rate"`
	StreamDuration    time.Duration `json:"stream_duration_ns"`
	// Prices: the object-store and network sheets and the model's
	// conventions.
	StoreSheet              string  `json:"store_sheet"`
	StoreSheetTitle         string  `json:"store_sheet_title"`
	NetworkSheet            string  `json:"network_sheet"`
	HoursPerMonth           float64 `json:"hours_per_month"`
	CrossAZDirectionsBilled int     `json:"cross_az_directions_billed"`
	Brokers                 int     `json:"brokers_priced"`
	// Producers are each workload's producer properties.
	Producers map[Workload][]ProducerSetting `json:"producers"`
}

func reportConfig(c Config, lat latency.Model, sheet cost.Sheet, m cost.Model) ReportConfig {
	return ReportConfig{
		Quick: c.Quick, Reps: c.Reps, LatencyModel: lat, CrossAZOneWay: c.CrossAZ,
		Store: storeName(c.StorageURL), Metadata: metadataName(c.MetadataBootstrap),
		ReplicationFactor: c.ReplicationFactor, Racks: brokerRacks(), Headline: c.Headline,
		E2ERecords: c.E2ERecords, E2ERate: c.E2ERate, PerfRecords: c.PerfRecords, PerfRecordBytes: c.PerfRecordBytes,
		ProducePartitions: c.ProducePartitions, StreamRate: c.StreamRate, StreamDuration: c.StreamDuration,
		StoreSheet: sheet.Name, StoreSheetTitle: sheet.Title, NetworkSheet: m.Network.Name,
		HoursPerMonth: m.HoursPerMonth, CrossAZDirectionsBilled: m.CrossAZDirectionsBilled, Brokers: brokersForCost,
		Producers: producerSettingsByWorkload(),
	}
}

// partitionsNote is what the workload table adds to the produce
// workloads' line when their topics have more than one partition.
func (c ReportConfig) partitionsNote() string {
	if c.ProducePartitions <= 1 {
		return ""
	}
	return fmt.Sprintf(", %d partitions (the KIP's runs: 1)", c.ProducePartitions)
}

// producerWorkloads are the workloads with a producer, in report order.
func producerWorkloads() []Workload { return []Workload{E2E, Produce, E2EAll, ProduceAll, Stream} }

func producerSettingsByWorkload() map[Workload][]ProducerSetting {
	out := map[Workload][]ProducerSetting{}
	for _, w := range producerWorkloads() {
		out[w] = producerConfigFor(w).settings()
	}
	return out
}

// writeProducerTable renders the producers' properties, one column per
// workload, each value marked with where it comes from.
func writeProducerTable(b *strings.Builder, ps map[Workload][]ProducerSetting) {
	ws := producerWorkloads()
	mark := map[string]string{SourceKIP: "K", SourceJava: "J", SourceSweep: "S"}
	fmt.Fprintf(b, "Producer properties (franz-go set to behave as the Java client; K: %s, J: %s, S: %s):\n\n| property |", SourceKIP, SourceJava, SourceSweep)
	for _, w := range ws {
		fmt.Fprintf(b, " `%s` |", w)
	}
	b.WriteString("\n|---|")
	for range ws {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for i, s := range ps[ws[0]] {
		fmt.Fprintf(b, "| %s |", s.Key)
		for _, w := range ws {
			if i < len(ps[w]) {
				fmt.Fprintf(b, " %s (%s) |", ps[w][i].Value, mark[ps[w][i].Source])
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// LinkFigures compare the configured cross-rack delay with what the
// network model applied in one phase.
type LinkFigures struct {
	Phase              int           `json:"phase"`
	ConfiguredOneWay   time.Duration `json:"configured_one_way_ns"`
	MeasuredMeanOneWay time.Duration `json:"measured_mean_one_way_ns"`
	// DelayedWrites are the dialing side's writes (requests), DelayedReads
	// the chunks of replies it read back; the mean is over both.
	DelayedWrites int64 `json:"delayed_writes"`
	DelayedReads  int64 `json:"delayed_reads"`
}

// StoreMemory is what the in-memory store's arena (mem.WithArena) held
// at the end of a phase: the bodies that overflowed it were copied into
// fresh heap memory, whose page faults the run then paid.
type StoreMemory struct {
	Phase           int   `json:"phase"`
	ArenaBytes      int64 `json:"arena_bytes"`
	UsedBytes       int64 `json:"used_bytes"`
	HugePageBytes   int64 `json:"huge_page_bytes"`
	OverflowBytes   int64 `json:"overflow_bytes"`
	OverflowObjects int64 `json:"overflow_objects"`
}

// LedgerFigures are one run's counts from the brokers' ledgers, summed
// over the brokers.
type LedgerFigures struct {
	Puts          int64 `json:"puts"`
	Gets          int64 `json:"gets"`
	OtherRequests int64 `json:"other_requests"`
	BytesPut      int64 `json:"bytes_put"`
	BytesGot      int64 `json:"bytes_got"`
	CrossAZBytes  int64 `json:"cross_az_bytes"`
	// CrossAZByComponent splits CrossAZBytes by what sent them
	// (replica-fetch, consume, produce, fallback).
	CrossAZByComponent map[string]int64 `json:"cross_az_by_component"`
	PutsPerSec         float64          `json:"puts_per_sec"`
	GetsPerSec         float64          `json:"gets_per_sec"`
}

// RunResult is one measured run.
type RunResult struct {
	Phase    int     `json:"phase"`
	Headline bool    `json:"headline"`
	Setting  Setting `json:"setting"`
	Step
	Topic   string `json:"topic"`
	Records int    `json:"records"`
	Bytes   int64  `json:"bytes"`
	// Elapsed is the throughput window: first send to last ack (Produce),
	// first send to last record consumed (E2E, Stream), client start to
	// last record (Consume).
	Elapsed time.Duration `json:"elapsed_ns"`
	// Window is the ledger's window: from the start to when every
	// follower had the leader's log end.
	Window time.Duration `json:"window_ns"`
	// CPU is the process's CPU time (user + system) over Window: every
	// broker, the store, the metadata Kafka and the clients.
	CPU           time.Duration   `json:"cpu_ns"`
	RecordsPerSec float64         `json:"records_per_sec"`
	MBPerSec      float64         `json:"mb_per_sec"`
	Latency       Summary         `json:"latency"`
	Samples       []time.Duration `json:"-"`
	Ledger        LedgerFigures   `json:"ledger"`
	// CostUSD is the run's ledger priced per broker-month; CostLines its
	// non-zero line items.
	CostUSD    float64            `json:"cost_usd_per_broker_month"`
	CostLines  map[string]float64 `json:"cost_lines"`
	Duplicates int64              `json:"duplicates"`
	OutOfOrder int64              `json:"out_of_order"`
	// Stages splits the end-to-end latency of E2E, E2EAll and Stream
	// records at the leader's log, the follower's log and the follower's
	// high watermark (E2EStages).
	Stages map[string]Summary `json:"stages,omitempty"`
	// StageRecords is how many consumed records the tracer marked at all
	// three boundaries (the stages leave out those whose marks are out of
	// order: a watcher woken late).
	StageRecords int `json:"stage_records,omitempty"`
	// StorePut and StoreGet are the object store's PUTs and GETs during
	// the run as the brokers saw them (latency model and backend).
	StorePut Summary `json:"store_put"`
	StoreGet Summary `json:"store_get"`
	// Wire is the producer's Produce requests on the wire (Produce and
	// ProduceAll runs).
	Wire WireFigures `json:"wire"`
	// Path is each PathStages stage during the run, from the brokers'
	// latency histograms, by stage name; stages with no observation are
	// left out.
	Path map[string]StageFigures `json:"path_stages,omitempty"`
}

// Row is the medians over the repetitions of one (phase, workload, mode).
type Row struct {
	Phase         int           `json:"phase"`
	Headline      bool          `json:"headline"`
	Setting       Setting       `json:"setting"`
	Workload      Workload      `json:"workload"`
	Mode          string        `json:"mode"`
	Reps          int           `json:"reps"`
	P50           time.Duration `json:"p50_ns"`
	P99           time.Duration `json:"p99_ns"`
	P999          time.Duration `json:"p999_ns"`
	RecordsPerSec float64       `json:"records_per_sec"`
	MBPerSec      float64       `json:"mb_per_sec"`
	PutsPerSec    float64       `json:"puts_per_sec"`
	GetsPerSec    float64       `json:"gets_per_sec"`
	BytesPut      float64       `json:"bytes_put"`
	BytesGot      float64       `json:"bytes_got"`
	CrossAZBytes  float64       `json:"cross_az_bytes"`
	// AvgObjectBytes is BytesPut/Puts (median over runs with PUTs).
	AvgObjectBytes float64            `json:"avg_object_bytes"`
	CostUSD        float64            `json:"cost_usd_per_broker_month"`
	CostLines      map[string]float64 `json:"cost_lines"`
	Duplicates     int64              `json:"duplicates"`
	OutOfOrder     int64              `json:"out_of_order"`
	// StageP50 and StageP99: medians over the runs of each stage's p50
	// and p99 (RunResult.Stages), for the end-to-end workloads.
	StageP50 map[string]time.Duration `json:"stage_p50_ns,omitempty"`
	StageP99 map[string]time.Duration `json:"stage_p99_ns,omitempty"`
	// PutP50 ... GetP99: medians over the runs of the store's PUT and GET
	// percentiles (zero without requests).
	PutP50 time.Duration `json:"put_p50_ns"`
	PutP99 time.Duration `json:"put_p99_ns"`
	GetP50 time.Duration `json:"get_p50_ns"`
	GetP99 time.Duration `json:"get_p99_ns"`
	// WireRTTMean and WireRTTP50: medians over the runs of each run's
	// mean and p50 Produce round trip on the wire; WireRequestBytes the
	// median of each run's mean request size (zero without requests).
	WireRTTMean      time.Duration `json:"wire_rtt_mean_ns"`
	WireRTTP50       time.Duration `json:"wire_rtt_p50_ns"`
	WireRequestBytes float64       `json:"wire_request_bytes"`
	// WireConnections: the median over the runs of the brokers the
	// producer sent Produce requests to (WireFigures.Connections).
	WireConnections int `json:"wire_connections"`
	// CPUMsPerMB is the median of each run's CPU / Bytes (ms per 10^6 B).
	CPUMsPerMB float64 `json:"cpu_ms_per_mb"`
	// PathP50 is, per PathStages stage, the median over the runs of each
	// run's p50 (RunResult.Path), over the runs that observed it.
	PathP50 map[string]time.Duration `json:"path_p50_ns,omitempty"`
}

// Report is everything a run measured.
type Report struct {
	Env    Env           `json:"env"`
	Config ReportConfig  `json:"config"`
	Phases []Phase       `json:"phases"`
	Link   []LinkFigures `json:"link"`
	// StoreMemory is the in-memory store's arena per phase (the default
	// store only).
	StoreMemory []StoreMemory `json:"store_memory,omitempty"`
	Runs        []RunResult   `json:"runs"`
	Rows        []Row         `json:"rows"`
	// Target is issue 14's target 1 from the headline rows (TargetOf),
	// nil without them.
	Target *Target `json:"target_e2e_acks1,omitempty"`
	// InFlight is the produce workloads' in-flight bound (InFlightOf)
	// from the headline rows.
	InFlight []InFlight `json:"in_flight,omitempty"`
	// Parity is issue 14's target 2 (ParityOf) from the headline rows
	// and runs.
	Parity  []Parity      `json:"parity,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Aggregate computes Rows from Runs: medians over repetitions.
func (r *Report) Aggregate() {
	type key struct {
		phase int
		w     Workload
		mode  string
	}
	groups := map[key][]RunResult{}
	var order []key
	for _, run := range r.Runs {
		k := key{run.Phase, run.Workload, run.Mode}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], run)
	}
	r.Rows = r.Rows[:0]
	for _, k := range order {
		runs := groups[k]
		med := func(f func(RunResult) float64) float64 {
			xs := make([]float64, 0, len(runs))
			for _, run := range runs {
				xs = append(xs, f(run))
			}
			return Median(xs)
		}
		medD := func(f func(RunResult) time.Duration) time.Duration {
			ds := make([]time.Duration, 0, len(runs))
			for _, run := range runs {
				ds = append(ds, f(run))
			}
			return MedianDuration(ds)
		}
		row := Row{Phase: k.phase, Headline: runs[0].Headline, Setting: runs[0].Setting, Workload: k.w, Mode: k.mode, Reps: len(runs),
			P50:           medD(func(x RunResult) time.Duration { return x.Latency.P50 }),
			P99:           medD(func(x RunResult) time.Duration { return x.Latency.P99 }),
			P999:          medD(func(x RunResult) time.Duration { return x.Latency.P999 }),
			RecordsPerSec: med(func(x RunResult) float64 { return x.RecordsPerSec }),
			MBPerSec:      med(func(x RunResult) float64 { return x.MBPerSec }),
			PutsPerSec:    med(func(x RunResult) float64 { return x.Ledger.PutsPerSec }),
			GetsPerSec:    med(func(x RunResult) float64 { return x.Ledger.GetsPerSec }),
			BytesPut:      med(func(x RunResult) float64 { return float64(x.Ledger.BytesPut) }),
			BytesGot:      med(func(x RunResult) float64 { return float64(x.Ledger.BytesGot) }),
			CrossAZBytes:  med(func(x RunResult) float64 { return float64(x.Ledger.CrossAZBytes) }),
			CostUSD:       med(func(x RunResult) float64 { return x.CostUSD }),
			CostLines:     map[string]float64{},
		}
		var objs []float64
		items := map[string]bool{}
		for _, run := range runs {
			if run.Ledger.Puts > 0 {
				objs = append(objs, float64(run.Ledger.BytesPut)/float64(run.Ledger.Puts))
			}
			row.Duplicates += run.Duplicates
			row.OutOfOrder += run.OutOfOrder
			for it := range run.CostLines {
				items[it] = true
			}
		}
		row.AvgObjectBytes = Median(objs)
		for it := range items {
			row.CostLines[it] = med(func(x RunResult) float64 { return x.CostLines[it] })
		}
		for _, st := range E2EStages {
			var p50, p99 []time.Duration
			for _, run := range runs {
				if sm, ok := run.Stages[st]; ok && sm.N > 0 {
					p50, p99 = append(p50, sm.P50), append(p99, sm.P99)
				}
			}
			if len(p50) == 0 {
				continue
			}
			if row.StageP50 == nil {
				row.StageP50, row.StageP99 = map[string]time.Duration{}, map[string]time.Duration{}
			}
			row.StageP50[st], row.StageP99[st] = MedianDuration(p50), MedianDuration(p99)
		}
		storeMed := func(f func(RunResult) Summary, pick func(Summary) time.Duration) time.Duration {
			var ds []time.Duration
			for _, run := range runs {
				if sm := f(run); sm.N > 0 {
					ds = append(ds, pick(sm))
				}
			}
			return MedianDuration(ds)
		}
		put := func(x RunResult) Summary { return x.StorePut }
		get := func(x RunResult) Summary { return x.StoreGet }
		p50 := func(sm Summary) time.Duration { return sm.P50 }
		p99 := func(sm Summary) time.Duration { return sm.P99 }
		row.PutP50, row.PutP99 = storeMed(put, p50), storeMed(put, p99)
		row.GetP50, row.GetP99 = storeMed(get, p50), storeMed(get, p99)
		wire := func(x RunResult) Summary { return x.Wire.RTT }
		row.WireRTTMean = storeMed(wire, func(sm Summary) time.Duration { return sm.Mean })
		row.WireRTTP50 = storeMed(wire, p50)
		var reqBytes []float64
		for _, run := range runs {
			if run.Wire.Requests > 0 {
				reqBytes = append(reqBytes, float64(run.Wire.RequestBytes)/float64(run.Wire.Requests))
			}
		}
		row.WireRequestBytes = Median(reqBytes)
		var conns []float64
		for _, run := range runs {
			if run.Wire.Connections > 0 {
				conns = append(conns, float64(run.Wire.Connections))
			}
		}
		row.WireConnections = int(math.Round(Median(conns)))
		for _, st := range PathStages {
			var p50s []time.Duration
			for _, run := range runs {
				if f, ok := run.Path[st.String()]; ok {
					p50s = append(p50s, f.P50)
				}
			}
			if len(p50s) > 0 {
				if row.PathP50 == nil {
					row.PathP50 = map[string]time.Duration{}
				}
				row.PathP50[st.String()] = MedianDuration(p50s)
			}
		}
		var cpu []float64
		for _, run := range runs {
			if run.CPU > 0 && run.Bytes > 0 {
				cpu = append(cpu, float64(run.CPU.Milliseconds())/(float64(run.Bytes)/1e6))
			}
		}
		row.CPUMsPerMB = Median(cpu)
		r.Rows = append(r.Rows, row)
	}
	wi := func(w Workload) int {
		if i := slices.Index(HeadlineWorkloads(), w); i >= 0 {
			return i
		}
		return len(HeadlineWorkloads())
	}
	slices.SortStableFunc(r.Rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Phase, b.Phase), cmp.Compare(wi(a.Workload), wi(b.Workload)), cmp.Compare(a.Mode, b.Mode))
	})
	r.Target = nil
	if t, ok := TargetOf(r.rowsFor(true)); ok {
		r.Target = &t
	}
	r.InFlight = InFlightOf(r.rowsFor(true))
	r.Parity = ParityOf(r.rowsFor(true), r.Runs)
}

// rowsFor returns the rows of the headline phase or of the sweep.
func (r *Report) rowsFor(headline bool) []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Headline == headline {
			out = append(out, row)
		}
	}
	return out
}

// WriteJSON writes the report, every run included (without raw samples).
func (r *Report) WriteJSON(w io.Writer) error { return benchreport.WriteJSON(w, r) }

// File names under the output directory.
const (
	ReportMarkdown = "report.md"
	ReportJSON     = "report.json"
	TradeoffPNG    = "cost-latency.png"
)

// CDFFile is the PNG of a headline workload's latency CDFs.
func CDFFile(w Workload) string { return "cdf-" + string(w) + ".png" }

// WriteFiles writes report.md, report.json and the plots into dir.
func (r *Report) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	write := func(name string, fn func(io.Writer) error) error {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		written = append(written, path)
		return nil
	}
	for _, w := range r.plottedWorkloads() {
		if err := write(CDFFile(w), func(f io.Writer) error { return r.WriteCDFPNG(f, w) }); err != nil {
			return written, err
		}
	}
	if len(r.rowsFor(false)) > 0 {
		if err := write(TradeoffPNG, r.WriteTradeoffPNG); err != nil {
			return written, err
		}
	}
	if err := write(ReportJSON, r.WriteJSON); err != nil {
		return written, err
	}
	if err := write(ReportMarkdown, r.WriteMarkdown); err != nil {
		return written, err
	}
	return written, nil
}

// plottedWorkloads are the headline workloads with samples, in plan order.
func (r *Report) plottedWorkloads() []Workload {
	var out []Workload
	for _, w := range HeadlineWorkloads() {
		for _, run := range r.Runs {
			if run.Headline && run.Workload == w && len(run.Samples) > 0 {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

func fmtMs(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtMB(b float64) string { return fmt.Sprintf("%.2f", b/1e6) }

func fmtUSD(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// WriteMarkdown renders the report. Every figure in it comes from Runs
// (measured) or from the price sheets it names.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "# kwal bench latency\n\n")
	fmt.Fprintf(&b, "Classic replication against the remote WAL (KIP-1176), the workloads of the KIP's performance appendix, run side by side, alternating, in one process.\n\n")
	fmt.Fprintf(&b, "## How this was measured\n\n")
	fmt.Fprintf(&b, "- **Machine:** ran on %d cores (runtime.NumCPU() = %d, GOMAXPROCS %d), %s/%s, %s, started %s; the whole run took %s.",
		r.Env.NumCPU, r.Env.NumCPU, r.Env.GOMAXPROCS, r.Env.GOOS, r.Env.GOARCH, r.Env.GoVersion, r.Env.Started, r.Elapsed.Round(time.Second))
	if r.Env.NumCPU <= 4 {
		fmt.Fprintf(&b, " A small, noisy machine: brokers, object-store model and clients share these cores, so absolute figures are pessimistic; compare the modes with each other.")
	}
	fmt.Fprintf(&b, "\n- **Repetitions:** every figure in the tables is the median over %d repetitions of each (workload, mode); the modes alternate, and which goes first alternates per repetition. Percentiles within one repetition are nearest-rank.\n", c.Reps)
	if c.Quick {
		fmt.Fprintf(&b, "- **Quick run (`--quick`, CI sizes):** fewer records than the KIP's and a reduced sweep; see the sizes below.\n")
	}
	fmt.Fprintf(&b, "- **Cluster:** 3 in-process brokers in racks %s; each topic has 1 partition and replication factor %d, placed (and checked in the controller) with the leader in az1 and a follower in az2. The producer runs in az1 beside the leader; every consumer runs in az2 with client.rack=az2 and reads from the follower.",
		strings.Join(c.Racks, ", "), c.ReplicationFactor)
	if c.ProducePartitions > 1 {
		fmt.Fprintf(&b, " Except (`--partitions %d`) the topics of `%s`, `%s` and `%s`: %d partitions each, whose leaders the controller spreads over the three brokers, so the producer writes to several leaders, some in az2, and the consumer reads from a follower or a leader in az2 where there is one.",
			c.ProducePartitions, Produce, ProduceAll, Consume, c.ProducePartitions)
	}
	b.WriteString("\n")
	m := c.LatencyModel
	fmt.Fprintf(&b, "- **Object-store latency model:** `%s` (objstore/latency), first-byte latency log-normal: PUT median %v / p99 %v, GET median %v / p99 %v, %s per request. The store itself: %s. Metadata topic on %s.\n",
		m.Name, m.Put.Median, m.Put.P99, m.Get.Median, m.Get.P99, bandwidth(m.BandwidthBytesPerSec), c.Store, c.Metadata)
	fmt.Fprintf(&b, "- **Network model:** every byte sent from one rack to another (broker to broker and client to broker, requests and replies alike) is delivered %v later (a %v round trip); within a rack, no delay. %s\n",
		c.CrossAZOneWay, 2*c.CrossAZOneWay, r.linkSentence())
	fmt.Fprintf(&b, "- **Costs:** the ledger delta of each run (object-store requests and bytes from every broker's ledger, bytes that crossed racks), extrapolated by `cost.Model.MonthlyCost` to %v hours and divided by %d brokers, priced with the `%s` object-store sheet (%s) and the `%s` network sheet, cross-AZ bytes billed in %d direction(s). Storage at rest and instances are not included (the run does not measure how long objects are kept; instances are equal in both modes). Produce bytes are attributed to the producer's rack (az1), so they do not cross racks.\n",
		c.HoursPerMonth, c.Brokers, c.StoreSheet, c.StoreSheetTitle, c.NetworkSheet, c.CrossAZDirectionsBilled)
	fmt.Fprintf(&b, "- **Clients:** franz-go, one warm-up record per topic before the clock starts. Producers use the properties the KIP states for its runs and the Java client's defaults for the rest (table below). Consumers: fetch max wait %v, client.rack=%s, otherwise franz-go's defaults.\n\n", consumeMaxWait, consumerRack)
	if len(c.Producers) > 0 {
		writeProducerTable(&b, c.Producers)
	}

	fmt.Fprintf(&b, "## Workloads\n\n")
	fmt.Fprintf(&b, "| # | workload | what | latency column measures |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| 1 | `%s` | %d records, 1.2-2.0 KB (1.6 KB on average), paced at %d/s, 32 KiB max batch, linger 0, acks=1 | %s |\n", E2E, c.E2ERecords, c.E2ERate, E2E.LatencyName())
	fmt.Fprintf(&b, "| 2 | `%s` | producer perf test: %d records of %d B, acks=1, linger 20 ms, unthrottled%s | %s |\n", Produce, c.PerfRecords, c.PerfRecordBytes, c.partitionsNote(), Produce.LatencyName())
	fmt.Fprintf(&b, "| 3 | `%s` | consumer perf test: the %d records of workload 2, from the follower's rack, after the follower has them all | %s |\n", Consume, c.PerfRecords, Consume.LatencyName())
	fmt.Fprintf(&b, "| 4a | `%s` | workload 1 with acks=all | %s |\n", E2EAll, E2EAll.LatencyName())
	fmt.Fprintf(&b, "| 4b | `%s` | workload 2 with acks=all | %s |\n", ProduceAll, ProduceAll.LatencyName())
	fmt.Fprintf(&b, "| sweep | `%s` | %d records/s of %d B for %v, linger 5 ms, acks=1, consumer in the follower's rack | %s |\n\n", Stream, c.StreamRate, c.PerfRecordBytes, c.StreamDuration, Stream.LatencyName())

	head := r.rowsFor(true)
	if len(head) > 0 {
		fmt.Fprintf(&b, "## Headline (%v)\n\n", head[0].Setting)
		fmt.Fprintf(&b, "Latencies in ms; throughput per run; PUT/GET/cross-AZ bytes are per run, in MB (10^6 B); $ is per broker-month at the rates the run measured.\n\n")
		fmt.Fprintf(&b, "| workload | mode | p50 | p99 | p99.9 | records/s | MB/s | PUTs/s | GETs/s | MB PUT | MB GET | MB cross-AZ | $/broker-month |\n")
		fmt.Fprintf(&b, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, row := range head {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.0f | %.2f | %.1f | %.1f | %s | %s | %s | %s |\n",
				row.Workload, row.Mode, fmtMs(row.P50), fmtMs(row.P99), fmtMs(row.P999), row.RecordsPerSec, row.MBPerSec,
				row.PutsPerSec, row.GetsPerSec, fmtMB(row.BytesPut), fmtMB(row.BytesGot), fmtMB(row.CrossAZBytes), fmtUSD(row.CostUSD))
		}
		b.WriteString("\n")
		r.writeCostLines(&b, head)
		r.writeTarget(&b, head)
		writeParity(&b, ParityOf(head, r.Runs), c.ProducePartitions)
		writeInFlight(&b, head)
		writePathStages(&b, head)
		writeStages(&b, head)
	}

	sweep := r.rowsFor(false)
	if len(sweep) > 0 {
		fmt.Fprintf(&b, "## Sweep: combiner interval and object size (`%s`)\n\n", Stream)
		fmt.Fprintf(&b, "`interval` is remote.wal.log.manager.combiner.task.interval.ms, `object` remote.wal.log.manager.combiner.task.upload.bytes (the combiner cuts an object when it holds this much, or when the interval is up). Classic runs in every setting too, as the reference measured alongside; the settings do not apply to it. Latency is end-to-end, ms.\n\n")
		fmt.Fprintf(&b, "| interval | object | mode | p50 | p99 | p99.9 | records/s | PUTs/s | GETs/s | avg object KB | MB cross-AZ | $/broker-month |\n")
		fmt.Fprintf(&b, "|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		sorted := slices.Clone(sweep)
		slices.SortStableFunc(sorted, func(a, b Row) int {
			return cmp.Or(cmp.Compare(a.Setting.UploadBytes, b.Setting.UploadBytes), cmp.Compare(a.Setting.Interval, b.Setting.Interval), cmp.Compare(a.Mode, b.Mode))
		})
		for _, row := range sorted {
			obj := "-"
			if row.AvgObjectBytes > 0 {
				obj = fmt.Sprintf("%.1f", row.AvgObjectBytes/1e3)
			}
			fmt.Fprintf(&b, "| %v | %s | %s | %s | %s | %s | %.0f | %.1f | %.1f | %s | %s | %s |\n",
				row.Setting.Interval, humanBytes(row.Setting.UploadBytes), row.Mode, fmtMs(row.P50), fmtMs(row.P99), fmtMs(row.P999),
				row.RecordsPerSec, row.PutsPerSec, row.GetsPerSec, obj, fmtMB(row.CrossAZBytes), fmtUSD(row.CostUSD))
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "![cost against p99 latency](%s)\n\n", TradeoffPNG)
		fmt.Fprintf(&b, "The trade-off curve: each remote-WAL point is one setting (median p99 end-to-end latency, median $ per broker-month); pick the cheapest setting whose p99 you can accept. Classic points are the same workload replicated classically.\n\n")
	}

	if ws := r.plottedWorkloads(); len(ws) > 0 {
		fmt.Fprintf(&b, "## Latency CDFs (headline, all repetitions pooled)\n\n")
		for _, w := range ws {
			fmt.Fprintf(&b, "![%s](%s)\n", w, CDFFile(w))
		}
		b.WriteString("\n")
	}

	var dup, ooo int64
	for _, row := range r.Rows {
		dup += row.Duplicates
		ooo += row.OutOfOrder
	}
	fmt.Fprintf(&b, "## Checks and gaps\n\n")
	fmt.Fprintf(&b, "- Consumers saw %d duplicate and %d out-of-order records over all runs.\n", dup, ooo)
	fmt.Fprintf(&b, "- The metadata topic (`__remote_wal_log_metadata`) runs on %s without modelled network delay, and its traffic is not in the ledger.\n", c.Metadata)
	switch {
	case strings.HasPrefix(c.Store, "the fs backend"):
		fmt.Fprintf(&b, "- The object store is modelled (latency decorator over local files), not a real S3 Express bucket.\n")
	case strings.HasPrefix(c.Store, "the mem backend"):
		fmt.Fprintf(&b, "- The object store is modelled (latency decorator over an in-memory store), not a real S3 Express bucket; the broker pays neither the disk a local store would nor the network a remote one would.\n")
		fmt.Fprintf(&b, "- %s\n", r.storeMemorySentence())
	default:
		fmt.Fprintf(&b, "- The object store is %s on whatever network reaches it, plus the `%s` model; it is not S3 Express One Zone unless the URL names a directory bucket.\n", c.Store, c.LatencyModel.Name)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// TargetSlack is the allowance of issue 14's target 1 on top of the
// classic latency, the combiner's wait and the store's PUT and GET.
const TargetSlack = 3 * time.Millisecond

// Target is issue 14's target 1 for the remote WAL's end-to-end latency at
// acks=1, from figures measured in one run: p50 ≤ classic p50 + I/2 + PUT
// p50 + GET p50 + 3 ms, and p99 ≤ classic p99 + I + PUT p99 + GET p99 +
// 3 ms, I the combiner interval and PUT/GET the store's requests as the
// brokers timed them.
type Target struct {
	Interval    time.Duration `json:"interval_ns"`
	ClassicP50  time.Duration `json:"classic_p50_ns"`
	ClassicP99  time.Duration `json:"classic_p99_ns"`
	PutP50      time.Duration `json:"put_p50_ns"`
	PutP99      time.Duration `json:"put_p99_ns"`
	GetP50      time.Duration `json:"get_p50_ns"`
	GetP99      time.Duration `json:"get_p99_ns"`
	BoundP50    time.Duration `json:"bound_p50_ns"`
	BoundP99    time.Duration `json:"bound_p99_ns"`
	MeasuredP50 time.Duration `json:"measured_p50_ns"`
	MeasuredP99 time.Duration `json:"measured_p99_ns"`
	RatioP50    float64       `json:"ratio_p50"`
	RatioP99    float64       `json:"ratio_p99"`
	MetP50      bool          `json:"met_p50"`
	MetP99      bool          `json:"met_p99"`
}

// TargetOf computes the target from the E2E rows of one phase; ok is
// false without both modes' rows or without timed PUTs and GETs.
func TargetOf(rows []Row) (Target, bool) {
	var (
		t            Target
		c, rw        Row
		haveC, haveR bool
	)
	for _, row := range rows {
		if row.Workload != E2E {
			continue
		}
		switch row.Mode {
		case Classic:
			c, haveC = row, true
		case RemoteWAL:
			rw, haveR = row, true
		}
	}
	if !haveC || !haveR || rw.PutP50 == 0 || rw.GetP50 == 0 {
		return t, false
	}
	t.Interval = rw.Setting.Interval
	t.PutP50, t.PutP99, t.GetP50, t.GetP99, t.ClassicP50, t.ClassicP99 = rw.PutP50, rw.PutP99, rw.GetP50, rw.GetP99, c.P50, c.P99
	t.BoundP50 = c.P50 + t.Interval/2 + rw.PutP50 + rw.GetP50 + TargetSlack
	t.BoundP99 = c.P99 + t.Interval + rw.PutP99 + rw.GetP99 + TargetSlack
	t.MeasuredP50, t.MeasuredP99 = rw.P50, rw.P99
	t.RatioP50 = float64(rw.P50) / float64(t.BoundP50)
	t.RatioP99 = float64(rw.P99) / float64(t.BoundP99)
	t.MetP50, t.MetP99 = rw.P50 <= t.BoundP50, rw.P99 <= t.BoundP99
	return t, true
}

func (r *Report) writeTarget(b *strings.Builder, rows []Row) {
	t, ok := TargetOf(rows)
	if !ok {
		return
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "missed"
	}
	fmt.Fprintf(b, "### Target: remote-WAL end-to-end latency at acks=1 (`%s`)\n\n", E2E)
	fmt.Fprintf(b, "The bound is computed from this run's own figures: the classic row above, the combiner interval I = %v, and the store's PUT and GET latencies as the brokers timed them during the remote-WAL runs (medians over the runs of each run's percentile; the model's nominal figures are PUT %v / %v, GET %v / %v).\n\n",
		t.Interval, r.Config.LatencyModel.Put.Median, r.Config.LatencyModel.Put.P99, r.Config.LatencyModel.Get.Median, r.Config.LatencyModel.Get.P99)
	fmt.Fprintf(b, "| | remotewal measured | bound | bound made of | measured / bound | |\n|---|--:|--:|---|--:|---|\n")
	fmt.Fprintf(b, "| p50 | %s | %s | classic %s + I/2 %s + PUT %s + GET %s + %s | %.2f | %s |\n",
		fmtMs(t.MeasuredP50), fmtMs(t.BoundP50), fmtMs(t.ClassicP50), fmtMs(t.Interval/2), fmtMs(t.PutP50), fmtMs(t.GetP50), fmtMs(TargetSlack), t.RatioP50, met(t.MetP50))
	fmt.Fprintf(b, "| p99 | %s | %s | classic %s + I %s + PUT %s + GET %s + %s | %.2f | %s |\n\n",
		fmtMs(t.MeasuredP99), fmtMs(t.BoundP99), fmtMs(t.ClassicP99), fmtMs(t.Interval), fmtMs(t.PutP99), fmtMs(t.GetP99), fmtMs(TargetSlack), t.RatioP99, met(t.MetP99))
}

// writeStages prints the end-to-end workloads' stages.
func writeStages(b *strings.Builder, rows []Row) {
	var with []Row
	for _, row := range rows {
		if len(row.StageP50) > 0 {
			with = append(with, row)
		}
	}
	if len(with) == 0 {
		return
	}
	fmt.Fprintf(b, "### Where the end-to-end time goes\n\n")
	fmt.Fprintf(b, "Each record's latency split where its offset first reached the leader's log, the follower's log and the follower's high watermark (watchers on the brokers' change feeds): `produce` created → leader's log, `replicate` → follower's log, `hw` → below the follower's HW, `deliver` → consumed. p50 / p99 in ms, medians over the runs; the stage percentiles do not add up to the total's.\n\n")
	fmt.Fprintf(b, "| workload | mode | %s | total |\n|---|---|%s--:|\n", strings.Join(E2EStages, " | "), strings.Repeat("--:|", len(E2EStages)))
	for _, row := range with {
		fmt.Fprintf(b, "| %s | %s |", row.Workload, row.Mode)
		for _, st := range E2EStages {
			fmt.Fprintf(b, " %s / %s |", fmtMs(row.StageP50[st]), fmtMs(row.StageP99[st]))
		}
		fmt.Fprintf(b, " %s / %s |\n", fmtMs(row.P50), fmtMs(row.P99))
	}
	b.WriteString("\n")
}

// writeCostLines prints, for the headline workloads, the priced line items.
func (r *Report) writeCostLines(b *strings.Builder, rows []Row) {
	items := map[string]bool{}
	for _, row := range rows {
		for it := range row.CostLines {
			items[it] = true
		}
	}
	if len(items) == 0 {
		return
	}
	names := make([]string, 0, len(items))
	for it := range items {
		names = append(names, it)
	}
	slices.Sort(names)
	fmt.Fprintf(b, "What the $/broker-month is made of (medians, USD; sheets `%s` and `%s`):\n\n| workload | mode | %s |\n|---|---|%s\n",
		r.Config.StoreSheet, r.Config.NetworkSheet, strings.Join(names, " | "), strings.Repeat("--:|", len(names)))
	for _, row := range rows {
		fmt.Fprintf(b, "| %s | %s |", row.Workload, row.Mode)
		for _, it := range names {
			fmt.Fprintf(b, " %s |", fmtUSD(row.CostLines[it]))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// storeMemorySentence says what the in-memory store charges the process
// and what of its arena the phases used.
func (r *Report) storeMemorySentence() string {
	var arena, used, huge, over, objs int64
	for _, m := range r.StoreMemory {
		arena, used, over, objs = arena+m.ArenaBytes, used+m.UsedBytes, over+m.OverflowBytes, objs+m.OverflowObjects
		huge += m.HugePageBytes
	}
	s := "The in-memory store charges the process what a client of a remote store pays: one copy of each PUT body " +
		"(the socket write) and of each GET body into a pooled buffer (the socket read). The objects themselves live in " +
		"memory faulted in when each phase's cluster starts, not in fresh allocations whose page faults would bill the " +
		"store's own memory to the brokers"
	if len(r.StoreMemory) == 0 {
		return s + "."
	}
	s += fmt.Sprintf(": %.0f MB of arena over %d phases (%.0f MB of it in 2 MiB pages, which keep its page tables small), %.0f MB used",
		float64(arena)/1e6, len(r.StoreMemory), float64(huge)/1e6, float64(used)/1e6)
	if over > 0 {
		return s + fmt.Sprintf("; %d objects (%.1f MB) found no room and were copied to fresh memory, which this run paid.", objs, float64(over)/1e6)
	}
	return s + "; none overflowed."
}

func (r *Report) linkSentence() string {
	var writes, reads, nanos int64
	for _, l := range r.Link {
		writes += l.DelayedWrites
		reads += l.DelayedReads
		nanos += int64(l.MeasuredMeanOneWay) * (l.DelayedWrites + l.DelayedReads)
	}
	if writes+reads == 0 {
		return "No cross-rack byte was delayed."
	}
	return fmt.Sprintf("Measured: %d cross-rack writes and %d chunks of replies read back were delayed by %v on average (timer overshoot on a busy machine included).",
		writes, reads, time.Duration(nanos/(writes+reads)).Round(time.Microsecond))
}

func bandwidth(bps float64) string {
	if bps <= 0 {
		return "unlimited bandwidth"
	}
	return fmt.Sprintf("%.0f MB/s", bps/1e6)
}

// storeName describes the store without its credentials.
func storeName(u string) string {
	switch u {
	case "", FSStore:
		return "the fs backend on local disk (a write and two fsyncs per PUT on the brokers' disk, on top of the model)"
	case DefaultStorageURL:
		return "the mem backend (objects in the process's memory: the model stands for the whole request, and the brokers' disk pays nothing for it)"
	}
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	return "`" + u + "`"
}

func metadataName(bootstrap string) string {
	if bootstrap == "" {
		return "an embedded kfake"
	}
	return "Kafka at " + bootstrap
}

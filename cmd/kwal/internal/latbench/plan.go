package latbench

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/kwal/kwal/broker"
)

// Workload names one measured workload. The first five are the KIP-1176
// appendix's; Stream is the sweep's.
type Workload string

const (
	// E2E: 100 records of 1.6 KB on average, 32 KiB max batch, acks=1,
	// the consumer in the follower's rack; end-to-end latency.
	E2E Workload = "e2e-acks1"
	// Produce: the producer perf test, 100,000 records of 2,000 B, acks=1,
	// linger 20 ms, unthrottled; throughput and request latency.
	Produce Workload = "produce-acks1"
	// Consume: the consumer perf test over the records Produce wrote,
	// from the follower's rack.
	Consume Workload = "consume"
	// E2EAll and ProduceAll are E2E and Produce with acks=all.
	E2EAll     Workload = "e2e-acksall"
	ProduceAll Workload = "produce-acksall"
	// Stream: a paced producer (acks=1) and a consumer in the follower's
	// rack for a fixed time; end-to-end latency and the cost of a steady
	// rate, for the combiner-interval and object-size sweep.
	Stream Workload = "stream"
)

// HeadlineWorkloads returns the order the headline phase runs in (Consume
// reads what Produce wrote, so it comes after it).
func HeadlineWorkloads() []Workload { return []Workload{E2E, Produce, Consume, E2EAll, ProduceAll} }

// Acks returns the workload's acks setting (-1 is all).
func (w Workload) Acks() int16 {
	if w == E2EAll || w == ProduceAll {
		return -1
	}
	return 1
}

// LatencyName says what the workload's latency figures measure.
func (w Workload) LatencyName() string {
	switch w {
	case Produce, ProduceAll:
		return "request latency (send to ack)"
	case Consume:
		return "poll latency (one PollFetches call)"
	}
	return "end-to-end latency (record created to consumed)"
}

// Modes of replication, run alternately.
const (
	Classic   = "classic"
	RemoteWAL = "remotewal"
)

// Setting is one remote-WAL configuration of the cluster.
type Setting struct {
	// Interval: remote.wal.log.manager.combiner.task.interval.ms.
	Interval time.Duration `json:"interval_ns"`
	// UploadBytes: remote.wal.log.manager.combiner.task.upload.bytes, the
	// object size at which the combiner cuts an object before the
	// interval is up.
	UploadBytes int64 `json:"upload_bytes"`
}

func (s Setting) String() string {
	return fmt.Sprintf("interval=%v object=%s", s.Interval, humanBytes(s.UploadBytes))
}

// Step is one measured run.
type Step struct {
	Workload Workload `json:"workload"`
	Mode     string   `json:"mode"`
	Rep      int      `json:"rep"`
}

// Phase is one cluster start and the steps run on it.
type Phase struct {
	Headline bool    `json:"headline"`
	Setting  Setting `json:"setting"`
	Steps    []Step  `json:"steps"`
}

// DefaultStorageURL is the store the benchmark runs against unless told:
// objects in the process's memory, behind the latency model, which stands
// for a whole S3 Express request. The fs backend (FSStore) costs the
// brokers' own disk a write and two fsyncs per PUT on top of the model's
// latency, which a remote bucket does not; measured on a 2-core machine
// at acks=all (53-66 KB objects) that made the PUT p50 7.1-7.4 ms
// against 5.0 ms with mem (the model's median: 4 ms plus transfer), and
// the round trip of an acks=all produce 16.7 ms against 13.7 ms.
const DefaultStorageURL = "mem://"

// FSStore as Config.StorageURL selects the fs backend in Config.Dir.
const FSStore = "fs"

// Config is the benchmark's flags. Validate fills defaults (smaller ones
// with Quick) and rejects nonsense.
type Config struct {
	// Quick: sizes for CI (the whole run well under 3 minutes).
	Quick bool
	// Reps is the repetitions of each (workload, mode); figures are
	// medians over them. At least 3.
	Reps int
	// OutDir receives report.md, report.json and the PNGs.
	OutDir string
	// Dir holds the cluster's logs and object store; empty: a temporary
	// directory, removed at the end.
	Dir string
	// LatencyModel is the object store's: s3express, s3standard or none.
	LatencyModel string
	// StorageURL is the brokers' object store under the latency model:
	// empty means DefaultStorageURL (mem://), FSStore the fs backend in
	// Dir, or a real store (s3://…, minio://…; use LatencyModel "none"
	// with it so only the store's own latency counts).
	StorageURL string
	// MetadataBootstrap points the brokers at a real Kafka for the
	// metadata topic; empty: an embedded kfake.
	MetadataBootstrap string
	// CrossAZ is the one-way latency between racks (default 0.5 ms, a
	// 1 ms round trip). Zero means the default; NoCrossAZ turns it off.
	CrossAZ   time.Duration
	NoCrossAZ bool
	// Sheet is the object-store price sheet; empty picks the one matching
	// LatencyModel (s3express-2025 or s3-standard).
	Sheet string
	// Headline is the setting the headline workloads run with.
	Headline Setting
	// Workloads restricts the headline phase to these (default: all of
	// HeadlineWorkloads; Consume needs Produce).
	Workloads []Workload
	// Intervals and UploadSizes span the sweep (their product); NoSweep
	// skips it.
	Intervals   []time.Duration
	UploadSizes []int64
	NoSweep     bool
	// ReplicationFactor of every topic: 2 as in the KIP's performance
	// appendix (leader in az1, follower in az2), or 3.
	ReplicationFactor int16
	// Workload sizes.
	E2ERecords      int // records per E2E run (100)
	E2ERate         int // records/s the E2E producer is paced at
	PerfRecords     int // records per Produce run and read by Consume (100,000)
	PerfRecordBytes int // 2,000
	// ProducePartitions is the partition count of the topics Produce and
	// ProduceAll write (and Consume reads): 1, as in the KIP's appendix,
	// unless told. With more, the producer's records spread over them
	// (franz-go's sticky partitioner, as the Java client's), each Produce
	// request carries a batch of every partition its broker leads, and
	// the partitions' leaders spread over the brokers: the in-flight bound
	// grows with both. The end-to-end workloads keep one partition, whose
	// placement puts a follower beside the consumer.
	ProducePartitions int
	StreamRate        int // records/s of the sweep's stream
	StreamDuration    time.Duration
	// CPUProfile, if set, is a file prefix: each step of the headline
	// phase is profiled on its own into
	// <prefix>-<workload>-<mode>-rep<N>.pprof, so the two modes' produce
	// paths can be compared (the profile is process-wide: brokers,
	// store model and clients).
	CPUProfile string
	// Progress, if set, receives a one-line progress display.
	Progress io.Writer
	Logger   *slog.Logger
	// Seed for record sizes and contents.
	Seed uint64
}

// maxProducePartitions bounds Config.ProducePartitions: more would
// measure the brokers' per-partition overhead on a small machine, not the
// producer's window.
const maxProducePartitions = 256

// Racks of the three brokers (ids 1, 2, 3), and where the clients sit: the
// producer beside the leader, the consumer in the other rack, beside a
// follower.
const (
	producerRack = "az1"
	consumerRack = "az2"
)

func brokerRacks() []string { return []string{"az1", "az2", "az2"} }

// Validate fills defaults and rejects nonsense.
func (c *Config) Validate() error {
	if c.StorageURL == "" {
		c.StorageURL = DefaultStorageURL
	}
	if c.Reps == 0 {
		c.Reps = 3
	}
	if c.OutDir == "" {
		c.OutDir = "out/latency"
	}
	if c.LatencyModel == "" {
		c.LatencyModel = "s3express"
	}
	if c.CrossAZ == 0 && !c.NoCrossAZ {
		c.CrossAZ = 500 * time.Microsecond
	}
	if c.NoCrossAZ {
		c.CrossAZ = 0
	}
	if c.Sheet == "" {
		c.Sheet = "s3express-2025"
		if c.LatencyModel == "s3standard" {
			c.Sheet = "s3-standard"
		}
	}
	if c.Headline.Interval == 0 {
		c.Headline.Interval = broker.DefaultCombinerTaskInterval
	}
	if c.Headline.UploadBytes == 0 {
		c.Headline.UploadBytes = broker.DefaultCombinerTaskUploadBytes
	}
	if len(c.Intervals) == 0 {
		c.Intervals = []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
		if c.Quick {
			c.Intervals = []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond}
		}
	}
	if len(c.UploadSizes) == 0 {
		c.UploadSizes = []int64{64 << 10, 256 << 10, 4 << 20}
		if c.Quick {
			c.UploadSizes = []int64{64 << 10, 4 << 20}
		}
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 2
	}
	def := func(p *int, full, quick int) {
		if *p == 0 {
			*p = full
			if c.Quick {
				*p = quick
			}
		}
	}
	def(&c.E2ERecords, 100, 100)
	def(&c.E2ERate, 100, 100)
	def(&c.PerfRecords, 100_000, 10_000)
	def(&c.PerfRecordBytes, 2000, 2000)
	def(&c.ProducePartitions, 1, 1)
	def(&c.StreamRate, 2500, 1000)
	if c.StreamDuration == 0 {
		c.StreamDuration = 4 * time.Second
		if c.Quick {
			c.StreamDuration = 1500 * time.Millisecond
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Seed == 0 {
		c.Seed = 1176
	}
	var errs []error
	if len(c.Workloads) == 0 {
		c.Workloads = HeadlineWorkloads()
	}
	for _, w := range c.Workloads {
		if !slices.Contains(HeadlineWorkloads(), w) {
			errs = append(errs, fmt.Errorf("workload %q: use one of %v", w, HeadlineWorkloads()))
		}
	}
	if slices.Contains(c.Workloads, Consume) && !slices.Contains(c.Workloads, Produce) {
		errs = append(errs, fmt.Errorf("workload %s reads what %s wrote: ask for both", Consume, Produce))
	}
	if c.Reps < 3 {
		errs = append(errs, fmt.Errorf("reps %d: need at least 3 for a median on a noisy machine", c.Reps))
	}
	if c.ProducePartitions < 1 || c.ProducePartitions > maxProducePartitions {
		errs = append(errs, fmt.Errorf("produce partitions %d: use 1 to %d", c.ProducePartitions, maxProducePartitions))
	}
	if c.CrossAZ < 0 {
		errs = append(errs, fmt.Errorf("cross-AZ latency %v is negative", c.CrossAZ))
	}
	if c.ReplicationFactor != 2 && c.ReplicationFactor != 3 {
		errs = append(errs, fmt.Errorf("replication factor %d: use 2 or 3", c.ReplicationFactor))
	}
	for _, s := range append([]Setting{c.Headline}, c.sweepSettings()...) {
		if s.Interval <= 0 || s.UploadBytes <= 0 {
			errs = append(errs, fmt.Errorf("setting %v: interval and object size must be positive", s))
		}
	}
	if c.E2ERecords < 1 || c.E2ERate < 1 || c.PerfRecords < 1 || c.PerfRecordBytes < 16 || c.StreamRate < 1 || c.StreamDuration <= 0 {
		errs = append(errs, errors.New("workload sizes must be positive (record size at least 16 B)"))
	}
	switch c.LatencyModel {
	case "s3express", "s3standard", "none":
	default:
		errs = append(errs, fmt.Errorf("latency model %q: use s3express, s3standard or none", c.LatencyModel))
	}
	return errors.Join(errs...)
}

func (c *Config) sweepSettings() []Setting {
	if c.NoSweep {
		return nil
	}
	var out []Setting
	for _, size := range c.UploadSizes {
		for _, iv := range c.Intervals {
			out = append(out, Setting{Interval: iv, UploadBytes: size})
		}
	}
	return out
}

// modeOrder alternates which mode goes first, so that neither always runs
// on a warmer (or more fragmented) cluster.
func modeOrder(rep int) []string {
	if rep%2 == 0 {
		return []string{Classic, RemoteWAL}
	}
	return []string{RemoteWAL, Classic}
}

// Plan lays out the phases of a validated config: the headline phase (every
// appendix workload, both modes alternating, Reps times), then one phase
// per sweep setting running Stream the same way.
func Plan(c Config) []Phase {
	head := Phase{Headline: true, Setting: c.Headline}
	for _, w := range HeadlineWorkloads() {
		if !slices.Contains(c.Workloads, w) {
			continue
		}
		for rep := 0; rep < c.Reps; rep++ {
			for _, m := range modeOrder(rep) {
				head.Steps = append(head.Steps, Step{Workload: w, Mode: m, Rep: rep})
			}
		}
	}
	phases := []Phase{head}
	for _, s := range c.sweepSettings() {
		p := Phase{Setting: s}
		for rep := 0; rep < c.Reps; rep++ {
			for _, m := range modeOrder(rep) {
				p.Steps = append(p.Steps, Step{Workload: Stream, Mode: m, Rep: rep})
			}
		}
		phases = append(phases, p)
	}
	return phases
}

// TopicName returns the first name prefix-0, prefix-1, … whose single
// partition the controller's deterministic assignment (broker.AssignReplicas)
// gives a leader outside consumerRack and, among its rf replicas, a follower
// in consumerRack, so the consumer reads from a follower and the leader's
// bytes must cross racks to reach it.
func TopicName(prefix string, brokers []broker.BrokerInfo, rf int16) (string, error) {
	rack := map[int32]string{}
	for _, b := range brokers {
		rack[b.ID] = b.Rack
	}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		ps, err := broker.AssignReplicas(name, 1, rf, brokers)
		if err != nil {
			return "", err
		}
		if placementOK(ps[0], rack) {
			return name, nil
		}
	}
	return "", fmt.Errorf("latbench: no topic name %s-N puts the leader outside %s and a follower in it", prefix, consumerRack)
}

func placementOK(ps broker.PartitionState, rack map[int32]string) bool {
	if rack[ps.Leader] == consumerRack {
		return false
	}
	return slices.ContainsFunc(ps.Replicas, func(r int32) bool { return r != ps.Leader && rack[r] == consumerRack })
}

func humanBytes(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%dB", b)
}

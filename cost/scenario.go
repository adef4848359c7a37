package cost

import (
	"fmt"
	"math"
	"time"
)

// SliceLayout says how a combined object orders the slices of its
// partitions, which sets how many ranged GETs a follower broker needs.
type SliceLayout string

const (
	// LayoutGrouped: the combiner puts all slices followed by one broker
	// next to each other, so each follower broker reads an object with one
	// ranged GET.
	LayoutGrouped SliceLayout = "grouped"
	// LayoutRandom: slices in arbitrary order; a follower broker needs one
	// GET per run of adjacent slices it follows.
	LayoutRandom SliceLayout = "random"
)

// Workload is the analytical model of one broker's traffic, after the
// KIP-1176 appendix. All figures are per broker.
type Workload struct {
	Brokers          int     `json:"brokers"`             // fleet size; the bill is per broker
	InboundGBPerHour float64 `json:"inbound_gb_per_hour"` // produced bytes led by one broker
	// UploadInterval: the combiner uploads one object per interval.
	UploadInterval time.Duration `json:"upload_interval_ns"`
	// MaxObjectBytes, if positive, also cuts an object when it is this big
	// (remote.wal.log.manager.combiner.task.upload.bytes).
	MaxObjectBytes int64   `json:"max_object_bytes"`
	RetentionHours float64 `json:"retention_hours"` // how long objects stay in the store
	// PartitionsPerBroker: leader partitions per broker with data in every
	// interval, so slices per object.
	PartitionsPerBroker int `json:"partitions_per_broker"`
	// FollowerSpread: over how many brokers the followers of one broker's
	// partitions are spread (1: brokers paired, as the KIP's one leader and
	// one reader; Brokers-1: Kafka's default spread).
	FollowerSpread int         `json:"follower_spread"`
	Layout         SliceLayout `json:"layout"`
	// ReplicationFactor of the baseline (classic replication).
	ReplicationFactor int `json:"replication_factor"`
	// ReadingFollowers: followers per partition that read the remote WAL.
	ReadingFollowers int `json:"reading_followers"`
	AZs              int `json:"azs"`
	// ProducerCrossAZFraction of produced bytes that reach a leader in
	// another AZ (2/3 with producers spread over 3 AZs); same in both designs.
	ProducerCrossAZFraction float64 `json:"producer_cross_az_fraction"`
	// ConsumerFanout: bytes consumed per byte produced, by rack-aware
	// consumers spread evenly over AZs that read a replica in their own
	// AZ when there is one (KIP-392), and cross AZs otherwise.
	ConsumerFanout float64 `json:"consumer_fanout"`
	// Metadata event size: fixed part plus one entry per slice. Each event
	// is replicated MetadataRF-1 times; each follower broker of the object
	// reads the fixed part and its own slices' entries; all of it is taken
	// to cross AZs.
	MetadataEventBytes int `json:"metadata_event_bytes"`
	MetadataSliceBytes int `json:"metadata_slice_bytes"`
	MetadataRF         int `json:"metadata_rf"`
	// FleetScalesWithReplicas: if true, the remote-WAL fleet shrinks to
	// (1+ReadingFollowers)/ReplicationFactor of the baseline's (storage
	// bound); the KIP keeps its 90 brokers.
	FleetScalesWithReplicas bool   `json:"fleet_scales_with_replicas"`
	InstanceSheet           string `json:"instance_sheet"`
	BlockSheet              string `json:"block_sheet"`
}

// KIPWorkload is the appendix workload of KIP-1176.
func KIPWorkload() Workload {
	return Workload{
		Brokers:                 90,
		InboundGBPerHour:        112,
		UploadInterval:          10 * time.Millisecond,
		RetentionHours:          1,
		PartitionsPerBroker:     1,
		FollowerSpread:          1,
		Layout:                  LayoutGrouped,
		ReplicationFactor:       3,
		ReadingFollowers:        1,
		AZs:                     3,
		ProducerCrossAZFraction: 2.0 / 3,
		ConsumerFanout:          1,
		MetadataEventBytes:      256,
		MetadataSliceBytes:      48,
		MetadataRF:              3,
		InstanceSheet:           "ec2-i3en.2xlarge",
		BlockSheet:              "ebs-gp3",
	}
}

// Validate fills defaults from KIPWorkload for zero fields and rejects
// nonsense.
func (w *Workload) Validate() error {
	d := KIPWorkload()
	if w.Brokers == 0 {
		w.Brokers = d.Brokers
	}
	if w.UploadInterval == 0 {
		w.UploadInterval = d.UploadInterval
	}
	if w.PartitionsPerBroker == 0 {
		w.PartitionsPerBroker = 1
	}
	if w.FollowerSpread == 0 {
		w.FollowerSpread = 1
	}
	if w.Layout == "" {
		w.Layout = LayoutGrouped
	}
	if w.ReplicationFactor == 0 {
		w.ReplicationFactor = d.ReplicationFactor
	}
	if w.AZs == 0 {
		w.AZs = d.AZs
	}
	if w.MetadataRF == 0 {
		w.MetadataRF = d.MetadataRF
	}
	if w.InstanceSheet == "" {
		w.InstanceSheet = d.InstanceSheet
	}
	if w.BlockSheet == "" {
		w.BlockSheet = d.BlockSheet
	}
	switch {
	case w.Brokers < 1:
		return invalid("Workload.Brokers %d", w.Brokers)
	case !(w.InboundGBPerHour > 0) || math.IsInf(w.InboundGBPerHour, 0):
		return invalid("Workload.InboundGBPerHour %v: must be positive", w.InboundGBPerHour)
	case w.UploadInterval < 0:
		return invalid("Workload.UploadInterval %v", w.UploadInterval)
	case w.MaxObjectBytes < 0:
		return invalid("Workload.MaxObjectBytes %d", w.MaxObjectBytes)
	case w.RetentionHours < 0:
		return invalid("Workload.RetentionHours %v", w.RetentionHours)
	case w.PartitionsPerBroker < 1 || w.FollowerSpread < 1:
		return invalid("Workload.PartitionsPerBroker %d, FollowerSpread %d: want >= 1", w.PartitionsPerBroker, w.FollowerSpread)
	case w.Layout != LayoutGrouped && w.Layout != LayoutRandom:
		return invalid("Workload.Layout %q", w.Layout)
	case w.ReplicationFactor < 1 || w.ReadingFollowers < 0 || w.AZs < 1 || w.MetadataRF < 1:
		return invalid("Workload replication: RF %d, reading followers %d, AZs %d, metadata RF %d",
			w.ReplicationFactor, w.ReadingFollowers, w.AZs, w.MetadataRF)
	case w.ProducerCrossAZFraction < 0 || w.ProducerCrossAZFraction > 1:
		return invalid("Workload.ProducerCrossAZFraction %v: want 0..1", w.ProducerCrossAZFraction)
	case w.ConsumerFanout < 0 || w.MetadataEventBytes < 0 || w.MetadataSliceBytes < 0:
		return invalid("Workload: negative consumer fan-out or metadata size")
	}
	return nil
}

// InboundMBps is the produced rate per broker in MB/s (10^6 bytes).
func (w Workload) InboundMBps(bytesPerGB float64) float64 {
	return w.InboundGBPerHour * bytesPerGB / 3600 / 1e6
}

// WithInboundMBps returns w with the produced rate set in MB/s.
func (w Workload) WithInboundMBps(mbps, bytesPerGB float64) Workload {
	w.InboundGBPerHour = mbps * 1e6 * 3600 / bytesPerGB
	return w
}

// Objects returns uploads per second and the average object size in bytes.
func (w Workload) Objects(bytesPerGB float64) (perSec, objectBytes float64) {
	inBps := w.InboundGBPerHour * bytesPerGB / 3600
	if w.UploadInterval > 0 {
		perSec = float64(time.Second) / float64(w.UploadInterval)
	}
	if w.MaxObjectBytes > 0 {
		perSec = math.Max(perSec, inBps/float64(w.MaxObjectBytes))
	}
	if perSec == 0 {
		return 0, 0
	}
	return perSec, inBps / perSec
}

// GetsPerObject is the expected number of ranged GETs one object costs,
// over all its reading followers.
func (w Workload) GetsPerObject() float64 {
	p, s := float64(w.PartitionsPerBroker), float64(w.FollowerSpread)
	var runs float64
	switch w.Layout {
	case LayoutRandom:
		// Expected runs of equal follower broker in a random sequence.
		runs = 1 + (p-1)*(1-1/s)
	default:
		// Expected number of distinct follower brokers among p slices.
		runs = s * (1 - math.Pow(1-1/s, p))
	}
	return float64(w.ReadingFollowers) * runs
}

// consumerCrossAZFraction: consumers spread evenly over AZs, a replica in
// each of the first min(replicas, AZs) AZs.
func (w Workload) consumerCrossAZFraction(replicas int) float64 {
	covered := min(replicas, w.AZs)
	return float64(w.AZs-covered) / float64(w.AZs)
}

// RemoteWALUsage is the object-store usage of one broker for one month of
// hoursPerMonth hours, as Model.MonthlyCost takes it. Cross-AZ bytes are
// not included; the scenario prices them itself, by cause.
func (w Workload) RemoteWALUsage(hoursPerMonth, bytesPerGB float64) Usage {
	secs := hoursPerMonth * 3600
	perSec, objBytes := w.Objects(bytesPerGB)
	objects := perSec * secs
	getsPerObj := w.GetsPerObject()
	gets := objects * getsPerObj
	inBytes := w.InboundGBPerHour * bytesPerGB * hoursPerMonth
	u := Usage{
		Duration:       time.Duration(hoursPerMonth * float64(time.Hour)),
		Brokers:        1,
		Puts:           int64(math.Round(objects)),
		Gets:           int64(math.Round(gets)),
		Deletes:        int64(math.Round(objects)),
		BytesPut:       int64(math.Round(inBytes)),
		BytesGot:       int64(math.Round(inBytes * float64(w.ReadingFollowers))),
		StoredBytesAvg: w.InboundGBPerHour * bytesPerGB * w.RetentionHours,
	}
	u.PutSizes = []SizeCount{{Bytes: int64(math.Round(objBytes)), Count: u.Puts}}
	if getsPerObj > 0 {
		// Slices are taken to be of equal size.
		per := objBytes * float64(w.ReadingFollowers) / getsPerObj
		u.GetSizes = []SizeCount{{Bytes: int64(math.Round(per)), Count: u.Gets}}
	}
	return u
}

// Counting says what a comparison counts. The KIP's table counts PUTs and
// one direction of follower replication traffic; everything else is left
// out.
type Counting struct {
	Name              string `json:"name"`
	CrossAZDirections int    `json:"cross_az_directions"`
	Gets              bool   `json:"gets"`
	PerGBFees         bool   `json:"per_gb_fees"`
	ObjectStorage     bool   `json:"object_storage"`
	ProducerCrossAZ   bool   `json:"producer_cross_az"`
	ConsumerCrossAZ   bool   `json:"consumer_cross_az"`
	Metadata          bool   `json:"metadata"`
}

// KIPCounting counts what the KIP's appendix table counts.
func KIPCounting() Counting { return Counting{Name: "as the KIP counts", CrossAZDirections: 1} }

// FullCounting counts everything the model knows.
func FullCounting() Counting {
	return Counting{Name: "everything counted", CrossAZDirections: 2, Gets: true, PerGBFees: true,
		ObjectStorage: true, ProducerCrossAZ: true, ConsumerCrossAZ: true, Metadata: true}
}

// Comparison is the baseline against the remote WAL on one object store.
type Comparison struct {
	Store     string    `json:"store"`
	Counting  Counting  `json:"counting"`
	Baseline  Breakdown `json:"baseline"`
	RemoteWAL Breakdown `json:"remote_wal"`
	// Omitted lists what the counting left out, priced, per design.
	BaselineOmitted  []Line  `json:"baseline_omitted"`
	RemoteWALOmitted []Line  `json:"remote_wal_omitted"`
	SavingUSD        float64 `json:"saving_usd"`
	SavingPct        float64 `json:"saving_pct"`
}

// Compare prices w under both designs on the object-store sheet store,
// with the instance sheet named by w from book.
func (m Model) Compare(w Workload, c Counting, store Sheet, book *Book) (Comparison, error) {
	if err := w.Validate(); err != nil {
		return Comparison{}, err
	}
	full, err := m.designs(w, FullCounting(), store, book)
	if err != nil {
		return Comparison{}, err
	}
	counted, err := m.designs(w, c, store, book)
	if err != nil {
		return Comparison{}, err
	}
	cmp := Comparison{Store: store.Name, Counting: c, Baseline: counted[0], RemoteWAL: counted[1]}
	cmp.BaselineOmitted = omitted(full[0], counted[0])
	cmp.RemoteWALOmitted = omitted(full[1], counted[1])
	cmp.SavingUSD = cmp.Baseline.TotalUSD - cmp.RemoteWAL.TotalUSD
	if cmp.Baseline.TotalUSD > 0 {
		cmp.SavingPct = 100 * cmp.SavingUSD / cmp.Baseline.TotalUSD
	}
	return cmp, nil
}

// omitted lists what full has beyond counted, line by line; a line both
// have but priced differently (one direction of two) shows the difference.
func omitted(full, counted Breakdown) []Line {
	var out []Line
	for _, f := range full.Lines {
		c, ok := counted.Line(f.Item)
		switch {
		case !ok && f.USD != 0:
			out = append(out, f)
		case ok && f.USD-c.USD > 1e-9:
			f.Note = fmt.Sprintf("counted at $%.2f, in full $%.2f", c.USD, f.USD)
			f.USD -= c.USD
			f.Quantity = 0
			out = append(out, f)
		}
	}
	return out
}

// designs returns the baseline and remote-WAL bills under c.
func (m Model) designs(w Workload, c Counting, store Sheet, book *Book) ([2]Breakdown, error) {
	var out [2]Breakdown
	m.CrossAZDirectionsBilled = c.CrossAZDirections
	if err := m.Validate(); err != nil {
		return out, err
	}
	inst, err := book.Sheet(w.InstanceSheet)
	if err != nil {
		return out, err
	}
	if inst.Instance == nil {
		return out, invalid("Workload.InstanceSheet %q is not an instance sheet", inst.Name)
	}
	inGB := w.InboundGBPerHour * m.HoursPerMonth
	instLine := func(fleet float64, note string) Line {
		f := inst.Instance.PerHour
		return Line{Item: ItemInstance, Group: GroupStorageInstance, Quantity: m.HoursPerMonth * fleet,
			Unit: "instance-hours", UnitUSD: f.USD, Source: cite(inst, "per_hour", f),
			Note: fmt.Sprintf("%s %s on demand; %.0f GB instance store holds the log, no EBS; %s",
				inst.Instance.Type, inst.Region, inst.Instance.LocalStorageGB, note)}
	}
	xaz := func(b *Breakdown, what string, gb float64) error {
		if gb <= 0 {
			return nil
		}
		l, err := m.crossAZLine(gb, what)
		if err != nil {
			return err
		}
		b.add(l)
		return nil
	}

	// Baseline: classic replication, RF-1 followers fetch from the leader
	// across AZs.
	base := Breakdown{Label: fmt.Sprintf("baseline RF %d, followers fetch across AZs", w.ReplicationFactor)}
	base.add(instLine(1, "fleet as in the KIP"))
	if err := xaz(&base, "follower replication", inGB*float64(w.ReplicationFactor-1)); err != nil {
		return out, err
	}
	if c.ProducerCrossAZ {
		if err := xaz(&base, "producers", inGB*w.ProducerCrossAZFraction); err != nil {
			return out, err
		}
	}
	if c.ConsumerCrossAZ {
		if err := xaz(&base, "consumers", inGB*w.ConsumerFanout*w.consumerCrossAZFraction(w.ReplicationFactor)); err != nil {
			return out, err
		}
	}

	// Remote WAL: leader uploads, ReadingFollowers read back.
	u := w.RemoteWALUsage(m.HoursPerMonth, m.BytesPerGB)
	if !c.Gets {
		u.Gets, u.GetSizes = 0, nil
	}
	rw, err := m.MonthlyCost(u, store)
	if err != nil {
		return out, err
	}
	rw.Label = fmt.Sprintf("remote WAL: leader + %d reading follower(s) on %s", w.ReadingFollowers, store.Name)
	kept := Breakdown{Label: rw.Label, Sheet: rw.Sheet}
	fleet, fleetNote := 1.0, "fleet as in the KIP"
	if w.FleetScalesWithReplicas {
		fleet = float64(1+w.ReadingFollowers) / float64(w.ReplicationFactor)
		fleetNote = fmt.Sprintf("fleet scaled to %d/%d of the baseline", 1+w.ReadingFollowers, w.ReplicationFactor)
	}
	kept.add(instLine(fleet, fleetNote))
	for _, l := range rw.Lines {
		switch l.Item {
		case ItemGet, ItemHead, ItemList:
			if !c.Gets {
				continue
			}
		case ItemUpload, ItemRetrieval, ItemStoreXfer:
			if !c.PerGBFees {
				continue
			}
		case ItemStorage:
			if !c.ObjectStorage {
				continue
			}
		}
		kept.add(l)
	}
	if c.ProducerCrossAZ {
		if err := xaz(&kept, "producers", inGB*w.ProducerCrossAZFraction); err != nil {
			return out, err
		}
	}
	if c.ConsumerCrossAZ {
		if err := xaz(&kept, "consumers", inGB*w.ConsumerFanout*w.consumerCrossAZFraction(1+w.ReadingFollowers)); err != nil {
			return out, err
		}
	}
	if c.Metadata {
		perSec, _ := w.Objects(m.BytesPerGB)
		// Replicas copy the whole event; each reading follower fetches its
		// own slices' entries plus one event header per object.
		event := float64(w.MetadataEventBytes + w.MetadataSliceBytes*w.PartitionsPerBroker)
		perObject := float64(w.MetadataRF-1)*event +
			float64(w.ReadingFollowers*w.PartitionsPerBroker*w.MetadataSliceBytes) +
			w.GetsPerObject()*float64(w.MetadataEventBytes)
		gb := perSec * m.HoursPerMonth * 3600 * perObject / m.BytesPerGB
		if err := xaz(&kept, "metadata topic", gb); err != nil {
			return out, err
		}
	}
	out[0], out[1] = base, kept
	return out, nil
}

// Param is one named assumption, printed with every table that uses it.
type Param struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Why   string `json:"why,omitempty"`
}

// Params lists the workload's assumptions.
func (w Workload) Params(m Model) []Param {
	perSec, obj := w.Objects(m.BytesPerGB)
	return []Param{
		{"brokers", fmt.Sprint(w.Brokers), "KIP appendix: 90 i3en.2xlarge nodes"},
		{"instance", w.InstanceSheet, "KIP appendix"},
		{"inbound per broker", fmt.Sprintf("%g GB/h = %.2f MB/s", w.InboundGBPerHour, w.InboundMBps(m.BytesPerGB)),
			"KIP: 30 MB/s, \"about 112 GB per hour\"; 112 GB/h is what its transfer row uses"},
		{"hours per month", fmt.Sprint(m.HoursPerMonth), "30 days; 112 x 720 x 2 x $0.01 = $1612.80 is the KIP's row"},
		{"bytes per GB", fmt.Sprintf("%.0f", m.BytesPerGB), "AWS bills binary GB; 512 KB = 524288 bytes"},
		{"upload interval", w.UploadInterval.String(), "KIP: every 10 ms, about 100 IOPS"},
		{"max object bytes", fmt.Sprint(w.MaxObjectBytes), "0: uploads cut on time only"},
		{"uploads per second", fmt.Sprintf("%.1f", perSec), "one combined object per upload"},
		{"object size", fmt.Sprintf("%.0f bytes (%.0f KiB)", obj, obj/1024), "inbound x interval; KIP: 100-500 KB"},
		{"retention in object store", fmt.Sprintf("%g h", w.RetentionHours), "KIP: 1 hour"},
		{"baseline replication factor", fmt.Sprint(w.ReplicationFactor), "KIP: 3-way replicated"},
		{"remote-WAL reading followers", fmt.Sprint(w.ReadingFollowers), "KIP: one leader writes, one follower reads"},
		{"partitions per broker (slices per object)", fmt.Sprint(w.PartitionsPerBroker), "all with data every interval"},
		{"follower spread", fmt.Sprint(w.FollowerSpread), "brokers holding one broker's followers; 1 = paired"},
		{"slice layout", string(w.Layout), "grouped: one ranged GET per follower broker per object"},
		{"GETs per object", fmt.Sprintf("%.2f", w.GetsPerObject()), "over all reading followers"},
		{"AZs", fmt.Sprint(w.AZs), "replicas in distinct AZs"},
		{"producer cross-AZ fraction", fmt.Sprintf("%.3f", w.ProducerCrossAZFraction), "producers spread over AZs; same in both designs"},
		{"consumer fan-out", fmt.Sprintf("%g", w.ConsumerFanout), "rack-aware consumers read an in-AZ replica if one exists"},
		{"metadata event", fmt.Sprintf("%d B + %d B/slice, RF %d", w.MetadataEventBytes, w.MetadataSliceBytes, w.MetadataRF), "replicas copy the event, followers read header + own entries; all cross AZs"},
		{"fleet scales with replicas", fmt.Sprint(w.FleetScalesWithReplicas), "the KIP keeps 90 brokers"},
	}
}

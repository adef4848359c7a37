package cost

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Model holds the billing conventions that turn counts into money. The
// zero value is usable after Validate, which fills the defaults.
type Model struct {
	// HoursPerMonth is the month a rate is extrapolated to; 720 (30 days),
	// as the KIP's 112 GB/h x 720 h = 80,640 GB implies.
	HoursPerMonth float64 `json:"hours_per_month"`
	// BytesPerGB is how many bytes AWS bills as a GB: 2^30.
	BytesPerGB float64 `json:"bytes_per_gb"`
	// CrossAZDirectionsBilled: 2 bills a byte crossing AZs leaving the
	// sender and arriving at the receiver (AWS's rule); the KIP counts 1.
	CrossAZDirectionsBilled int `json:"cross_az_directions_billed"`
	// Network prices Usage.CrossAZBytes; it must be a network sheet when
	// any cross-AZ bytes are counted.
	Network Sheet `json:"network"`
}

// ErrInvalid is wrapped by errors about a Model, Usage or Workload that
// makes no sense.
var ErrInvalid = errors.New("invalid cost input")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate fills defaults and rejects nonsense.
func (m *Model) Validate() error {
	if m.HoursPerMonth == 0 {
		m.HoursPerMonth = 720
	}
	if m.BytesPerGB == 0 {
		m.BytesPerGB = 1 << 30
	}
	if m.CrossAZDirectionsBilled == 0 {
		m.CrossAZDirectionsBilled = 2
	}
	switch {
	case !(m.HoursPerMonth > 0) || math.IsInf(m.HoursPerMonth, 0):
		return invalid("HoursPerMonth %v", m.HoursPerMonth)
	case !(m.BytesPerGB > 0) || math.IsInf(m.BytesPerGB, 0):
		return invalid("BytesPerGB %v", m.BytesPerGB)
	case m.CrossAZDirectionsBilled < 1 || m.CrossAZDirectionsBilled > 2:
		return invalid("CrossAZDirectionsBilled %d: want 1 or 2", m.CrossAZDirectionsBilled)
	case m.Network.Name != "" && m.Network.Network == nil:
		return invalid("Network: sheet %q is a %q sheet, want network", m.Network.Name, m.Network.Kind)
	}
	return nil
}

// NewModel returns the default Model with the book's "aws-cross-az"
// network sheet.
func NewModel(b *Book) (Model, error) {
	n, err := b.Sheet("aws-cross-az")
	if err != nil {
		return Model{}, err
	}
	m := Model{Network: n}
	return m, m.Validate()
}

// SizeCount says Count requests had Bytes bytes each: an exact list of
// request sizes, or a histogram with one representative size per bucket.
type SizeCount struct {
	Bytes int64 `json:"bytes"`
	Count int64 `json:"count"`
}

// Usage is what was measured over Duration, summed over Brokers brokers.
type Usage struct {
	Duration time.Duration `json:"duration_ns"`
	Brokers  int           `json:"brokers"` // 0 means 1

	Puts, Gets, Heads, Lists, Deletes int64
	BytesPut, BytesGot                int64

	// PutSizes and GetSizes give the size of each request, needed where
	// per-GB fees start above a threshold (S3 Express launch prices: the
	// part above 512 KB). Counts must sum to Puts and Gets. When empty,
	// every request is taken to have the average size BytesPut/Puts, and
	// the line item says so.
	PutSizes []SizeCount `json:"put_sizes,omitempty"`
	GetSizes []SizeCount `json:"get_sizes,omitempty"`

	// CrossAZBytes counts each byte once per AZ boundary it crossed; the
	// model bills it Model.CrossAZDirectionsBilled times.
	CrossAZBytes int64 `json:"cross_az_bytes"`
	// StoredBytesAvg is the time-average of bytes held in the object store.
	StoredBytesAvg float64 `json:"stored_bytes_avg"`
}

// Validate rejects a usage that cannot be extrapolated.
func (u Usage) Validate() error {
	if u.Duration <= 0 {
		return invalid("Usage.Duration %v: must be positive", u.Duration)
	}
	if u.Brokers < 0 {
		return invalid("Usage.Brokers %d", u.Brokers)
	}
	for name, v := range map[string]int64{"Puts": u.Puts, "Gets": u.Gets, "Heads": u.Heads, "Lists": u.Lists,
		"Deletes": u.Deletes, "BytesPut": u.BytesPut, "BytesGot": u.BytesGot, "CrossAZBytes": u.CrossAZBytes} {
		if v < 0 {
			return invalid("Usage.%s %d is negative", name, v)
		}
	}
	if u.StoredBytesAvg < 0 || math.IsNaN(u.StoredBytesAvg) {
		return invalid("Usage.StoredBytesAvg %v", u.StoredBytesAvg)
	}
	for _, c := range []struct {
		name  string
		sizes []SizeCount
		n     int64
	}{{"PutSizes", u.PutSizes, u.Puts}, {"GetSizes", u.GetSizes, u.Gets}} {
		if len(c.sizes) == 0 {
			continue
		}
		var sum int64
		for _, s := range c.sizes {
			if s.Bytes < 0 || s.Count < 0 {
				return invalid("Usage.%s has a negative entry %+v", c.name, s)
			}
			sum += s.Count
		}
		if sum != c.n {
			return invalid("Usage.%s counts sum to %d, want %d requests", c.name, sum, c.n)
		}
	}
	return nil
}

// Line is one item of a bill, per broker-month.
type Line struct {
	Item     string  `json:"item"`
	Group    string  `json:"group"` // GroupStorageInstance or GroupTransfer, the KIP's two rows
	Quantity float64 `json:"quantity"`
	Unit     string  `json:"unit"`
	UnitUSD  float64 `json:"unit_usd"`
	USD      float64 `json:"usd"`
	Source   string  `json:"source"`
	Note     string  `json:"note,omitempty"`
}

// The KIP's table has two rows; every line belongs to one of them.
const (
	GroupStorageInstance = "storage/instance"
	GroupTransfer        = "transfer"
)

// Breakdown is a bill per broker-month.
type Breakdown struct {
	Label    string  `json:"label"`
	Sheet    string  `json:"sheet,omitempty"`
	Lines    []Line  `json:"lines"`
	TotalUSD float64 `json:"total_usd"`
}

func (b *Breakdown) add(l Line) {
	l.USD = l.Quantity * l.UnitUSD
	b.Lines = append(b.Lines, l)
	b.TotalUSD += l.USD
}

// Group sums the lines of one group.
func (b Breakdown) Group(g string) float64 {
	var t float64
	for _, l := range b.Lines {
		if l.Group == g {
			t += l.USD
		}
	}
	return t
}

// Line returns the line called item.
func (b Breakdown) Line(item string) (Line, bool) {
	for _, l := range b.Lines {
		if l.Item == item {
			return l, true
		}
	}
	return Line{}, false
}

// Line items of MonthlyCost, by name.
const (
	ItemPut       = "PUT requests"
	ItemGet       = "GET requests"
	ItemHead      = "HEAD requests"
	ItemList      = "LIST requests"
	ItemDelete    = "DELETE requests"
	ItemUpload    = "data upload per-GB fee"
	ItemRetrieval = "data retrieval per-GB fee"
	ItemStorage   = "object storage"
	ItemStoreXfer = "object-store transfer"
	ItemCrossAZ   = "cross-AZ transfer"
	ItemInstance  = "instances"
	ItemLocalDisk = "local log storage"
)

func cite(s Sheet, field string, f Figure) string {
	return fmt.Sprintf("%s %s: %s (%s)", s.Name, field, f.Source, f.Date)
}

// MonthlyCost extrapolates u's rates to one broker-month of
// m.HoursPerMonth hours and prices them with the object-store sheet store
// and m.Network. It returns an error wrapping ErrInvalid for an invalid
// Model or Usage or a store sheet that is not an object store.
func (m Model) MonthlyCost(u Usage, store Sheet) (Breakdown, error) {
	if err := m.Validate(); err != nil {
		return Breakdown{}, err
	}
	if err := u.Validate(); err != nil {
		return Breakdown{}, err
	}
	o := store.ObjectStore
	if o == nil {
		return Breakdown{}, invalid("sheet %q is a %q sheet, want object-store", store.Name, store.Kind)
	}
	brokers := max(u.Brokers, 1)
	// scale turns a count over the measured duration into one broker's month.
	scale := m.HoursPerMonth * float64(time.Hour) / float64(u.Duration) / float64(brokers)
	gb := func(bytes float64) float64 { return bytes / m.BytesPerGB }
	b := Breakdown{Label: "measured usage", Sheet: store.Name}
	req := func(item string, n int64, f Figure, field string) {
		b.add(Line{Item: item, Group: GroupTransfer, Quantity: float64(n) * scale / 1000, Unit: "1,000 requests",
			UnitUSD: f.USD, Source: cite(store, field, f)})
	}
	req(ItemPut, u.Puts, o.PutPer1000, "put_per_1000")
	req(ItemGet, u.Gets, o.GetPer1000, "get_per_1000")
	req(ItemHead, u.Heads, o.HeadPer1000, "head_per_1000")
	req(ItemList, u.Lists, o.ListPer1000, "list_per_1000")
	req(ItemDelete, u.Deletes, o.DeletePer1000, "delete_per_1000")

	threshold := int64(o.PerGBThresholdBytes.Value)
	perGB := func(item string, n, bytes int64, sizes []SizeCount, f Figure, field string) {
		billable, note := billableBytes(n, bytes, sizes, threshold)
		if threshold > 0 {
			note = fmt.Sprintf("only the part of each request above %d bytes; %s", threshold, note)
		}
		b.add(Line{Item: item, Group: GroupTransfer, Quantity: gb(billable) * scale, Unit: "GB",
			UnitUSD: f.USD, Source: cite(store, field, f), Note: note})
	}
	perGB(ItemUpload, u.Puts, u.BytesPut, u.PutSizes, o.UploadPerGB, "upload_per_gb")
	perGB(ItemRetrieval, u.Gets, u.BytesGot, u.GetSizes, o.RetrievalPerGB, "retrieval_per_gb")

	// StoredBytesAvg held all month is StoredBytesAvg GB-months, whatever
	// the measured duration; it is per broker like everything else.
	b.add(Line{Item: ItemStorage, Group: GroupStorageInstance, Quantity: gb(u.StoredBytesAvg) / float64(brokers),
		Unit: "GB-month", UnitUSD: o.StoragePerGBMonth.USD, Source: cite(store, "storage_per_gb_month", o.StoragePerGBMonth)})
	if o.CrossAZTransferPerGB.USD > 0 {
		b.add(Line{Item: ItemStoreXfer, Group: GroupTransfer, Quantity: gb(float64(u.BytesGot)) * scale, Unit: "GB",
			UnitUSD: o.CrossAZTransferPerGB.USD, Source: cite(store, "cross_az_transfer_per_gb", o.CrossAZTransferPerGB),
			Note: "every GET byte taken to cross AZs"})
	}
	if u.CrossAZBytes > 0 {
		l, err := m.crossAZLine(gb(float64(u.CrossAZBytes))*scale, "measured")
		if err != nil {
			return Breakdown{}, err
		}
		b.add(l)
	}
	return b, nil
}

// crossAZLine prices gbCrossed GB that crossed an AZ boundary.
func (m Model) crossAZLine(gbCrossed float64, what string) (Line, error) {
	n := m.Network.Network
	if n == nil {
		return Line{}, invalid("cross-AZ bytes counted but Model.Network has no network sheet")
	}
	f := n.CrossAZPerGBEachDirection
	return Line{Item: ItemCrossAZ + " (" + what + ")", Group: GroupTransfer, Quantity: gbCrossed,
		Unit: "GB", UnitUSD: f.USD * float64(m.CrossAZDirectionsBilled),
		Source: cite(m.Network, "cross_az_per_gb_each_direction", f),
		Note:   fmt.Sprintf("billed in %d direction(s)", m.CrossAZDirectionsBilled)}, nil
}

// billableBytes returns the bytes of n requests that fall above threshold.
func billableBytes(n, total int64, sizes []SizeCount, threshold int64) (float64, string) {
	if threshold <= 0 {
		return float64(total), "every byte"
	}
	if len(sizes) > 0 {
		var above float64
		for _, s := range sizes {
			if s.Bytes > threshold {
				above += float64(s.Bytes-threshold) * float64(s.Count)
			}
		}
		return above, "from the request-size list"
	}
	if n == 0 {
		return 0, "no requests"
	}
	avg := float64(total) / float64(n)
	return math.Max(0, avg-float64(threshold)) * float64(n), "every request taken at the average size (no size list)"
}

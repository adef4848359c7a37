package ledger

import (
	"cmp"
	"context"
	"github.com/kwal/kwal/topicpart"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kwal/kwal/objstore"
)

// Kind is an object-store request kind, named as S3 bills it.
type Kind string

// Request kinds.
const (
	Put    Kind = "PUT"
	Get    Kind = "GET"
	Head   Kind = "HEAD"
	Delete Kind = "DELETE"
	List   Kind = "LIST"
)

// TopicPartition names a user partition; Partition -1 means none.
// TopicPartition is the module's one topic-partition type (package topicpart).
type TopicPartition = topicpart.TopicPartition

type requestKey struct {
	kind      Kind
	component string
	tp        TopicPartition
	rack      string
}

type transferKey struct {
	component      string
	fromRack, rack string
	tp             TopicPartition
}

type counters struct {
	count, errors, bytesWritten, bytesRead atomic.Int64
}

// Ledger accumulates counts. The zero Ledger is ready to use.
type Ledger struct {
	requests  sync.Map // requestKey -> *counters
	transfers sync.Map // transferKey -> *counters (count, bytesWritten)
}

// New returns an empty ledger.
func New() *Ledger { return &Ledger{} }

func load[K comparable](m *sync.Map, k K) *counters {
	if c, ok := m.Load(k); ok {
		return c.(*counters)
	}
	c, _ := m.LoadOrStore(k, new(counters))
	return c.(*counters)
}

// RecordRequest counts one request of kind made with tags, which wrote
// bytesWritten to and read bytesRead from the store.
func (l *Ledger) RecordRequest(kind Kind, tags objstore.Tags, bytesWritten, bytesRead int64, failed bool) {
	c := load(&l.requests, requestKey{kind, tags.Component, TopicPartition{Topic: tags.Topic, Partition: tags.Partition}, tags.Rack})
	c.count.Add(1)
	c.bytesWritten.Add(bytesWritten)
	c.bytesRead.Add(bytesRead)
	if failed {
		c.errors.Add(1)
	}
}

// RecordTransfer counts bytes that component sent over the network from
// fromRack to toRack on behalf of tp (for example a follower fetching from
// its leader, or a produce request reaching a leader in another zone).
// Transfers within one rack are kept too, so the share that crossed racks
// can be reported.
func (l *Ledger) RecordTransfer(component, fromRack, toRack string, tp TopicPartition, bytes int64) {
	c := load(&l.transfers, transferKey{component, fromRack, toRack, tp})
	c.count.Add(1)
	c.bytesWritten.Add(bytes)
}

// Totals are counts of requests and bytes.
type Totals struct {
	Requests     int64 `json:"requests"`
	Errors       int64 `json:"errors"`
	BytesWritten int64 `json:"bytes_written"`
	BytesRead    int64 `json:"bytes_read"`
}

func (t *Totals) add(o Totals) {
	t.Requests += o.Requests
	t.Errors += o.Errors
	t.BytesWritten += o.BytesWritten
	t.BytesRead += o.BytesRead
}

// RequestRow is the totals of one (kind, component, partition, rack).
type RequestRow struct {
	Kind      Kind   `json:"kind"`
	Component string `json:"component,omitempty"`
	TopicPartition
	Rack string `json:"rack,omitempty"`
	Totals
}

// TransferRow is the bytes one component moved between two racks for one
// partition.
type TransferRow struct {
	Component string `json:"component,omitempty"`
	FromRack  string `json:"from_rack"`
	ToRack    string `json:"to_rack"`
	TopicPartition
	Transfers int64 `json:"transfers"`
	Bytes     int64 `json:"bytes"`
}

// CrossRack reports whether the transfer left its rack. Transfers with an
// unknown rack on either side count as crossing: a ledger that cannot tell
// should not make the classic baseline look cheaper than it is.
func (r TransferRow) CrossRack() bool {
	return r.FromRack == "" || r.ToRack == "" || r.FromRack != r.ToRack
}

// Snapshot is a ledger's totals at one moment, in a deterministic order.
type Snapshot struct {
	Requests  []RequestRow  `json:"requests"`
	Transfers []TransferRow `json:"transfers"`
	// ByKind and ByComponent sum Requests.
	ByKind      map[Kind]Totals   `json:"by_kind"`
	ByComponent map[string]Totals `json:"by_component"`
	// CrossRackBytes and SameRackBytes sum Transfers.
	CrossRackBytes int64 `json:"cross_rack_bytes"`
	SameRackBytes  int64 `json:"same_rack_bytes"`
}

// Snapshot returns the current totals. Counters recorded concurrently with
// it may or may not be included.
func (l *Ledger) Snapshot() Snapshot {
	var s Snapshot
	l.requests.Range(func(k, v any) bool {
		key, c := k.(requestKey), v.(*counters)
		s.Requests = append(s.Requests, RequestRow{
			Kind: key.kind, Component: key.component, TopicPartition: key.tp, Rack: key.rack,
			Totals: Totals{c.count.Load(), c.errors.Load(), c.bytesWritten.Load(), c.bytesRead.Load()},
		})
		return true
	})
	l.transfers.Range(func(k, v any) bool {
		key, c := k.(transferKey), v.(*counters)
		s.Transfers = append(s.Transfers, TransferRow{
			Component: key.component, FromRack: key.fromRack, ToRack: key.rack, TopicPartition: key.tp,
			Transfers: c.count.Load(), Bytes: c.bytesWritten.Load(),
		})
		return true
	})
	s.finish()
	return s
}

// finish sorts the rows and recomputes the sums.
func (s *Snapshot) finish() {
	slices.SortFunc(s.Requests, func(a, b RequestRow) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Component, b.Component),
			cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Rack, b.Rack))
	})
	slices.SortFunc(s.Transfers, func(a, b TransferRow) int {
		return cmp.Or(cmp.Compare(a.Component, b.Component), cmp.Compare(a.FromRack, b.FromRack),
			cmp.Compare(a.ToRack, b.ToRack), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	s.ByKind = map[Kind]Totals{}
	s.ByComponent = map[string]Totals{}
	for _, r := range s.Requests {
		k, c := s.ByKind[r.Kind], s.ByComponent[r.Component]
		k.add(r.Totals)
		c.add(r.Totals)
		s.ByKind[r.Kind], s.ByComponent[r.Component] = k, c
	}
	s.CrossRackBytes, s.SameRackBytes = 0, 0
	for _, r := range s.Transfers {
		if r.CrossRack() {
			s.CrossRackBytes += r.Bytes
		} else {
			s.SameRackBytes += r.Bytes
		}
	}
}

// Sub returns s minus an earlier snapshot of the same ledger: what happened
// between the two.
func (s Snapshot) Sub(earlier Snapshot) Snapshot {
	type rk struct {
		kind                   Kind
		component, topic, rack string
		p                      int32
	}
	old := map[rk]Totals{}
	for _, r := range earlier.Requests {
		old[rk{r.Kind, r.Component, r.Topic, r.Rack, r.Partition}] = r.Totals
	}
	var out Snapshot
	for _, r := range s.Requests {
		o := old[rk{r.Kind, r.Component, r.Topic, r.Rack, r.Partition}]
		r.Requests -= o.Requests
		r.Errors -= o.Errors
		r.BytesWritten -= o.BytesWritten
		r.BytesRead -= o.BytesRead
		if r.Totals != (Totals{}) {
			out.Requests = append(out.Requests, r)
		}
	}
	type tk struct {
		component, from, to, topic string
		p                          int32
	}
	oldT := map[tk]TransferRow{}
	for _, r := range earlier.Transfers {
		oldT[tk{r.Component, r.FromRack, r.ToRack, r.Topic, r.Partition}] = r
	}
	for _, r := range s.Transfers {
		o := oldT[tk{r.Component, r.FromRack, r.ToRack, r.Topic, r.Partition}]
		r.Transfers -= o.Transfers
		r.Bytes -= o.Bytes
		if r.Transfers != 0 || r.Bytes != 0 {
			out.Transfers = append(out.Transfers, r)
		}
	}
	out.finish()
	return out
}

// Store records every request that passes through it in a Ledger.
type Store struct {
	inner  objstore.Store
	ledger *Ledger
}

var (
	_ objstore.Store      = (*Store)(nil)
	_ objstore.BodyGetter = (*Store)(nil)
)

// Wrap returns inner recording into l.
func Wrap(inner objstore.Store, l *Ledger) *Store { return &Store{inner: inner, ledger: l} }

// Ledger returns the ledger the store records into.
func (s *Store) Ledger() *Ledger { return s.ledger }

// Put forwards and records a PUT of len(body) bytes (counted even when it
// fails: a failed upload still moved the bytes and S3 still bills the
// request).
func (s *Store) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	err := s.inner.Put(ctx, key, body, opts)
	s.ledger.RecordRequest(Put, objstore.TagsFrom(ctx), int64(len(body)), 0, err != nil)
	return err
}

// GetRange forwards and records a GET of the bytes returned.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	b, err := s.inner.GetRange(ctx, key, off, length)
	s.ledger.RecordRequest(Get, objstore.TagsFrom(ctx), 0, int64(len(b)), err != nil)
	return b, err
}

// GetRangeBody forwards (objstore.GetBody: a lent body when the inner
// store lends one) and records a GET of the bytes returned.
func (s *Store) GetRangeBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	b, err := objstore.GetBody(ctx, s.inner, key, off, length)
	n := int64(0)
	if err == nil {
		n = int64(b.Len())
	}
	s.ledger.RecordRequest(Get, objstore.TagsFrom(ctx), 0, n, err != nil)
	return b, err
}

// Head forwards and records a HEAD.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	info, err := s.inner.Head(ctx, key)
	s.ledger.RecordRequest(Head, objstore.TagsFrom(ctx), 0, 0, err != nil)
	return info, err
}

// Delete forwards and records a DELETE.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.inner.Delete(ctx, key)
	s.ledger.RecordRequest(Delete, objstore.TagsFrom(ctx), 0, 0, err != nil)
	return err
}

// List forwards and records a LIST.
func (s *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	p, err := s.inner.List(ctx, opts)
	s.ledger.RecordRequest(List, objstore.TagsFrom(ctx), 0, 0, err != nil)
	return p, err
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fault"
)

// ErrPartitioned is what a dial across a network partition returns.
var ErrPartitioned = errors.New("chaos: network partitioned")

// ErrPaused is what a paused broker's heartbeat returns.
var ErrPaused = errors.New("chaos: broker paused")

// Network is a partitionable broker-to-broker network: each broker dials
// through Dialer(id), and a cut refuses new dials between two brokers and
// closes the connections already open between them.
type Network struct {
	racks map[int32]string
	// resolve maps a dialed address to a broker id (false: not a broker).
	resolve func(addr string) (int32, bool)
	mu      struct {
		sync.Mutex
		cut   map[[2]int32]int // pair (low, high) -> cuts in force
		conns map[*netConn]struct{}
	}
}

// NewNetwork returns a network with nothing cut.
func NewNetwork(racks map[int32]string, resolve func(addr string) (int32, bool)) *Network {
	n := &Network{racks: racks, resolve: resolve}
	n.mu.cut = map[[2]int32]int{}
	n.mu.conns = map[*netConn]struct{}{}
	return n
}

func pair(a, b int32) [2]int32 { return [2]int32{min(a, b), max(a, b)} }

// Dialer returns broker from's DialFunc.
func (n *Network) Dialer(from int32) broker.DialFunc {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		to, ok := n.resolve(addr)
		if ok && n.isCut(from, to) {
			return nil, fmt.Errorf("dial %s (broker %d from %d): %w", addr, to, from, ErrPartitioned)
		}
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil || !ok {
			return c, err
		}
		nc := &netConn{Conn: c, n: n, pair: pair(from, to)}
		n.mu.Lock()
		n.mu.conns[nc] = struct{}{}
		n.mu.Unlock()
		if n.isCut(from, to) { // cut while dialing
			nc.Close()
			return nil, fmt.Errorf("dial %s (broker %d from %d): %w", addr, to, from, ErrPartitioned)
		}
		return nc, nil
	}
}

func (n *Network) isCut(a, b int32) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.cut[pair(a, b)] > 0
}

// Cut cuts the links of pairs until the returned heal is called.
func (n *Network) Cut(pairs [][2]int32) (heal func()) {
	n.mu.Lock()
	var doomed []*netConn
	for _, p := range pairs {
		n.mu.cut[pair(p[0], p[1])]++
	}
	for c := range n.mu.conns {
		if n.mu.cut[c.pair] > 0 {
			doomed = append(doomed, c)
		}
	}
	n.mu.Unlock()
	for _, c := range doomed {
		c.Close()
	}
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, p := range pairs {
			n.mu.cut[pair(p[0], p[1])]--
		}
	}
}

// RackPairs returns every pair with one broker in rack and one outside.
func (n *Network) RackPairs(rack string) [][2]int32 {
	var out [][2]int32
	for a, ra := range n.racks {
		for b, rb := range n.racks {
			if a < b && (ra == rack) != (rb == rack) {
				out = append(out, [2]int32{a, b})
			}
		}
	}
	return out
}

// BrokerPairs returns every pair with id in it.
func (n *Network) BrokerPairs(id int32) [][2]int32 {
	var out [][2]int32
	for b := range n.racks {
		if b != id {
			out = append(out, [2]int32{id, b})
		}
	}
	return out
}

type netConn struct {
	net.Conn
	n    *Network
	pair [2]int32
	once sync.Once
}

func (c *netConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.n.mu.Lock()
		delete(c.n.mu.conns, c)
		c.n.mu.Unlock()
	})
	return err
}

// PausableController is a broker's view of the controller whose
// heartbeats fail while Paused is set, as a stopped process's would.
type PausableController struct {
	broker.Controller
	Paused atomic.Bool
}

// Heartbeat fails with ErrPaused while paused.
func (p *PausableController) Heartbeat(id int32, brokerEpoch int64) (bool, error) {
	if p.Paused.Load() {
		return true, ErrPaused
	}
	return p.Controller.Heartbeat(id, brokerEpoch)
}

var _ broker.Controller = (*PausableController)(nil)

// StoreSwitch is an object store whose fault mode the runner switches:
// it forwards to the inner store, or to an objstore/fault decorator of
// it for the store faults.
type StoreSwitch struct {
	inner objstore.Store
	modes map[Kind]*fault.Store
	cur   atomic.Pointer[objstore.Store]
}

var (
	_ objstore.Store      = (*StoreSwitch)(nil)
	_ objstore.BodyGetter = (*StoreSwitch)(nil)
)

// NewStoreSwitch wraps inner; seed seeds the fault decorators.
func NewStoreSwitch(inner objstore.Store, seed uint64) (*StoreSwitch, error) {
	s := &StoreSwitch{inner: inner, modes: map[Kind]*fault.Store{}}
	for k, rules := range map[Kind][]fault.Rule{
		StoreDown:     {{Kind: fault.Timeout, Prob: 1, Delay: 200 * time.Millisecond}},
		StoreSlow:     {{Kind: fault.Latency, Prob: 1, Delay: 150 * time.Millisecond}},
		StoreSlowDown: {{Kind: fault.SlowDown, Prob: 1}},
		AmbiguousPut:  {{Kind: fault.AmbiguousPut, Prob: 0.5}},
	} {
		f, err := fault.New(inner, fault.Config{Seed: seed, Rules: rules})
		if err != nil {
			return nil, err
		}
		s.modes[k] = f
	}
	s.cur.Store(&inner)
	return s, nil
}

// Set switches to the faults of kind (a store Kind), or back to the
// inner store for "".
func (s *StoreSwitch) Set(kind Kind) {
	var st objstore.Store = s.inner
	if f, ok := s.modes[kind]; ok {
		st = f
	}
	s.cur.Store(&st)
}

// Injected sums the faults injected so far.
func (s *StoreSwitch) Injected() int64 {
	var n int64
	for _, f := range s.modes {
		st := f.Stats()
		n += st.InternalErrors + st.SlowDowns + st.Timeouts + st.Latencies + st.AmbiguousPuts
	}
	return n
}

func (s *StoreSwitch) store() objstore.Store { return *s.cur.Load() }

// Put implements objstore.Store.
func (s *StoreSwitch) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	return s.store().Put(ctx, key, body, opts)
}

// GetRange implements objstore.Store.
func (s *StoreSwitch) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	return s.store().GetRange(ctx, key, off, length)
}

// GetRangeBody implements objstore.BodyGetter.
func (s *StoreSwitch) GetRangeBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	return objstore.GetBody(ctx, s.store(), key, off, length)
}

// Head implements objstore.Store.
func (s *StoreSwitch) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	return s.store().Head(ctx, key)
}

// Delete implements objstore.Store.
func (s *StoreSwitch) Delete(ctx context.Context, key string) error {
	return s.store().Delete(ctx, key)
}

// List implements objstore.Store.
func (s *StoreSwitch) List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	return s.store().List(ctx, opts)
}

// DiskFS is a kafkalog.FS whose disk can fill up: while full, creating a
// file and writing to one fail with ENOSPC, as on a full file system.
// Reads, renames, removes and syncs still work.
type DiskFS struct {
	inner kafkalog.FS
	full  atomic.Bool
	fails atomic.Int64
}

var _ kafkalog.FS = (*DiskFS)(nil)

// NewDiskFS wraps inner (nil: the OS file system).
func NewDiskFS(inner kafkalog.FS) *DiskFS {
	if inner == nil {
		inner = kafkalog.OSFS{}
	}
	return &DiskFS{inner: inner}
}

// SetFull fills the disk (true) or frees space (false).
func (d *DiskFS) SetFull(full bool) { d.full.Store(full) }

// Failures counts the writes refused for want of space.
func (d *DiskFS) Failures() int64 { return d.fails.Load() }

func (d *DiskFS) noSpace(op, name string) error {
	if !d.full.Load() {
		return nil
	}
	d.fails.Add(1)
	return &fs.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
}

// Create implements kafkalog.FS.
func (d *DiskFS) Create(name string) (kafkalog.File, error) {
	if err := d.noSpace("open", name); err != nil {
		return nil, err
	}
	f, err := d.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return diskFile{File: f, d: d, name: name}, nil
}

// Open implements kafkalog.FS.
func (d *DiskFS) Open(name string) (kafkalog.File, error) {
	f, err := d.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return diskFile{File: f, d: d, name: name}, nil
}

// Rename implements kafkalog.FS.
func (d *DiskFS) Rename(oldname, newname string) error { return d.inner.Rename(oldname, newname) }

// Remove implements kafkalog.FS.
func (d *DiskFS) Remove(name string) error { return d.inner.Remove(name) }

// ReadDir implements kafkalog.FS.
func (d *DiskFS) ReadDir(dir string) ([]string, error) { return d.inner.ReadDir(dir) }

// MkdirAll implements kafkalog.FS.
func (d *DiskFS) MkdirAll(dir string) error { return d.inner.MkdirAll(dir) }

// SyncDir implements kafkalog.FS.
func (d *DiskFS) SyncDir(dir string) error { return d.inner.SyncDir(dir) }

type diskFile struct {
	kafkalog.File
	d    *DiskFS
	name string
}

func (f diskFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.d.noSpace("write", f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

// ErrStoreCut is what a broker cut from the object store gets.
var ErrStoreCut = errors.New("chaos: broker cut from the object store")

// StoreGate cuts one broker from the object store: while cut, every
// request of the stores it wraps fails at once, as a refused connection.
type StoreGate struct{ cut atomic.Bool }

// SetCut cuts (true) or heals (false).
func (g *StoreGate) SetCut(cut bool) { g.cut.Store(cut) }

// Wrap returns s behind the gate.
func (g *StoreGate) Wrap(s objstore.Store) objstore.Store { return gatedStore{inner: s, g: g} }

type gatedStore struct {
	inner objstore.Store
	g     *StoreGate
}

var (
	_ objstore.Store      = gatedStore{}
	_ objstore.BodyGetter = gatedStore{}
)

func (s gatedStore) check(op, key string) error {
	if s.g.cut.Load() {
		return fmt.Errorf("%s %q: %w", op, key, ErrStoreCut)
	}
	return nil
}

func (s gatedStore) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	if err := s.check("put", key); err != nil {
		return err
	}
	return s.inner.Put(ctx, key, body, opts)
}

func (s gatedStore) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	if err := s.check("get", key); err != nil {
		return nil, err
	}
	return s.inner.GetRange(ctx, key, off, length)
}

func (s gatedStore) GetRangeBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	if err := s.check("get", key); err != nil {
		return nil, err
	}
	return objstore.GetBody(ctx, s.inner, key, off, length)
}

func (s gatedStore) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := s.check("head", key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	return s.inner.Head(ctx, key)
}

func (s gatedStore) Delete(ctx context.Context, key string) error {
	if err := s.check("delete", key); err != nil {
		return err
	}
	return s.inner.Delete(ctx, key)
}

func (s gatedStore) List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	if err := s.check("list", opts.Prefix); err != nil {
		return objstore.Page{}, err
	}
	return s.inner.List(ctx, opts)
}

// ErrMetadataDown is the error the metadata Kafka closes connections with
// while down.
var ErrMetadataDown = errors.New("chaos: metadata Kafka down")

// MetadataSwitch takes a kfake metadata Kafka down and up: while down it
// closes the connection of every request it is sent (a client sees what
// it sees of a Kafka that is down: connections that end).
type MetadataSwitch struct {
	down    atomic.Bool
	refused atomic.Int64
}

// NewMetadataSwitch installs the switch in c, up.
func NewMetadataSwitch(c *kfake.Cluster) *MetadataSwitch {
	m := &MetadataSwitch{}
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if m.down.Load() {
			m.refused.Add(1)
			return nil, ErrMetadataDown, true
		}
		return nil, nil, false
	})
	return m
}

// SetDown takes the metadata Kafka down (true) or up.
func (m *MetadataSwitch) SetDown(down bool) { m.down.Store(down) }

// Refused counts the requests refused while down.
func (m *MetadataSwitch) Refused() int64 { return m.refused.Load() }

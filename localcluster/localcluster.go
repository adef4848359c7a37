package localcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/latency"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/objstore/storeurl"
	"github.com/kwal/kwal/rwnode"
)

// Config describes an in-process cluster on loopback, as
// `kwal demo` and the benchmarks run it.
type Config struct {
	// Racks has one entry per broker (ids 1..n). Default az1, az2, az2.
	Racks []string
	// Dir holds every broker's log.dirs and, by default, the object store.
	Dir string
	// StorageURL is remote.wal.storage.url; empty means file://<Dir>/remote-wal
	// (file://<Dir>/remote-wal-{rack} with StorePerRack).
	StorageURL string
	// StorePerRack gives every rack its own store, as the KIP puts an S3
	// Express One Zone bucket in each AZ: StorageURL is then a template
	// whose {rack} is replaced by each rack name (rwnode.StoreSet); each
	// store is behind the latency model.
	StorePerRack bool
	// LatencyModel wraps the store in objstore/latency: "s3express"
	// (default), "s3standard" or "none".
	LatencyModel string
	// MetadataBootstrap is remote.wal.metadata.bootstrap.servers; empty
	// starts one embedded kfake shared by all brokers.
	MetadataBootstrap string
	// RemoteWAL tunes every broker's remote WAL (the remote.wal.* keys).
	RemoteWAL broker.RemoteWALConfig
	// Tweak, if set, adjusts each broker's config before it starts.
	Tweak func(*broker.Config)
	// WrapStore, if set, wraps the shared store (after the latency model;
	// not the rack stores of StorePerRack) before any broker uses it:
	// fault harnesses put their decorator here.
	WrapStore func(objstore.Store) objstore.Store
	// WrapBrokerStore, if set, wraps the store one broker's remote WAL
	// uploads to and reads from (after WrapStore), at each start of that
	// broker: fault harnesses cut one broker from the store here.
	WrapBrokerStore func(id int32, s objstore.Store) objstore.Store
	// Liveness, if set, turns on session tracking in the controller
	// (heartbeats, fencing, elections; see broker/doc.go), checked every
	// quarter session timeout until Close.
	Liveness *broker.LivenessConfig
	Logger   *slog.Logger
}

// Cluster is a running in-process cluster.
type Cluster struct {
	Brokers     []*broker.Broker
	Ledgers     []*ledger.Ledger
	Replicators []*rwnode.RemoteWALReplicator
	Controller  *broker.MemController
	// Store is the shared object store (with its latency model); with
	// StorePerRack, the store of the first broker's rack.
	Store objstore.Store
	// RackStores are the stores by rack with StorePerRack, else nil.
	RackStores map[string]objstore.Store
	// Model is the latency model in force.
	Model           latency.Model
	parts           *rwnode.RemoteWALParts
	shared          *rwnode.RemoteWALParts // what every broker's replicator gets
	configs         []broker.Config        // as each broker was started, for RestartBroker
	wrapBrokerStore func(int32, objstore.Store) objstore.Store
	stop            chan struct{}
	live            sync.WaitGroup
}

// Start starts the brokers, sharing one controller, one object
// store and one metadata Kafka cluster.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	if len(cfg.Racks) == 0 {
		cfg.Racks = []string{"az1", "az2", "az2"}
	}
	if cfg.Dir == "" {
		return nil, errors.New("localcluster: needs a directory")
	}
	if cfg.LatencyModel == "" {
		cfg.LatencyModel = "s3express"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	model, err := latency.Preset(cfg.LatencyModel)
	if err != nil {
		return nil, err
	}
	c = &Cluster{Controller: broker.NewMemController(nil, 1000), Model: model, stop: make(chan struct{}), wrapBrokerStore: cfg.WrapBrokerStore}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	base := broker.Config{
		LogDir:     filepath.Join(cfg.Dir, "shared"),
		Controller: c.Controller,
		RemoteWAL:  cfg.RemoteWAL,
		Logger:     cfg.Logger,
	}
	base.RemoteWAL.SystemEnable = true
	base.RemoteWAL.StorageURL = cfg.StorageURL
	if cfg.StorePerRack {
		base.RemoteWAL.StorageURL = "mem://" // unused: the rack stores are opened below
	}
	base.RemoteWAL.MetadataBootstrapServers = cfg.MetadataBootstrap
	if c.parts, err = rwnode.OpenRemoteWALParts(ctx, &base, nil); err != nil {
		return c, err
	}
	slow := func(s objstore.Store) (objstore.Store, error) {
		if cfg.LatencyModel == "none" {
			return s, nil
		}
		return latency.New(s, model, clock.Real{}, 1176)
	}
	shared := &rwnode.RemoteWALParts{Bootstrap: c.parts.Bootstrap}
	if cfg.StorePerRack {
		if c.RackStores, err = openRackStores(ctx, cfg, slow); err != nil {
			return c, err
		}
		c.Store = c.RackStores[cfg.Racks[0]]
		shared.Stores = rwnode.NewStoreSet(c.RackStores, "", nil)
	} else if c.Store, err = slow(c.parts.Store); err != nil {
		return c, err
	}
	if cfg.WrapStore != nil {
		c.Store = cfg.WrapStore(c.Store)
	}
	shared.Store = c.Store
	c.shared = shared
	for i, rack := range cfg.Racks {
		l := ledger.New()
		bc := broker.Config{
			BrokerID: int32(i + 1), Rack: rack, Listener: "127.0.0.1:0",
			LogDir:     filepath.Join(cfg.Dir, fmt.Sprintf("broker-%d", i+1)),
			Controller: c.Controller, Ledger: l, RemoteWAL: base.RemoteWAL,
			Logger: cfg.Logger,
		}
		if cfg.Tweak != nil {
			cfg.Tweak(&bc)
		}
		c.Brokers, c.Replicators, c.configs = append(c.Brokers, nil), append(c.Replicators, nil), append(c.configs, bc)
		c.Ledgers = append(c.Ledgers, l)
		if err := c.startBroker(i); err != nil {
			return c, err
		}
	}
	if cfg.Liveness != nil {
		lc := *cfg.Liveness
		if lc.Logger == nil {
			lc.Logger = cfg.Logger
		}
		c.Controller.EnableLiveness(lc)
		c.live.Add(1)
		go func() {
			defer c.live.Done()
			c.Controller.RunLiveness(c.stop)
		}()
	}
	return c, nil
}

// openRackStores opens one store per rack from the StorageURL template.
func openRackStores(ctx context.Context, cfg Config, slow func(objstore.Store) (objstore.Store, error)) (map[string]objstore.Store, error) {
	tmpl := cfg.StorageURL
	if tmpl == "" {
		abs, err := filepath.Abs(filepath.Join(cfg.Dir, "remote-wal-"+rwnode.RackTemplate))
		if err != nil {
			return nil, err
		}
		tmpl = "file://" + abs
	}
	if !strings.Contains(tmpl, rwnode.RackTemplate) {
		return nil, fmt.Errorf("localcluster: a store per rack needs %s in the storage URL %q", rwnode.RackTemplate, tmpl)
	}
	stores := map[string]objstore.Store{}
	for _, rack := range cfg.Racks {
		if stores[rack] != nil {
			continue
		}
		u := strings.ReplaceAll(tmpl, rwnode.RackTemplate, rack)
		st, err := storeurl.Open(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("localcluster: the store of rack %s (%s): %w", rack, u, err)
		}
		if stores[rack], err = slow(st); err != nil {
			return nil, err
		}
	}
	return stores, nil
}

// startBroker starts broker i (index into Brokers) from its config, with
// a new replicator.
func (c *Cluster) startBroker(i int) error {
	bc := c.configs[i]
	parts := c.shared
	if c.wrapBrokerStore != nil && parts.Store != nil {
		own := *parts
		own.Store = c.wrapBrokerStore(bc.BrokerID, parts.Store)
		parts = &own
	}
	r, err := rwnode.NewRemoteWALReplicatorFor(&bc, parts, bc.Logger)
	if err != nil {
		return err
	}
	bc.Replicator = r
	b, err := broker.New(bc)
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r.Close(ctx)
		return err
	}
	c.Brokers[i], c.Replicators[i] = b, r
	c.pinPorts(i, b)
	return nil
}

// pinPorts makes broker i's later lives bind the ports its first one
// picked ("127.0.0.1:0"), as a restarted Kafka broker listens where its
// static config says: clients and peers know a broker by its address,
// and a client whose every known address has moved (each broker
// restarted once since its last metadata refresh, its seeds included)
// could never reach the cluster again.
func (c *Cluster) pinPorts(i int, b *broker.Broker) {
	bc := &c.configs[i]
	if len(bc.Listeners) == 0 {
		if port0(bc.Listener) {
			bc.Listener = b.Addr()
		}
		return
	}
	ls := slices.Clone(bc.Listeners)
	for j := range ls {
		if addr, ok := b.ListenerAddr(ls[j].Name); ok && port0(ls[j].Addr) {
			ls[j].Addr = addr
		}
	}
	bc.Listeners = ls
}

// port0 says whether addr asks for any free port.
func port0(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// StopBroker stops broker id as a crash would look to the others: it
// stops serving and heartbeating at once, nothing is handed over and its
// remote WAL uploads nothing more; with Liveness the controller fences it
// after the session timeout. (Its log is closed cleanly: what it had
// appended stays on its disk, as the page cache would keep it.)
func (c *Cluster) StopBroker(id int32) error {
	for i, b := range c.Brokers {
		if b == nil || b.Info().ID != id {
			continue
		}
		err := b.Close()
		// A crash uploads nothing more: the write path gets no time to
		// drain what it holds.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if rerr := c.Replicators[i].Close(ctx); rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = errors.Join(err, rerr)
		}
		c.Brokers[i], c.Replicators[i] = nil, nil
		return err
	}
	return fmt.Errorf("localcluster: no running broker %d", id)
}

// RestartBroker starts a stopped broker again on its log directory and
// its addresses (the ports its first life bound): a new life (broker
// epoch) that registers and follows. It fails if another socket took a
// port meanwhile; callers may retry.
func (c *Cluster) RestartBroker(id int32) error {
	for i, bc := range c.configs {
		if bc.BrokerID == id && c.Brokers[i] == nil {
			return c.startBroker(i)
		}
	}
	return fmt.Errorf("localcluster: broker %d is not stopped", id)
}

// Bootstrap returns the running brokers' addresses.
func (c *Cluster) Bootstrap() []string {
	var out []string
	for _, b := range c.Brokers {
		if b != nil {
			out = append(out, b.Addr())
		}
	}
	return out
}

// MetadataBootstrap is the Kafka holding __remote_wal_log_metadata.
func (c *Cluster) MetadataBootstrap() []string { return c.parts.Bootstrap }

// BackendStore is the store StorageURL opened, under the latency model and
// WrapStore; nil with StorePerRack (RackStores are the racks' own).
func (c *Cluster) BackendStore() objstore.Store {
	if c.parts == nil {
		return nil
	}
	return c.parts.Store
}

// Broker returns the broker with id, or nil.
func (c *Cluster) Broker(id int32) *broker.Broker {
	for _, b := range c.Brokers {
		if b != nil && b.Info().ID == id {
			return b
		}
	}
	return nil
}

// Close stops the brokers, then their replicators, then the shared parts.
func (c *Cluster) Close() error {
	var errs []error
	if c.stop != nil {
		close(c.stop)
		c.live.Wait()
		c.stop = nil
	}
	for _, b := range c.Brokers {
		if b != nil {
			errs = append(errs, b.Close())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range c.Replicators {
		if r != nil {
			errs = append(errs, r.Close(ctx))
		}
	}
	if c.parts != nil {
		c.parts.Close()
	}
	return errors.Join(errs...)
}

package localcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
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
	Tweak  func(*broker.Config)
	Logger *slog.Logger
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
	Model latency.Model
	parts *rwnode.RemoteWALParts
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
	c = &Cluster{Controller: broker.NewMemController(nil, 1000), Model: model}
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
	if c.parts, err = rwnode.OpenRemoteWALParts(ctx, &base); err != nil {
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
	shared.Store = c.Store
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
		r, err := rwnode.NewRemoteWALReplicatorFor(&bc, shared, cfg.Logger)
		if err != nil {
			return c, err
		}
		c.Replicators = append(c.Replicators, r)
		bc.Replicator = r
		b, err := broker.New(bc)
		if err != nil {
			return c, err
		}
		c.Brokers = append(c.Brokers, b)
		c.Ledgers = append(c.Ledgers, l)
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

// Bootstrap returns the brokers' addresses.
func (c *Cluster) Bootstrap() []string {
	var out []string
	for _, b := range c.Brokers {
		out = append(out, b.Addr())
	}
	return out
}

// MetadataBootstrap is the Kafka holding __remote_wal_log_metadata.
func (c *Cluster) MetadataBootstrap() []string { return c.parts.Bootstrap }

// Broker returns the broker with id, or nil.
func (c *Cluster) Broker(id int32) *broker.Broker {
	for _, b := range c.Brokers {
		if b.Info().ID == id {
			return b
		}
	}
	return nil
}

// Close stops the brokers, then their replicators, then the shared parts.
func (c *Cluster) Close() error {
	var errs []error
	for _, b := range c.Brokers {
		errs = append(errs, b.Close())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range c.Replicators {
		errs = append(errs, r.Close(ctx))
	}
	if c.parts != nil {
		c.parts.Close()
	}
	return errors.Join(errs...)
}

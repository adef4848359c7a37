package localcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/latency"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/rwnode"
)

// Config describes an in-process cluster on loopback, as
// `kwal demo` and the benchmarks run it.
type Config struct {
	// Racks has one entry per broker (ids 1..n). Default az1, az2, az2.
	Racks []string
	// Dir holds every broker's log.dirs and, by default, the object store.
	Dir string
	// StorageURL is remote.wal.storage.url; empty means file://<Dir>/remote-wal.
	StorageURL string
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
	// Store is the shared object store (with its latency model).
	Store objstore.Store
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
	base.RemoteWAL.MetadataBootstrapServers = cfg.MetadataBootstrap
	if c.parts, err = rwnode.OpenRemoteWALParts(ctx, &base); err != nil {
		return c, err
	}
	if cfg.LatencyModel != "none" {
		slow, err := latency.New(c.parts.Store, model, clock.Real{}, 1176)
		if err != nil {
			return c, err
		}
		c.Store = slow
	} else {
		c.Store = c.parts.Store
	}
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
		r, err := rwnode.NewRemoteWALReplicatorFor(&bc, &rwnode.RemoteWALParts{Store: c.Store, Bootstrap: c.parts.Bootstrap}, cfg.Logger)
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

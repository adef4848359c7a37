package rwnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/combiner"
	"github.com/kwal/kwal/follower"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/remotewal"
)

// RemoteWALParts are the shared parts a remote-WAL broker runs against.
// Brokers of one cluster must share both: one object store and one Kafka
// cluster for __remote_wal_log_metadata.
type RemoteWALParts struct {
	Store objstore.Store
	// Stores, when set, is one store per rack (remote.wal.storage.url.<rack>
	// or a {rack} template); Store is then the default one, if any.
	Stores    *StoreSet
	Bootstrap []string
	// SelfHosted: Bootstrap names this cluster's own brokers, which then
	// host the metadata topic (a classic, compacted topic of the cluster);
	// the replicator must then be built after the broker listens
	// (NewDeferredReplicator).
	SelfHosted bool
	// MetadataReplicationFactor is the metadata topic's replication factor
	// at creation: 0 for the metadata package's default (1, a kfake),
	// min(3, the cluster's brokers) when SelfHosted.
	MetadataReplicationFactor int16
	// Close releases what OpenRemoteWALParts started (the embedded
	// metadata cluster).
	Close func()
}

// OpenRemoteWALParts opens what cfg.RemoteWAL names: the object store of
// remote.wal.storage.url (default: file://<log.dirs>/remote-wal) and the
// Kafka of remote.wal.metadata.bootstrap.servers (default: an embedded
// kfake in <log.dirs>/metadata-kfake). The defaults suit one broker on one
// laptop; a multi-process cluster must point every broker at the same
// store and Kafka.
//
// cluster is cluster.brokers: a bootstrap list naming one of them (or this
// broker's listener) makes the parts SelfHosted.
func OpenRemoteWALParts(ctx context.Context, cfg *broker.Config, cluster []broker.BrokerInfo) (*RemoteWALParts, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rw := cfg.RemoteWAL
	parts := &RemoteWALParts{Close: func() {}}
	var err error
	if parts.Store, parts.Stores, err = openRemoteWALStores(ctx, cfg); err != nil {
		return nil, err
	}
	if bs := broker.SplitBootstrap(rw.MetadataBootstrapServers); len(bs) > 0 {
		parts.Bootstrap = bs
		if broker.NamesCluster(bs, cfg.Listener, cluster) {
			parts.SelfHosted = true
			parts.MetadataReplicationFactor = int16(min(3, max(len(cluster), 1)))
		}
		return parts, nil
	}
	emb, err := metadata.StartEmbedded(filepath.Join(cfg.LogDir, "metadata-kfake"), cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("embedded metadata Kafka: %w", err)
	}
	parts.Bootstrap = emb.Bootstrap()
	parts.Close = emb.Close
	return parts, nil
}

// NewRemoteWALReplicatorFor builds a broker's replicator from its config
// (the remote.wal.* keys) over shared parts; the store is wrapped with the
// broker's ledger so every request is counted.
func NewRemoteWALReplicatorFor(cfg *broker.Config, parts *RemoteWALParts, logger *slog.Logger) (*RemoteWALReplicator, error) {
	if parts == nil || (parts.Store == nil && parts.Stores == nil) {
		return nil, errors.New("rwnode: remote WAL needs a store")
	}
	rw := cfg.RemoteWAL
	l := cfg.Ledger
	if l == nil {
		l = ledger.New()
		cfg.Ledger = l
	}
	if cfg.Stages == nil {
		cfg.Stages = stagehist.New()
	}
	sec, err := rw.MetadataClient()
	if err != nil {
		return nil, err
	}
	var stores StoreResolver
	if parts.Stores != nil {
		stores = newWrappedStores(parts.Stores, func(s objstore.Store) objstore.Store { return ledger.Wrap(s, l) })
	}
	return NewRemoteWALReplicator(RemoteWALReplicatorConfig{
		Stores:   stores,
		BrokerID: cfg.BrokerID,
		Rack:     cfg.Rack,
		Store:    ledger.Wrap(parts.Store, l),
		Metadata: metadata.TopicConfig{Bootstrap: parts.Bootstrap, ReplicationFactor: parts.MetadataReplicationFactor, Security: sec},
		Tasks:    remotewal.Config{ThreadPoolSize: rw.ThreadPoolSize, Interval: rw.CombinerTaskInterval / 2},
		Combiner: combiner.Config{
			ThreadPoolSize: rw.CombinerThreadPoolSize,
			QueueSlices:    rw.CombinerQueueSize,
			Interval:       rw.CombinerTaskInterval,
			UploadBytes:    rw.CombinerTaskUploadBytes,
			UploadTimeout:  rw.UploadTimeout,
		},
		Follower:     follower.Config{FallbackAfter: cfg.FollowerFallbackAfter()},
		Ledger:       l,
		Observer:     cfg.Stages,
		Retention:    metadata.RetentionPolicy{Retention: rw.Retention},
		ReadyTimeout: rw.MetadataBootstrapTimeout,
		Clock:        cfg.Clock,
		Logger:       logger,
	})
}

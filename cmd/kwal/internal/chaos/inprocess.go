package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/retry"
	"github.com/kwal/kwal/localcluster"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// inproc is the in-process cluster: a localcluster with a partitionable
// broker-to-broker dialer, pausable heartbeats, a switchable object-store
// fault decorator, a gate per broker in front of the store, a log file
// layer per broker that can run out of space, and its own embedded
// metadata Kafka that can go down.
type inproc struct {
	cfg   Config
	lc    *localcluster.Cluster
	emb   *metadata.Embedded
	meta  *MetadataSwitch
	net   *Network
	store *StoreSwitch
	ctrls map[int32]*PausableController
	disks map[int32]*DiskFS
	gates map[int32]*StoreGate
}

var _ cluster = (*inproc)(nil)

func startInProcess(ctx context.Context, cfg Config) (_ *inproc, err error) {
	r := &inproc{cfg: cfg, ctrls: map[int32]*PausableController{}, disks: map[int32]*DiskFS{}, gates: map[int32]*StoreGate{}}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	racks := map[int32]string{}
	for i, rack := range cfg.Racks {
		id := int32(i + 1)
		racks[id] = rack
		r.disks[id] = NewDiskFS(nil)
		r.gates[id] = &StoreGate{}
	}
	if r.emb, err = metadata.StartEmbedded(filepath.Join(cfg.Dir, "metadata-kfake"), cfg.Logger); err != nil {
		return nil, fmt.Errorf("chaos: starting the metadata Kafka: %w", err)
	}
	r.meta = NewMetadataSwitch(r.emb.Cluster())
	// Addresses resolve through the controller's registrations (a
	// restarted broker listens on the port of its first life).
	var ctrl *broker.MemController
	r.net = NewNetwork(racks, func(addr string) (int32, bool) {
		if ctrl == nil {
			return 0, false
		}
		for _, b := range ctrl.Brokers() {
			if net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) == addr {
				return b.ID, true
			}
		}
		return 0, false
	})
	heartbeat := cfg.SessionTimeout / 8
	addrs, err := listenPorts(len(cfg.Racks))
	if err != nil {
		return nil, err
	}
	lc, err := localcluster.Start(ctx, localcluster.Config{
		Racks: cfg.Racks, Dir: cfg.Dir, LatencyModel: "none", Logger: cfg.Logger,
		// The store is in memory: its bytes never touch the file system.
		StorageURL:        "mem://",
		MetadataBootstrap: strings.Join(r.emb.Bootstrap(), ","),
		RemoteWAL:         broker.RemoteWALConfig{CombinerTaskInterval: 5 * time.Millisecond, UploadTimeout: cfg.UploadTimeout},
		WrapStore: func(s objstore.Store) objstore.Store {
			sw, err := NewStoreSwitch(s, cfg.Seed)
			if err != nil {
				panic(err) // the rules are constants
			}
			r.store = sw
			return sw
		},
		WrapBrokerStore: func(id int32, s objstore.Store) objstore.Store {
			return r.gates[id].Wrap(s)
		},
		Tweak: func(bc *broker.Config) {
			ctrl = bc.Controller.(*broker.MemController)
			pc := &PausableController{Controller: bc.Controller}
			r.ctrls[bc.BrokerID] = pc
			bc.Controller = pc
			bc.Listener = net.JoinHostPort("127.0.0.1", strconv.Itoa(addrs[bc.BrokerID-1]))
			bc.Dial = r.net.Dialer(bc.BrokerID)
			bc.LogFS = r.disks[bc.BrokerID]
			bc.BrokerHeartbeatInterval = heartbeat
			bc.BrokerSessionTimeout = cfg.SessionTimeout
			bc.LeaderImbalanceCheckInterval = cfg.SessionTimeout * 5 / 4
			bc.ReplicaLagTimeMax = cfg.SessionTimeout
			bc.ReplicaFetchWaitMax = 50 * time.Millisecond
			bc.ReplicaFetchBackoff = 20 * time.Millisecond
			bc.MinInsyncReplicas = 2
			bc.DefaultReplicationFactor = int16(len(cfg.Racks))
			if cfg.tweakBroker != nil {
				cfg.tweakBroker(bc)
			}
		},
		Liveness: &broker.LivenessConfig{SessionTimeout: cfg.SessionTimeout, Logger: cfg.Logger},
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: starting the cluster: %w", err)
	}
	r.lc = lc
	for _, t := range Topics {
		spec := broker.TopicSpec{Name: t, Partitions: partitions, ReplicationFactor: int16(len(cfg.Racks)),
			Configs: map[string]string{"min.insync.replicas": "2"}}
		if t == "remotewal" {
			spec.Configs[broker.TopicConfigRemoteWAL] = "true"
		}
		if _, err := lc.Controller.CreateTopic(spec); err != nil {
			return nil, fmt.Errorf("chaos: creating %s: %w", t, err)
		}
	}
	if !poll(ctx, time.Now().Add(30*time.Second), func() bool {
		for _, tp := range tps() {
			if r.leader(tp) == nil {
				return false
			}
		}
		return true
	}) {
		return nil, errors.New("chaos: partitions have no leaders 30 s after creation")
	}
	return r, nil
}

func (r *inproc) clientOpts() []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(r.lc.Bootstrap()...)} }

func (r *inproc) metadataBootstrap() []string { return r.emb.Bootstrap() }

func (r *inproc) auditStores() map[string]objstore.Store {
	return map[string]objstore.Store{"": r.store.inner}
}

func (r *inproc) storeFaults() int64 { return r.store.Injected() }

func (r *inproc) logFloods(time.Duration) ([]string, int) { return nil, 0 }

func (r *inproc) close() {
	if r.lc != nil {
		r.lc.Close()
	}
	if r.emb != nil {
		r.emb.Close()
	}
}

// leader returns the broker leading tp as the controller says, if it runs
// and knows it leads.
func (r *inproc) leader(tp broker.TopicPartition) *broker.Broker {
	ts, ok := r.lc.Controller.Topic(tp.Topic)
	if !ok || int(tp.Partition) >= len(ts.Partitions) {
		return nil
	}
	b := r.lc.Broker(ts.Partitions[tp.Partition].Leader)
	if b == nil {
		return nil
	}
	if st, ok := b.PartitionStatus(tp); ok && st.IsLeader {
		return b
	}
	return nil
}

func (r *inproc) start(e Event) (undo func()) {
	log := r.cfg.Logger
	restart := func() { r.restart(e.Broker) }
	switch e.Kind {
	case KillBroker:
		if err := r.lc.StopBroker(e.Broker); err != nil {
			log.Warn("chaos: kill", "broker", e.Broker, "err", err)
		}
		return restart
	case PauseBroker:
		r.ctrls[e.Broker].Paused.Store(true)
		heal := r.net.Cut(r.net.BrokerPairs(e.Broker))
		return func() {
			heal()
			r.ctrls[e.Broker].Paused.Store(false)
		}
	case DiskFull:
		r.disks[e.Broker].SetFull(true)
		return func() {
			r.disks[e.Broker].SetFull(false)
			if err := r.lc.StopBroker(e.Broker); err != nil {
				log.Warn("chaos: stopping the broker whose disk was full", "broker", e.Broker, "err", err)
			}
			restart()
		}
	case PartitionPair:
		return r.net.Cut([][2]int32{{e.Broker, e.Peer}})
	case PartitionRack:
		return r.net.Cut(r.net.RackPairs(e.Rack))
	case PartitionStore:
		r.gates[e.Broker].SetCut(true)
		return func() { r.gates[e.Broker].SetCut(false) }
	case StoreDown, StoreSlow, StoreSlowDown, AmbiguousPut:
		r.store.Set(e.Kind)
		return func() { r.store.Set("") }
	case MetadataDown:
		r.meta.SetDown(true)
		return func() { r.meta.SetDown(false) }
	}
	panic(fmt.Sprintf("chaos: unknown fault kind %q", e.Kind))
}

// restart starts broker id again, retrying every 100 ms while it refuses
// to (a broker needs its metadata Kafka to start, and it may be down), as
// a supervisor would (supervise); it gives up after Settle. The pause
// does not grow: in-process schedules are a second long.
func (r *inproc) restart(id int32) {
	supervise(r.cfg.Logger, id, r.cfg.Settle, retry.Backoff{Base: 100 * time.Millisecond, Max: 100 * time.Millisecond}, func() error {
		return r.lc.RestartBroker(id)
	})
}

// converge waits until every partition has a leader whose followers all
// hold its log end and whose high watermark is its log end, and returns
// the high watermarks.
func (r *inproc) converge(ctx context.Context, deadline time.Time) (map[broker.TopicPartition]int64, error) {
	hws := map[broker.TopicPartition]int64{}
	var why string
	ok := poll(ctx, deadline, func() bool {
		for i, b := range r.lc.Brokers {
			if b == nil {
				why = fmt.Sprintf("broker %d is not running", i+1)
				return false
			}
		}
		for _, tp := range tps() {
			l := r.leader(tp)
			if l == nil {
				why = fmt.Sprintf("%s has no leader", tp)
				return false
			}
			st, _ := l.PartitionStatus(tp)
			if st.HighWatermark != st.LogEnd {
				why = fmt.Sprintf("%s: high watermark %d, log end %d on leader %d", tp, st.HighWatermark, st.LogEnd, l.Info().ID)
				return false
			}
			for _, b := range r.lc.Brokers {
				if b == nil || b == l {
					continue
				}
				fs, ok := b.PartitionStatus(tp)
				if !ok || fs.LogEnd != st.LogEnd {
					why = fmt.Sprintf("%s: follower %d at %d, leader %d at %d", tp, b.Info().ID, fs.LogEnd, l.Info().ID, st.LogEnd)
					return false
				}
			}
			// Caught up is not enough: a replica that stays out of the
			// ISR (an unusable log dir, a leader that keeps proposing a
			// fenced replica) is a broker that looks healthy and is not.
			if ts, ok := r.lc.Controller.Topic(tp.Topic); ok {
				ps := ts.Partitions[tp.Partition]
				if len(ps.ISR) != len(ps.Replicas) {
					why = fmt.Sprintf("%s: ISR %v of replicas %v with every follower caught up", tp, ps.ISR, ps.Replicas)
					return false
				}
			}
			hws[tp] = st.HighWatermark
		}
		return true
	})
	if !ok {
		return hws, fmt.Errorf("converged: replicas did not converge within %v after the faults: %s", r.cfg.Settle, why)
	}
	return hws, nil
}

// compareReplicas checks that every follower's log is byte-identical to
// its leader's over their common offsets, batch by batch (converge has
// made every log end the leader's).
func (r *inproc) compareReplicas(map[broker.TopicPartition]int64) (int, error) {
	n := 0
	for _, tp := range tps() {
		// Leadership may still move after convergence (a returning
		// preferred leader takes its partitions back): wait for the
		// partition to have a leader again, as long as convergence may.
		var l *broker.Broker
		if !poll(context.Background(), time.Now().Add(r.cfg.Settle), func() bool { l = r.leader(tp); return l != nil }) {
			return n, fmt.Errorf("replicas: %s has no leader %v after the faults converged", tp, r.cfg.Settle)
		}
		ll, _ := l.PartitionLog(tp)
		for _, b := range r.lc.Brokers {
			if b == nil || b == l {
				continue
			}
			fl, ok := b.PartitionLog(tp)
			if !ok {
				continue
			}
			if err := sameLogs(ll, fl); err != nil {
				return n, fmt.Errorf("replicas: %s on broker %d differs from leader %d: %v", tp, b.Info().ID, l.Info().ID, err)
			}
			n++
		}
	}
	return n, nil
}

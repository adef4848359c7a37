package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/ledger"
)

// Defaults, Kafka's where Kafka has one.
const (
	DefaultNumPartitions           = 1
	DefaultReplicationFactor       = 1
	DefaultMinInsyncReplicas       = 1
	DefaultReplicaLagTimeMax       = 30 * time.Second       // replica.lag.time.max.ms
	DefaultReplicaFetchWaitMax     = 500 * time.Millisecond // replica.fetch.wait.max.ms
	DefaultReplicaFetchMaxBytes    = 1 << 20                // replica.fetch.max.bytes
	DefaultReplicaFetchResponseMax = 10 << 20               // replica.fetch.response.max.bytes
	DefaultSocketRequestMaxBytes   = 100 << 20              // socket.request.max.bytes
	// DefaultReplicaFetchBackoff is replica.fetch.backoff.ms. Kafka's default
	// is 1 s; the harness uses 100 ms because its controller tells a new
	// topic's followers about it before its leaders, and a follower's first
	// OffsetForLeaderEpoch then fails once and would otherwise stall the
	// topic's first acks=all produces for a second.
	DefaultReplicaFetchBackoff = 100 * time.Millisecond
	DefaultClusterID           = "kwal-cluster"
	DefaultListener            = "127.0.0.1:9092"
	DefaultMaxConnections      = math.MaxInt32    // max.connections
	DefaultMaxConnectionsPerIP = math.MaxInt32    // max.connections.per.ip
	DefaultConnectionsMaxIdle  = 10 * time.Minute // connections.max.idle.ms
	// DefaultRequestReadTimeout is kwal.socket.request.read.timeout.ms:
	// once a request's first byte has arrived, the whole request must
	// arrive within this long or the connection is closed (Kafka has no such
	// key; its idle timeout alone lets a slow sender hold a connection).
	DefaultRequestReadTimeout = 30 * time.Second
	// DefaultConnectionMaxBufferedBytes is
	// kwal.connection.max.buffered.bytes: request and response bytes one
	// connection may hold while pipelined responses wait.
	DefaultConnectionMaxBufferedBytes = 128 << 20
	DefaultCombinerThreadPoolSize     = 2
	DefaultCombinerQueueSize          = 1024
	DefaultCombinerTaskInterval       = 10 * time.Millisecond
	DefaultCombinerTaskUploadBytes    = 4 << 20
	DefaultRemoteWALThreadPoolSize    = 4
	maxTopicNameLength                = 249
	replicaFetcherClientIDPrefix      = "kwal-replica-fetcher-"
	unknownRack                       = ""
	defaultProducerStateBatchWindow   = kafkalog.ProducerBatchWindow // the log keeps Kafka's last 5 batches per producer
)

// Defaults of the log-maintenance tasks, Kafka's.
const (
	DefaultRetentionCheckInterval            = 5 * time.Minute  // log.retention.check.interval.ms
	DefaultProducerIDExpiration              = 24 * time.Hour   // producer.id.expiration.ms
	DefaultProducerIDExpirationCheckInterval = 10 * time.Minute // producer.id.expiration.check.interval.ms
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("broker: invalid config")

// BrokerInfo is one broker of the cluster as clients see it.
type BrokerInfo struct {
	ID   int32
	Host string
	Port int32
	Rack string
	// Endpoints are the broker's advertised listeners; Host and Port are
	// its inter-broker listener's. Empty for a broker known only from a
	// static list.
	Endpoints []Endpoint
}

// Addr is host:port.
func (b BrokerInfo) Addr() string { return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) }

// RemoteWALConfig holds the KIP-1176 broker settings. The broker package
// only carries them (and the per-topic replication mode); the remotewal,
// combiner, metadata and follower packages act on them.
type RemoteWALConfig struct {
	// SystemEnable: remote.log.wal.storage.system.enable. Topics may ask
	// for remote.wal.storage.enable=true only when this is set.
	SystemEnable bool
	// ThreadPoolSize: remote.wal.log.manager.thread.pool.size.
	ThreadPoolSize int
	// CombinerThreadPoolSize: remote.wal.log.manager.combiner.thread.pool.size.
	CombinerThreadPoolSize int
	// CombinerQueueSize: remote.wal.log.manager.combiner.queue.size.
	CombinerQueueSize int
	// CombinerTaskInterval: remote.wal.log.manager.combiner.task.interval.ms.
	CombinerTaskInterval time.Duration
	// CombinerTaskUploadBytes: remote.wal.log.manager.combiner.task.upload.bytes.
	CombinerTaskUploadBytes int64
	// UploadTimeout bounds all attempts to upload one combined object
	// (kwal's own; default combiner.DefaultUploadTimeout, one minute).
	// Fault harnesses shorten it to reach the give-up path.
	UploadTimeout time.Duration
	// Retention: remote.wal.retention.ms, how long an object is kept after
	// its upload once every in-sync replica holds it. Default 10 minutes.
	Retention time.Duration
	// StorageURL: remote.wal.storage.url (mem://, file:///dir, s3://…,
	// minio://…). Empty means file://<log.dirs>/remote-wal (see
	// rwnode.OpenRemoteWALParts). A URL containing {rack} is a template:
	// the store of rack R is the URL with {rack} replaced by R (see
	// rwnode.StoreSet).
	StorageURL string
	// RackStorageURLs: remote.wal.storage.url.<rack>, the store of each
	// rack: a leader uploads to its own rack's store and names it in the
	// metadata; followers read it from there (see rwnode.StoreSet).
	RackStorageURLs map[string]string
	// MetadataBootstrapServers: remote.wal.metadata.bootstrap.servers;
	// empty means an embedded kfake. It may name the cluster's own brokers
	// (rwnode: the metadata topic is then hosted by the cluster itself).
	MetadataBootstrapServers string
	// ControllerBootstrapServers: controller.bootstrap.servers, the Kafka
	// holding the controller's __kwal_cluster_state log; empty means
	// MetadataBootstrapServers. It must not name this cluster: the cluster
	// cannot elect its own leaders through itself.
	ControllerBootstrapServers string
	// MetadataTLS is the client TLS of the metadata Kafka connections
	// (remote.wal.metadata.security.protocol SSL or SASL_SSL, and
	// remote.wal.metadata.ssl.*); nil: plaintext.
	MetadataTLS *tls.Config
	// MetadataSASL authenticates to the metadata Kafka
	// (remote.wal.metadata.sasl.*, password from
	// KWAL_METADATA_SASL_PASSWORD); nil: none.
	MetadataSASL *SASLClientConfig
	// StorageCheckTimeout: remote.wal.storage.check.timeout.ms, how long
	// the start waits for the object store to answer. Default 10 s.
	StorageCheckTimeout time.Duration
	// MetadataBootstrapTimeout: remote.wal.metadata.bootstrap.timeout.ms,
	// how long the start waits for the metadata Kafka (the controller's
	// and the remote WAL's). Default 15 s.
	MetadataBootstrapTimeout time.Duration
	// MetadataStartWait: remote.wal.metadata.start.wait.ms, how long
	// kwal broker keeps trying at start, each attempt bounded by
	// MetadataBootstrapTimeout, while the metadata Kafka (the
	// controller's and the remote WAL's) cannot be reached, before it
	// gives up: a Kafka broker waits for its controller quorum the same
	// way. Default 2 minutes.
	MetadataStartWait time.Duration
	// FollowerFallback: remote.wal.follower.fallback.ms, how long a
	// follower may wait for object storage to serve the slice at its log
	// end (every read and every retry of the store client included)
	// before it fetches from the leader (follower.Config.FallbackAfter).
	// 0 means the default (FollowerFallbackAfter): 1 s, or a third of
	// replica.lag.time.max.ms if that is less; a value set must be below
	// replica.lag.time.max.ms.
	FollowerFallback time.Duration
}

// MetadataClient is the security of the metadata Kafka clients.
func (r RemoteWALConfig) MetadataClient() (metadata.ClientSecurity, error) {
	sec := metadata.ClientSecurity{TLS: r.MetadataTLS}
	if r.MetadataSASL != nil {
		m, err := r.MetadataSASL.SASL()
		if err != nil {
			return metadata.ClientSecurity{}, err
		}
		sec.SASL = m
	}
	return sec, nil
}

// DialFunc opens a connection to another broker. Benchmarks replace it
// to model the network between racks (latency, bandwidth).
type DialFunc func(network, addr string, timeout time.Duration) (net.Conn, error)

// Config configures one Broker. Zero fields take defaults in Validate.
type Config struct {
	// BrokerID: broker.id. Must be >= 0.
	BrokerID int32
	// Rack: broker.rack (the availability zone).
	Rack string
	// Listener is the host:port of a single PLAINTEXT listener
	// ("127.0.0.1:0" picks a port), used when Listeners is empty. Default
	// 127.0.0.1:9092.
	Listener string
	// AdvertisedHost overrides the host registered for Listener; default:
	// the listener's host.
	AdvertisedHost string
	// Listeners: listeners, listener.security.protocol.map and
	// advertised.listeners. Empty means one PLAINTEXT listener on Listener.
	Listeners []ListenerConfig
	// listenersFromListener: Validate made Listeners from Listener.
	listenersFromListener bool
	// InterBrokerListenerName: inter.broker.listener.name, the listener
	// other brokers dial. Default: the only listener, else the one named
	// PLAINTEXT.
	InterBrokerListenerName string
	// InterBrokerTLS is the client side of broker-to-broker connections
	// when the inter-broker listener uses TLS (root CAs, and a client
	// certificate when the listener requires one). ServerName is set per
	// dial unless InsecureSkipVerify.
	InterBrokerTLS *tls.Config
	// InterBrokerSASL authenticates broker-to-broker connections when the
	// inter-broker listener uses SASL.
	InterBrokerSASL *SASLClientConfig
	// SASLCredentials holds the users SASL listeners accept (see
	// LoadUserFile). Required when a listener uses SASL.
	SASLCredentials CredentialStore
	// Authorizer applies ACLs (kwal.acl.file, super.users); nil allows
	// everything.
	Authorizer *Authorizer
	// LogDir: log.dirs (one directory). Required.
	LogDir string
	// LogFS is the file layer every partition log writes through
	// (kafkalog.Config.FS); nil is the real one (kafkalog.OSFS). Fault
	// harnesses inject I/O errors here (a full disk, a read-only dir); a
	// wrapping FS loses the sendfile fetch path, whose files must be the OS's.
	LogFS kafkalog.FS
	// SegmentBytes: log.segment.bytes. Default kafkalog's (1 GiB).
	SegmentBytes int64
	// FlushMessages: flush.messages. Default: the OS decides.
	FlushMessages int64
	// RetentionMs: log.retention.ms (or .minutes, .hours), the default of
	// the topic config retention.ms. 0 takes Kafka's default, 7 days; -1
	// keeps segments forever.
	RetentionMs int64
	// RetentionBytes: log.retention.bytes, the default of the topic config
	// retention.bytes. 0 and -1: unlimited.
	RetentionBytes int64
	// RetentionCheckInterval: log.retention.check.interval.ms, how often
	// the broker deletes segments retention allows. Default 5 minutes.
	RetentionCheckInterval time.Duration
	// ProducerIDExpiration: producer.id.expiration.ms, how long after its
	// latest batch a producer is forgotten. Default 1 day.
	ProducerIDExpiration time.Duration
	// ProducerIDExpirationCheckInterval:
	// producer.id.expiration.check.interval.ms. Default 10 minutes.
	ProducerIDExpirationCheckInterval time.Duration
	// ProducerStateRebuildDisabled opens partitions with an empty producer
	// table (kafkalog.Config.ProducerStateRebuildDisabled): the behaviour
	// of issue 11 item 8, where an idempotent producer gets duplicates
	// after a restart. Only for tests that show that; never in production.
	ProducerStateRebuildDisabled bool
	// AcksAllOnLeaderAppend answers acks=all produce requests once the
	// leader has appended, without waiting for the ISR: a planted bug
	// (acknowledged records a leader change then loses) that the chaos
	// harness's self-test must catch (cmd/kwal/internal/chaos). Only for
	// that test; never in production.
	AcksAllOnLeaderAppend bool
	// ZeroCopyFetchDisabled sends fetched record bytes through user space
	// on plaintext TCP listeners too, as TLS listeners always do; by
	// default those bytes go from the segment file to the socket with
	// sendfile (Kafka's FileRecords.writeTo). For comparing the two paths.
	ZeroCopyFetchDisabled bool
	// NumPartitions: num.partitions, for auto-created topics and
	// CreateTopics with -1. Default 1.
	NumPartitions int32
	// DefaultReplicationFactor: default.replication.factor. Default 1.
	DefaultReplicationFactor int16
	// MinInsyncReplicas: min.insync.replicas. Default 1.
	MinInsyncReplicas int
	// ReplicaLagTimeMax: replica.lag.time.max.ms. Default 30 s.
	ReplicaLagTimeMax time.Duration
	// MetricsListener: kwal.metrics.listener, host:port of the Prometheus
	// /metrics endpoint; empty serves none.
	MetricsListener string
	// Dial opens broker-to-broker connections (replica fetches, remote
	// WAL leader requests). Default net.DialTimeout.
	Dial DialFunc
	// ReplicaFetchWaitMax: replica.fetch.wait.max.ms. Default 500 ms.
	ReplicaFetchWaitMax time.Duration
	// ReplicaFetchMaxBytes: replica.fetch.max.bytes per partition. Default 1 MiB.
	ReplicaFetchMaxBytes int32
	// ReplicaFetchBackoff: replica.fetch.backoff.ms. Default 100 ms.
	ReplicaFetchBackoff time.Duration
	// SocketRequestMaxBytes: socket.request.max.bytes; larger frames close
	// the connection. Default 100 MiB.
	SocketRequestMaxBytes int32
	// MessageMaxBytes: message.max.bytes, the largest batch a topic without
	// its own max.message.bytes takes (MESSAGE_TOO_LARGE above it). Default
	// 1048588, Kafka's. Batches are bounded otherwise only by the request
	// frame (SocketRequestMaxBytes), as in Kafka.
	MessageMaxBytes int32
	// MaxUncompressedBatchBytes: kwal.batch.max.uncompressed.bytes, what
	// one compressed produced batch may decompress to; a larger one is
	// refused with CORRUPT_MESSAGE. Default 64 MiB.
	MaxUncompressedBatchBytes int64
	// MaxConnections: max.connections. Default 2147483647.
	MaxConnections int
	// MaxConnectionsPerIP: max.connections.per.ip. Default 2147483647.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides: max.connections.per.ip.overrides.
	MaxConnectionsPerIPOverrides map[netip.Addr]int
	// ConnectionsMaxIdle: connections.max.idle.ms. Default 10 minutes.
	ConnectionsMaxIdle time.Duration
	// RequestReadTimeout: kwal.socket.request.read.timeout.ms. Default 30 s.
	RequestReadTimeout time.Duration
	// ConnectionMaxBufferedBytes: kwal.connection.max.buffered.bytes.
	// Default 128 MiB.
	ConnectionMaxBufferedBytes int64
	// AutoCreateTopics: auto.create.topics.enable. Default true (set
	// DisableAutoCreateTopics to turn it off).
	DisableAutoCreateTopics bool
	// MaxTopicPartitions bounds the partitions of one topic (each is a
	// log directory with open files). Default 4096.
	MaxTopicPartitions int32
	// LogCleanerDisable: log.cleaner.enable=false. Compacted topics are
	// then never cleaned.
	LogCleanerDisable bool
	// LogCleanerBackoff: log.cleaner.backoff.ms, the pause between cleaner
	// passes. Default 15 s.
	LogCleanerBackoff time.Duration
	// ClusterID is reported in Metadata. Default "kwal-cluster".
	ClusterID string
	// RemoteWAL holds the KIP-1176 settings.
	RemoteWAL RemoteWALConfig
	// BrokerHeartbeatInterval: broker.heartbeat.interval.ms. Default 2 s.
	BrokerHeartbeatInterval time.Duration
	// BrokerSessionTimeout: broker.session.timeout.ms, this broker's lease:
	// when the controller watches sessions and no heartbeat sent in the
	// last session timeout was acknowledged, the broker fences itself
	// (leads nothing). Default 9 s.
	BrokerSessionTimeout time.Duration
	// UncleanLeaderElection: unclean.leader.election.enable, for topics
	// that do not set it (used by the controller). Default false.
	UncleanLeaderElection bool
	// DisableAutoLeaderRebalance: auto.leader.rebalance.enable=false.
	DisableAutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval: leader.imbalance.check.interval.seconds.
	// Default 300 s.
	LeaderImbalanceCheckInterval time.Duration
	// Groups holds the group coordinator's settings (groups.go).
	Groups GroupConfig

	// Controller assigns leaders and replicas. Required.
	Controller Controller
	// Replicator feeds follower logs of remotewal partitions. Nil: such
	// partitions are refused at creation unless RemoteWAL.SystemEnable
	// is false (then the topic config is rejected anyway).
	Replicator Replicator
	// Ledger records bytes crossing racks. Default: a fresh ledger.
	Ledger *ledger.Ledger
	// Stages holds the data path's latency histograms (acks=all wait here;
	// the remote-WAL stages where the replicator shares them), served on
	// /metrics. Default: fresh histograms.
	Stages *stagehist.Histograms
	Clock  clock.Clock  // default clock.Real{}
	Logger *slog.Logger // default slog.Default()

	// afterRetention and afterProducerExpiration, for tests, run after
	// each pass of those tasks.
	afterRetention, afterProducerExpiration func()
	// afterHeartbeat, for tests, runs after each heartbeat of the loop.
	afterHeartbeat func()
	// Connection test hooks: onConnPhase is called as a connection enters
	// a phase (phaseIdle, phaseReading, phaseServing), onReap after each
	// reaper pass with the connections it closed, afterReapArmed once the
	// reaper's timer is armed for its next pass.
	onConnPhase    func(remote string, phase int32)
	onReap         func(now time.Time, closed int)
	afterReapArmed func()
}

// Validate fills defaults and rejects nonsense (CheckSettings), and
// requires a Controller; errors wrap ErrConfig and name the setting.
func (c *Config) Validate() error {
	if err := c.CheckSettings(); err != nil {
		return err
	}
	if c.Controller == nil {
		return fmt.Errorf("%w: a Controller is required", ErrConfig)
	}
	return nil
}

// CheckSettings fills defaults and checks every setting against its
// documented range (serverKeyRanges) and the cross-key rules, without
// touching the disk or the network; `kwal broker` runs it before it opens
// anything. Errors wrap ErrConfig and name the key, the value, the allowed
// range and what to do.
func (c *Config) CheckSettings() error {
	if c.Listener == "" {
		c.Listener = DefaultListener
	}
	if c.NumPartitions == 0 {
		c.NumPartitions = DefaultNumPartitions
	}
	if c.DefaultReplicationFactor == 0 {
		c.DefaultReplicationFactor = DefaultReplicationFactor
	}
	if c.MinInsyncReplicas == 0 {
		c.MinInsyncReplicas = DefaultMinInsyncReplicas
	}
	if c.ReplicaLagTimeMax == 0 {
		c.ReplicaLagTimeMax = DefaultReplicaLagTimeMax
	}
	if c.LogCleanerBackoff == 0 {
		c.LogCleanerBackoff = DefaultLogCleanerBackoff
	}
	if c.Dial == nil {
		c.Dial = net.DialTimeout
	}
	if c.ReplicaFetchWaitMax == 0 {
		c.ReplicaFetchWaitMax = DefaultReplicaFetchWaitMax
	}
	if c.ReplicaFetchMaxBytes == 0 {
		c.ReplicaFetchMaxBytes = DefaultReplicaFetchMaxBytes
	}
	if c.ReplicaFetchBackoff == 0 {
		c.ReplicaFetchBackoff = DefaultReplicaFetchBackoff
	}
	if c.SocketRequestMaxBytes == 0 {
		c.SocketRequestMaxBytes = DefaultSocketRequestMaxBytes
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConnectionsPerIP == 0 {
		c.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	}
	if c.ConnectionsMaxIdle == 0 {
		c.ConnectionsMaxIdle = DefaultConnectionsMaxIdle
	}
	if c.RequestReadTimeout == 0 {
		c.RequestReadTimeout = DefaultRequestReadTimeout
	}
	if c.ConnectionMaxBufferedBytes == 0 {
		c.ConnectionMaxBufferedBytes = DefaultConnectionMaxBufferedBytes
	}
	if c.MaxUncompressedBatchBytes == 0 {
		c.MaxUncompressedBatchBytes = kafkalog.DefaultMaxUncompressedBatchBytes
	}
	if c.MessageMaxBytes == 0 {
		c.MessageMaxBytes = kafkalog.DefaultMaxBatchBytes
	}
	if c.RetentionCheckInterval == 0 {
		c.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if c.ProducerIDExpiration == 0 {
		c.ProducerIDExpiration = DefaultProducerIDExpiration
	}
	if c.ProducerIDExpirationCheckInterval == 0 {
		c.ProducerIDExpirationCheckInterval = DefaultProducerIDExpirationCheckInterval
	}
	if c.RetentionMs == 0 {
		c.RetentionMs = kafkalog.DefaultRetentionMs
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = -1
	}
	if err := c.Groups.validate(); err != nil {
		return err
	}
	if c.MaxTopicPartitions == 0 {
		c.MaxTopicPartitions = 4096
	}
	if c.BrokerHeartbeatInterval == 0 {
		c.BrokerHeartbeatInterval = DefaultBrokerHeartbeatInterval
	}
	if c.BrokerSessionTimeout == 0 {
		c.BrokerSessionTimeout = DefaultBrokerSessionTimeout
	}
	if c.LeaderImbalanceCheckInterval == 0 {
		c.LeaderImbalanceCheckInterval = DefaultLeaderImbalanceInterval
	}
	if c.ClusterID == "" {
		c.ClusterID = DefaultClusterID
	}
	r := &c.RemoteWAL
	if r.ThreadPoolSize == 0 {
		r.ThreadPoolSize = DefaultRemoteWALThreadPoolSize
	}
	if r.CombinerThreadPoolSize == 0 {
		r.CombinerThreadPoolSize = DefaultCombinerThreadPoolSize
	}
	if r.CombinerQueueSize == 0 {
		r.CombinerQueueSize = DefaultCombinerQueueSize
	}
	if r.CombinerTaskInterval == 0 {
		r.CombinerTaskInterval = DefaultCombinerTaskInterval
	}
	if r.CombinerTaskUploadBytes == 0 {
		r.CombinerTaskUploadBytes = DefaultCombinerTaskUploadBytes
	}
	if r.StorageCheckTimeout == 0 {
		r.StorageCheckTimeout = DefaultStoreCheckTimeout
	}
	if r.MetadataBootstrapTimeout == 0 {
		r.MetadataBootstrapTimeout = DefaultMetadataBootstrapTimeout
	}
	if r.MetadataStartWait == 0 {
		r.MetadataStartWait = DefaultMetadataStartWait
	}
	if c.Ledger == nil {
		c.Ledger = ledger.New()
	}
	if c.Stages == nil {
		c.Stages = stagehist.New()
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.LogDir == "":
		return fmt.Errorf("%w: log.dirs is required", ErrConfig)
	case c.MaxTopicPartitions < 1:
		return fmt.Errorf("%w: MaxTopicPartitions=%d, want >= 1", ErrConfig, c.MaxTopicPartitions)
	}
	if err := c.validateRanges(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.Listener); err != nil && len(c.Listeners) == 0 {
		return fmt.Errorf("%w: listeners=%q: %v", ErrConfig, c.Listener, err)
	}
	return c.validateListeners()
}

func (c *Config) logFS() kafkalog.FS {
	if c.LogFS == nil {
		return kafkalog.OSFS{}
	}
	return c.LogFS
}

// FollowerFallbackAfter is remote.wal.follower.fallback.ms as set, else
// its default: 1 s, or a third of replica.lag.time.max.ms if that is less
// (computed here, not stored by Validate, so that a config whose lag is
// changed after a first Validate still gets a default below it).
func (c *Config) FollowerFallbackAfter() time.Duration {
	if c.RemoteWAL.FollowerFallback > 0 {
		return c.RemoteWAL.FollowerFallback
	}
	lag := c.ReplicaLagTimeMax
	if lag <= 0 {
		lag = DefaultReplicaLagTimeMax
	}
	return max(time.Millisecond, min(DefaultFollowerFallback, lag/3))
}

package broker

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// keyRange is the allowed range of an integer server key, inclusive, and
// what to do about a value outside it. Durations are in milliseconds, as
// the keys are.
type keyRange struct {
	min, max int64
	def      string // the default, as written in server.properties
	hint     string
}

// Limits of kwal's own making (Kafka has none for these keys, but a value
// past them is a typo or a unit mistake, never a setting that works).
const (
	maxThreadPoolSize = 1024
	maxQueueSize      = 1 << 20
	hourMs            = int64(time.Hour / time.Millisecond)
	dayMs             = 24 * hourMs
	// maxUploadBytes is S3's limit for one PUT.
	maxUploadBytes = 5 << 30
	// DefaultStoreCheckTimeout is remote.wal.storage.check.timeout.ms.
	DefaultStoreCheckTimeout = 10 * time.Second
	// DefaultMetadataBootstrapTimeout is
	// remote.wal.metadata.bootstrap.timeout.ms.
	DefaultMetadataBootstrapTimeout = 15 * time.Second
	// DefaultMetadataStartWait is remote.wal.metadata.start.wait.ms.
	DefaultMetadataStartWait = 2 * time.Minute
	maxStartupTimeoutMs      = 10 * 60 * 1000
	// DefaultFollowerFallback is remote.wal.follower.fallback.ms: well
	// under replica.lag.time.max.ms (Kafka's default 30 s), so that a
	// store outage costs acks=all about a second, not the ISR.
	DefaultFollowerFallback = time.Second
)

// serverKeyRanges holds the range of every integer server.properties key.
// ServerConfigFromProperties checks each value given against it, and
// Config.Validate checks the filled-in Config against it; `kwal broker
// --keys` prints it.
var serverKeyRanges = map[string]keyRange{
	"broker.id":                   {0, math.MaxInt32, "0", "a broker id is a non-negative int32"},
	"log.segment.bytes":           {14, math.MaxInt32, "1073741824", "Kafka's minimum is 14 bytes; the default is 1 GiB"},
	"flush.messages":              {1, math.MaxInt64, "none (the OS flushes)", "remove the key to leave flushing to the OS"},
	"log.flush.interval.messages": {1, math.MaxInt64, "none (the OS flushes)", "remove the key to leave flushing to the OS"},
	"num.partitions":              {1, 4096, "1", "a topic has at least one partition; kwal caps a topic at 4096"},
	"default.replication.factor":  {1, math.MaxInt16, "1", "at least 1, and at most the number of brokers in cluster.brokers"},
	"min.insync.replicas":         {1, math.MaxInt16, "1", "at least 1, and at most default.replication.factor"},
	"replica.lag.time.max.ms":     {1, dayMs, "30000", "at most a day; Kafka's default is 30000"},
	"replica.fetch.wait.max.ms":   {1, dayMs, "500", "at most replica.lag.time.max.ms; Kafka's default is 500"},
	"replica.fetch.backoff.ms":    {1, hourMs, "100", "1 ms to an hour"},
	"replica.fetch.max.bytes":     {1, math.MaxInt32, "1048576", "a positive int32"},
	"socket.request.max.bytes":    {64, math.MaxInt32, "104857600", "at least 64 bytes; Kafka's default is 100 MiB"},
	"message.max.bytes":           {0, math.MaxInt32, "1048588", "a non-negative int32 (Kafka's default 1048588); batches are also bounded by socket.request.max.bytes"},
	"max.connections":             {1, math.MaxInt32, "2147483647", "at least 1 (Kafka's default is 2147483647: no cap)"},
	"max.connections.per.ip":      {1, math.MaxInt32, "2147483647", "at least 1; raise single addresses with max.connections.per.ip.overrides"},
	"connections.max.idle.ms":     {1, 7 * dayMs, "600000", "at most a week; Kafka's default is 600000 (10 minutes)"},
	"kwal.socket.request.read.timeout.ms": {1, hourMs, "30000",
		"how long a request may take to arrive once its first byte has; at most an hour"},
	"kwal.connection.max.buffered.bytes": {64 << 10, 1 << 40, "134217728",
		"request and response bytes one connection may hold; at least 64 KiB"},
	"kwal.batch.max.uncompressed.bytes": {64 << 10, math.MaxInt32, "67108864",
		"what one compressed batch may decompress to; at least 64 KiB"},
	"remote.wal.log.manager.thread.pool.size": {1, maxThreadPoolSize, "4",
		"threads are goroutines but each holds buffers; 1 to 1024"},
	"remote.wal.log.manager.combiner.thread.pool.size": {1, maxThreadPoolSize, "2",
		"concurrent uploads; 1 to 1024"},
	"remote.wal.log.manager.combiner.queue.size": {1, maxQueueSize, "1024",
		"slices waiting to be packed; 1 to 1048576"},
	"remote.wal.log.manager.combiner.task.interval.ms": {1, 60_000, "10",
		"how long the combiner waits to fill an object: acks=all latency grows with it; 1 ms to 1 minute"},
	"remote.wal.log.manager.combiner.task.upload.bytes": {1, maxUploadBytes, "4194304",
		"an object's target size; at most 5 GiB (one S3 PUT)"},
	"remote.wal.retention.ms": {1, 365 * dayMs, "600000",
		"how long an object is kept once every in-sync replica holds it; at most a year"},
	"remote.wal.storage.check.timeout.ms": {1, maxStartupTimeoutMs, "10000",
		"how long the start may wait for the object store to answer; at most 10 minutes"},
	"remote.wal.metadata.bootstrap.timeout.ms": {1, maxStartupTimeoutMs, "15000",
		"how long one attempt at start may wait for the metadata Kafka to answer; at most 10 minutes"},
	"remote.wal.metadata.start.wait.ms": {1, maxStartupTimeoutMs, "120000",
		"how long kwal broker keeps retrying at start while the metadata Kafka cannot be reached, before it exits; at most 10 minutes"},
	"remote.wal.follower.fallback.ms": {1, dayMs, "1000 (or replica.lag.time.max.ms/3 if less)",
		"how long a follower waits for object storage (all reads and retries) before fetching from the leader; below replica.lag.time.max.ms"},
	"log.retention.ms":      {-1, math.MaxInt64, "604800000", "-1 keeps segments forever; the topic's retention.ms overrides it"},
	"log.retention.minutes": {-1, math.MaxInt64 / 60_000, "10080", "-1 keeps segments forever; log.retention.ms wins if both are set"},
	"log.retention.hours":   {-1, math.MaxInt64 / 3_600_000, "168", "-1 keeps segments forever; .ms and .minutes win if set"},
	"log.retention.bytes":   {-1, math.MaxInt64, "-1", "-1 (unlimited) or a positive size per partition"},
	"log.retention.check.interval.ms": {1, dayMs, "300000",
		"how often retention runs; at most a day"},
	"producer.id.expiration.ms": {1, 365 * dayMs, "86400000",
		"how long an idle producer's state is kept; at most a year"},
	"producer.id.expiration.check.interval.ms": {1, dayMs, "600000",
		"how often idle producers are forgotten; at most a day"},
	"log.cleaner.backoff.ms":           {1, hourMs, "15000", "the cleaner's pause when it has nothing to do; at most an hour"},
	"offsets.topic.num.partitions":     {1, 4096, "50", "partitions of __consumer_offsets; fixed once the topic exists"},
	"offsets.topic.replication.factor": {1, math.MaxInt16, "3", "replicas of __consumer_offsets (capped by the brokers there are)"},
	"offsets.commit.timeout.ms":        {1, hourMs, "5000", "how long an offset commit waits for its acks=all append"},
	"group.min.session.timeout.ms":     {1, dayMs, "6000", "the shortest session.timeout.ms a consumer may ask for"},
	"group.max.session.timeout.ms": {1, dayMs, "1800000",
		"the longest session.timeout.ms a consumer may ask for; at least group.min.session.timeout.ms"},
	"group.initial.rebalance.delay.ms": {0, hourMs, "3000", "how long a new group waits for more members; 0 for none"},
	"offsets.retention.minutes": {-1, 100 * 365 * 24 * 60, "10080",
		"how long an empty group's offsets are kept; -1 keeps them forever"},
	"offsets.retention.check.interval.ms": {1, dayMs, "600000", "how often expired offsets are removed"},
	"group.max.size":                      {1, math.MaxInt32, "2147483647", "members one group may have"},
	"broker.heartbeat.interval.ms": {1, hourMs, "2000",
		"how often a broker heartbeats to the controller; below broker.session.timeout.ms"},
	"broker.session.timeout.ms": {1, dayMs, "9000",
		"how long a silent broker keeps its leadership and ISR places; above broker.heartbeat.interval.ms"},
	"leader.imbalance.check.interval.seconds": {1, 7 * 24 * 3600, "300",
		"how often a preferred leader asks to lead again (auto.leader.rebalance.enable)"},
}

// serverKeyNotes documents the keys that are not integers: their default
// and what they accept (ServerConfigFromProperties checks the form).
var serverKeyNotes = map[string][2]string{
	"advertised.listeners":                 {"the listener's host", "PLAINTEXT://host:port registered for clients"},
	"auto.create.topics.enable":            {"true", "true or false"},
	"log.cleaner.enable":                   {"true", "true or false: compacts cleanup.policy=compact topics"},
	"auto.leader.rebalance.enable":         {"true", "true or false: a preferred leader back in the ISR leads again"},
	"unclean.leader.election.enable":       {"false", "true or false: with true, a partition with no live in-sync replica elects an out-of-sync one (acknowledged records can be lost; logged at ERROR)"},
	"kwal.producer.state.rebuild.enable":   {"true", "true or false: false skips rebuilding producer state at open (reproduces issue 11 item 8)"},
	"broker.rack":                          {"none", "the availability zone; must match cluster.brokers"},
	"cluster.brokers":                      {"this broker alone", "id@host:port#rack,... : the static broker set; must list broker.id"},
	"cluster.id":                           {DefaultClusterID, "reported in Metadata"},
	"kwal.metrics.listener":                {"none", "host:port of the Prometheus /metrics endpoint"},
	"listeners":                            {"PLAINTEXT://" + DefaultListener, "one PLAINTEXT://host:port"},
	"log.dirs":                             {"/tmp/kwal-logs", "one directory; created if missing and checked writable at start"},
	"max.connections.per.ip.overrides":     {"none", "ip:count,... (IP addresses, not host names; count >= 0)"},
	"remote.log.wal.storage.system.enable": {"false", "true or false: lets topics set remote.wal.storage.enable=true"},
	"remote.wal.metadata.bootstrap.servers": {"an embedded kfake", "host:port,... of the Kafka holding the metadata topic, or of this cluster's " +
		"own brokers (the cluster then hosts it); must answer within remote.wal.metadata.bootstrap.timeout.ms"},
	"controller.bootstrap.servers": {"remote.wal.metadata.bootstrap.servers", "host:port,... of the Kafka holding the controller's " +
		"__kwal_cluster_state log; never this cluster's own brokers"},
	RackStorageURLKey + "<rack>": {"remote.wal.storage.url", "the store of one rack (its leaders upload there); same forms as remote.wal.storage.url, " +
		"checked the same way"},
	"remote.wal.storage.url": {"file://<log.dirs>/remote-wal", "mem://, file:///dir, s3://bucket/prefix?endpoint=..., minio://...; " +
		"must answer a listing within remote.wal.storage.check.timeout.ms"},
}

func (r keyRange) text() string {
	show := func(v int64) string {
		switch v {
		case math.MaxInt64:
			return "9223372036854775807"
		}
		return strconv.FormatInt(v, 10)
	}
	return "[" + show(r.min) + ", " + show(r.max) + "]"
}

// checkKeyRange refuses v outside key's range, naming the key, the value,
// the range and what to do.
func checkKeyRange(key string, v int64) error {
	r, ok := serverKeyRanges[key]
	if !ok || (v >= r.min && v <= r.max) {
		return nil
	}
	return fmt.Errorf("%w: %s=%d is outside the allowed range %s: %s", ErrConfig, key, v, r.text(), r.hint)
}

// checkPropertyRange checks a server.properties value of an integer key
// before it is applied (so that an explicit 0 is not taken for "unset").
func checkPropertyRange(key, value string) error {
	r, ok := serverKeyRanges[key]
	if !ok {
		return nil
	}
	v, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s=%q is not an integer; allowed range %s: %s", ErrConfig, key, value, r.text(), r.hint)
	}
	return checkKeyRange(key, v)
}

// ServerKeyDoc is one line of `kwal broker --keys`.
type ServerKeyDoc struct {
	Key, Default, Range, Hint string
}

// ServerKeyDocs lists every server.properties key with its default and,
// for integer keys, its allowed range.
func ServerKeyDocs() []ServerKeyDoc {
	var out []ServerKeyDoc
	for _, k := range ServerPropertyKeys() {
		d := ServerKeyDoc{Key: k}
		if r, ok := serverKeyRanges[k]; ok {
			d.Default, d.Range, d.Hint = r.def, r.text(), r.hint
		} else if n, ok := serverKeyNotes[k]; ok {
			d.Default, d.Hint = n[0], n[1]
		} else if n, ok := securityKeyNote(k); ok {
			d.Default, d.Hint = n[0], n[1]
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// validateRanges checks a Config whose defaults are filled in against
// serverKeyRanges and the cross-key rules.
func (c *Config) validateRanges() error {
	// Durations are checked in the keys' unit; a positive duration under
	// a millisecond (set in code, not in server.properties) counts as 1 ms.
	ms := func(d time.Duration) int64 {
		if d > 0 && d < time.Millisecond {
			return 1
		}
		return int64(d / time.Millisecond)
	}
	r := &c.RemoteWAL
	checks := []struct {
		key string
		v   int64
		set bool // false: the zero value means "unset" and is not checked
	}{
		{"broker.id", int64(c.BrokerID), true},
		{"log.segment.bytes", c.SegmentBytes, c.SegmentBytes != 0},
		{"flush.messages", c.FlushMessages, c.FlushMessages != 0},
		{"num.partitions", int64(c.NumPartitions), true},
		{"default.replication.factor", int64(c.DefaultReplicationFactor), true},
		{"min.insync.replicas", int64(c.MinInsyncReplicas), true},
		{"replica.lag.time.max.ms", ms(c.ReplicaLagTimeMax), true},
		{"replica.fetch.wait.max.ms", ms(c.ReplicaFetchWaitMax), true},
		{"replica.fetch.backoff.ms", ms(c.ReplicaFetchBackoff), true},
		{"replica.fetch.max.bytes", int64(c.ReplicaFetchMaxBytes), true},
		{"socket.request.max.bytes", int64(c.SocketRequestMaxBytes), true},
		{"message.max.bytes", int64(c.MessageMaxBytes), true},
		{"max.connections", int64(c.MaxConnections), true},
		{"max.connections.per.ip", int64(c.MaxConnectionsPerIP), true},
		{"connections.max.idle.ms", ms(c.ConnectionsMaxIdle), true},
		{"kwal.socket.request.read.timeout.ms", ms(c.RequestReadTimeout), true},
		{"kwal.connection.max.buffered.bytes", c.ConnectionMaxBufferedBytes, true},
		{"kwal.batch.max.uncompressed.bytes", c.MaxUncompressedBatchBytes, true},
		{"remote.wal.log.manager.thread.pool.size", int64(r.ThreadPoolSize), true},
		{"remote.wal.log.manager.combiner.thread.pool.size", int64(r.CombinerThreadPoolSize), true},
		{"remote.wal.log.manager.combiner.queue.size", int64(r.CombinerQueueSize), true},
		{"remote.wal.log.manager.combiner.task.interval.ms", ms(r.CombinerTaskInterval), true},
		{"remote.wal.log.manager.combiner.task.upload.bytes", r.CombinerTaskUploadBytes, true},
		{"remote.wal.retention.ms", ms(r.Retention), r.Retention != 0},
		{"remote.wal.storage.check.timeout.ms", ms(r.StorageCheckTimeout), true},
		{"remote.wal.metadata.bootstrap.timeout.ms", ms(r.MetadataBootstrapTimeout), true},
		{"remote.wal.metadata.start.wait.ms", ms(r.MetadataStartWait), r.MetadataStartWait != 0},
		{"remote.wal.follower.fallback.ms", ms(r.FollowerFallback), r.FollowerFallback != 0},
		{"log.retention.ms", c.RetentionMs, true},
		{"log.retention.bytes", c.RetentionBytes, true},
		{"log.retention.check.interval.ms", ms(c.RetentionCheckInterval), true},
		{"producer.id.expiration.ms", ms(c.ProducerIDExpiration), true},
		{"producer.id.expiration.check.interval.ms", ms(c.ProducerIDExpirationCheckInterval), true},
		{"log.cleaner.backoff.ms", ms(c.LogCleanerBackoff), true},
		{"broker.heartbeat.interval.ms", ms(c.BrokerHeartbeatInterval), true},
		{"broker.session.timeout.ms", ms(c.BrokerSessionTimeout), true},
		{"leader.imbalance.check.interval.seconds", int64(c.LeaderImbalanceCheckInterval / time.Second), c.LeaderImbalanceCheckInterval >= time.Second},
	}
	for _, ch := range checks {
		if !ch.set {
			continue
		}
		if err := checkKeyRange(ch.key, ch.v); err != nil {
			return err
		}
	}
	if c.NumPartitions > c.MaxTopicPartitions {
		return fmt.Errorf("%w: num.partitions=%d is above the %d partitions a topic may have", ErrConfig, c.NumPartitions, c.MaxTopicPartitions)
	}
	if int64(c.MinInsyncReplicas) > int64(c.DefaultReplicationFactor) {
		return fmt.Errorf("%w: min.insync.replicas=%d is above default.replication.factor=%d: every acks=all produce to a topic created with the default would fail with NOT_ENOUGH_REPLICAS; lower min.insync.replicas or raise default.replication.factor",
			ErrConfig, c.MinInsyncReplicas, c.DefaultReplicationFactor)
	}
	if c.ReplicaFetchWaitMax > c.ReplicaLagTimeMax {
		return fmt.Errorf("%w: replica.fetch.wait.max.ms=%d is above replica.lag.time.max.ms=%d: followers would drop out of the ISR while their fetches wait (Kafka refuses this too); lower replica.fetch.wait.max.ms",
			ErrConfig, ms(c.ReplicaFetchWaitMax), ms(c.ReplicaLagTimeMax))
	}
	if r.FollowerFallback != 0 && r.FollowerFallback >= c.ReplicaLagTimeMax {
		return fmt.Errorf("%w: remote.wal.follower.fallback.ms=%d is not below replica.lag.time.max.ms=%d: a follower waiting that long for object storage drops out of the ISR before it asks the leader; lower remote.wal.follower.fallback.ms",
			ErrConfig, ms(r.FollowerFallback), ms(c.ReplicaLagTimeMax))
	}
	if c.BrokerSessionTimeout <= c.BrokerHeartbeatInterval {
		return fmt.Errorf("%w: broker.session.timeout.ms=%d must exceed broker.heartbeat.interval.ms=%d, or every broker is fenced between two heartbeats; raise the session timeout",
			ErrConfig, ms(c.BrokerSessionTimeout), ms(c.BrokerHeartbeatInterval))
	}
	for ip, n := range c.MaxConnectionsPerIPOverrides {
		if n < 0 {
			return fmt.Errorf("%w: max.connections.per.ip.overrides: %s:%d: a count must be >= 0", ErrConfig, ip, n)
		}
	}
	return nil
}

// validateCluster checks what needs the broker list: a replication factor
// no larger than the cluster (one broker when cluster.brokers is not set).
func (sc *ServerConfig) validateCluster() error {
	n := max(len(sc.Cluster), 1)
	if int(sc.Broker.DefaultReplicationFactor) > n {
		return fmt.Errorf("%w: default.replication.factor=%d but the cluster has %d broker(s) (cluster.brokers): topics created with the default could never be placed; lower it or list more brokers",
			ErrConfig, sc.Broker.DefaultReplicationFactor, n)
	}
	return nil
}

// probeFile is written and removed in each log dir at start.
const probeFile = ".kwal-write-probe"

// CheckLogDir creates dir if needed and proves it writable by writing,
// syncing and removing a file in it, as the broker does at start. Errors
// wrap ErrConfig and name log.dirs, the directory and the cause.
func CheckLogDir(dir string) error {
	bad := func(what string, err error) error {
		return fmt.Errorf("%w: log.dirs=%q: %s: %v; point log.dirs at a directory this process can write", ErrConfig, dir, what, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return bad("cannot create the directory", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return bad("cannot stat", err)
	}
	if !st.IsDir() {
		return bad("not a directory", errors.New("it is a file"))
	}
	p := filepath.Join(dir, probeFile)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return bad("cannot write a file in it", err)
	}
	_, err = f.Write([]byte("kwal\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	os.Remove(p)
	if err != nil {
		return bad("cannot write a file in it", err)
	}
	return nil
}

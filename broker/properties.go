package broker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Property is one key and value of a .properties file, with its line.
type Property struct {
	Key, Value string
	Line       int
}

// ParseProperties reads Java .properties text: '#' and '!' comment lines,
// "key=value", "key: value" and "key value" forms, whitespace trimmed
// around keys and values, a trailing backslash continuing a line, and the
// escapes \t \n \r \f \\ \= \: \# \! and \uXXXX. A key given twice is an
// error naming both lines (Java keeps the last; a duplicate in a broker
// config is almost always a mistake).
func ParseProperties(r io.Reader) ([]Property, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var (
		out     []Property
		seen    = map[string]int{}
		lineNo  int
		logical strings.Builder
		start   int
	)
	flush := func() error {
		line := logical.String()
		logical.Reset()
		p, ok, err := parsePropertyLine(line)
		if err != nil {
			return fmt.Errorf("line %d: %w", start, err)
		}
		if !ok {
			return nil
		}
		if prev, dup := seen[p.Key]; dup {
			return fmt.Errorf("line %d: key %q already set on line %d", start, p.Key, prev)
		}
		p.Line = start
		seen[p.Key] = start
		out = append(out, p)
		return nil
	}
	for sc.Scan() {
		lineNo++
		raw := sc.Text()
		text := strings.TrimLeft(raw, " \t\f")
		if logical.Len() == 0 {
			start = lineNo
			if text == "" || text[0] == '#' || text[0] == '!' {
				continue
			}
		}
		if endsWithContinuation(text) {
			logical.WriteString(text[:len(text)-1])
			continue
		}
		logical.WriteString(text)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if logical.Len() > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// endsWithContinuation: an odd number of trailing backslashes.
func endsWithContinuation(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func parsePropertyLine(line string) (Property, bool, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return Property{}, false, nil
	}
	// The key ends at the first unescaped '=', ':' or whitespace.
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	i = min(i, len(line))
	key, rest := line[:i], strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	k, err := unescapeProperty(key)
	if err != nil {
		return Property{}, false, err
	}
	v, err := unescapeProperty(strings.TrimRight(rest, " \t\f"))
	if err != nil {
		return Property{}, false, err
	}
	if k == "" {
		return Property{}, false, fmt.Errorf("empty key")
	}
	return Property{Key: k, Value: v}, true, nil
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("short \\u escape in %q", s)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 32)
			if err != nil {
				return "", fmt.Errorf("bad \\u escape in %q", s)
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// ServerConfig is what a server.properties file configures: the broker,
// and the static cluster list a multi-process harness needs.
type ServerConfig struct {
	Broker Config
	// Cluster is cluster.brokers: every broker's id, address and rack.
	// Empty means a one-broker cluster of this broker. This is a harness
	// stand-in until the controller keeps its state in the metadata Kafka
	// cluster: every broker derives the same assignment from this list.
	Cluster []BrokerInfo

	// retention holds log.retention.{ms,minutes,hours} in ms (-2: unset),
	// resolved after parsing as Kafka does: ms over minutes over hours.
	retention [3]int64
}

// retentionKey returns the setter of one of the log.retention time keys:
// index 0 ms, 1 minutes, 2 hours.
func retentionKey(i int, unit int64) func(sc *ServerConfig, v string) error {
	return func(sc *ServerConfig, v string) error {
		var n int64
		if err := parseInt64(v, &n); err != nil {
			return err
		}
		if n < -1 || n > math.MaxInt64/unit {
			return fmt.Errorf("must be -1 (unlimited) or more, and fit in int64 ms")
		}
		if n > 0 {
			n *= unit
		}
		sc.retention[i] = n
		return nil
	}
}

// serverKeys lists every key ServerConfigFromProperties accepts, with the
// setter that applies it.
var serverKeys = map[string]func(sc *ServerConfig, v string) error{
	"broker.id": func(sc *ServerConfig, v string) error { return parseInt32(v, &sc.Broker.BrokerID) },
	"broker.rack": func(sc *ServerConfig, v string) error {
		sc.Broker.Rack = v
		return nil
	},
	"log.dirs": func(sc *ServerConfig, v string) error {
		dirs := splitList(v)
		if len(dirs) != 1 {
			return fmt.Errorf("exactly one directory is supported, got %d", len(dirs))
		}
		sc.Broker.LogDir = dirs[0]
		return nil
	},
	"log.segment.bytes":           func(sc *ServerConfig, v string) error { return parseInt64(v, &sc.Broker.SegmentBytes) },
	"flush.messages":              func(sc *ServerConfig, v string) error { return parseInt64(v, &sc.Broker.FlushMessages) },
	"log.flush.interval.messages": func(sc *ServerConfig, v string) error { return parseInt64(v, &sc.Broker.FlushMessages) },
	"num.partitions":              func(sc *ServerConfig, v string) error { return parseInt32(v, &sc.Broker.NumPartitions) },
	"log.retention.bytes": func(sc *ServerConfig, v string) error {
		if err := parseInt64(v, &sc.Broker.RetentionBytes); err != nil {
			return err
		}
		if sc.Broker.RetentionBytes < -1 || sc.Broker.RetentionBytes == 0 {
			return fmt.Errorf("must be -1 (unlimited) or a positive size")
		}
		return nil
	},
	"log.retention.ms":      retentionKey(0, 1),
	"log.retention.minutes": retentionKey(1, 60_000),
	"log.retention.hours":   retentionKey(2, 3_600_000),
	"log.retention.check.interval.ms": func(sc *ServerConfig, v string) error {
		if err := parseMs(v, &sc.Broker.RetentionCheckInterval); err != nil {
			return err
		}
		if sc.Broker.RetentionCheckInterval == 0 {
			return fmt.Errorf("must be positive")
		}
		return nil
	},
	"producer.id.expiration.ms": func(sc *ServerConfig, v string) error {
		return parseMs(v, &sc.Broker.ProducerIDExpiration)
	},
	"producer.id.expiration.check.interval.ms": func(sc *ServerConfig, v string) error {
		return parseMs(v, &sc.Broker.ProducerIDExpirationCheckInterval)
	},
	// kwal.producer.state.rebuild.enable=false reproduces issue 11 item 8
	// (duplicates after a restart) for the tests that show it.
	"kwal.producer.state.rebuild.enable": func(sc *ServerConfig, v string) error {
		b, err := strconv.ParseBool(v)
		sc.Broker.ProducerStateRebuildDisabled = !b
		return err
	},
	"default.replication.factor": func(sc *ServerConfig, v string) error {
		var n int32
		err := parseInt32(v, &n)
		if n > 32767 || n < -32768 {
			return fmt.Errorf("out of range")
		}
		sc.Broker.DefaultReplicationFactor = int16(n)
		return err
	},
	"min.insync.replicas": func(sc *ServerConfig, v string) error {
		var n int32
		err := parseInt32(v, &n)
		sc.Broker.MinInsyncReplicas = int(n)
		return err
	},
	"replica.lag.time.max.ms": func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.ReplicaLagTimeMax) },
	"log.cleaner.backoff.ms":  func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.LogCleanerBackoff) },
	"log.cleaner.enable": func(sc *ServerConfig, v string) error {
		on, err := strconv.ParseBool(v)
		sc.Broker.LogCleanerDisable = !on
		return err
	},
	"broker.heartbeat.interval.ms": func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.BrokerHeartbeatInterval) },
	"broker.session.timeout.ms":    func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.BrokerSessionTimeout) },
	"unclean.leader.election.enable": func(sc *ServerConfig, v string) error {
		b, err := strconv.ParseBool(v)
		sc.Broker.UncleanLeaderElection = b
		return err
	},
	"auto.leader.rebalance.enable": func(sc *ServerConfig, v string) error {
		b, err := strconv.ParseBool(v)
		sc.Broker.DisableAutoLeaderRebalance = !b
		return err
	},
	"leader.imbalance.check.interval.seconds": func(sc *ServerConfig, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err == nil && n <= 0 {
			err = fmt.Errorf("must be positive")
		}
		sc.Broker.LeaderImbalanceCheckInterval = time.Duration(n) * time.Second
		return err
	},
	"replica.fetch.wait.max.ms": func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.ReplicaFetchWaitMax) },
	"replica.fetch.backoff.ms":  func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.ReplicaFetchBackoff) },
	"replica.fetch.max.bytes":   func(sc *ServerConfig, v string) error { return parseInt32(v, &sc.Broker.ReplicaFetchMaxBytes) },
	"socket.request.max.bytes":  func(sc *ServerConfig, v string) error { return parseInt32(v, &sc.Broker.SocketRequestMaxBytes) },
	"message.max.bytes":         func(sc *ServerConfig, v string) error { return parseInt32(v, &sc.Broker.MessageMaxBytes) },
	"offsets.topic.num.partitions": func(sc *ServerConfig, v string) error {
		return parseInt32(v, &sc.Broker.Groups.OffsetsTopicPartitions)
	},
	"offsets.topic.replication.factor": func(sc *ServerConfig, v string) error {
		var n int32
		if err := parseInt32(v, &n); err != nil {
			return err
		}
		if n < 1 || n > 32767 {
			return fmt.Errorf("out of range")
		}
		sc.Broker.Groups.OffsetsTopicReplicationFactor = int16(n)
		return nil
	},
	"offsets.commit.timeout.ms":    func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.Groups.OffsetCommitTimeout) },
	"group.min.session.timeout.ms": func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.Groups.MinSessionTimeout) },
	"group.max.session.timeout.ms": func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.Groups.MaxSessionTimeout) },
	"group.initial.rebalance.delay.ms": func(sc *ServerConfig, v string) error {
		if err := parseMs(v, &sc.Broker.Groups.InitialRebalanceDelay); err != nil {
			return err
		}
		if sc.Broker.Groups.InitialRebalanceDelay == 0 {
			sc.Broker.Groups.InitialRebalanceDelay = -1 // none
		}
		return nil
	},
	"offsets.retention.minutes": func(sc *ServerConfig, v string) error {
		var n int64
		if err := parseInt64(v, &n); err != nil {
			return err
		}
		sc.Broker.Groups.OffsetsRetention = time.Duration(n) * time.Minute
		if n < 0 {
			sc.Broker.Groups.OffsetsRetention = -1 // never
		}
		return nil
	},
	"offsets.retention.check.interval.ms": func(sc *ServerConfig, v string) error {
		return parseMs(v, &sc.Broker.Groups.OffsetsRetentionCheckInterval)
	},
	"group.max.size": func(sc *ServerConfig, v string) error {
		var n int32
		err := parseInt32(v, &n)
		sc.Broker.Groups.MaxSize = int(n)
		return err
	},
	"auto.create.topics.enable": func(sc *ServerConfig, v string) error {
		b, err := strconv.ParseBool(v)
		sc.Broker.DisableAutoCreateTopics = !b
		return err
	},
	"max.connections":        func(sc *ServerConfig, v string) error { return parseInt(v, &sc.Broker.MaxConnections) },
	"max.connections.per.ip": func(sc *ServerConfig, v string) error { return parseInt(v, &sc.Broker.MaxConnectionsPerIP) },
	"max.connections.per.ip.overrides": func(sc *ServerConfig, v string) error {
		o, err := ParseConnectionOverrides(v)
		sc.Broker.MaxConnectionsPerIPOverrides = o
		return err
	},
	"connections.max.idle.ms":             func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.ConnectionsMaxIdle) },
	"kwal.socket.request.read.timeout.ms": func(sc *ServerConfig, v string) error { return parseMs(v, &sc.Broker.RequestReadTimeout) },
	"kwal.connection.max.buffered.bytes":  func(sc *ServerConfig, v string) error { return parseInt64(v, &sc.Broker.ConnectionMaxBufferedBytes) },
	"kwal.batch.max.uncompressed.bytes":   func(sc *ServerConfig, v string) error { return parseInt64(v, &sc.Broker.MaxUncompressedBatchBytes) },
	"kwal.metrics.listener": func(sc *ServerConfig, v string) error {
		sc.Broker.MetricsListener = v
		return nil
	},
	"cluster.id": func(sc *ServerConfig, v string) error {
		sc.Broker.ClusterID = v
		return nil
	},
	"cluster.brokers": func(sc *ServerConfig, v string) error {
		bs, err := ParseClusterBrokers(v)
		sc.Cluster = bs
		return err
	},
	"remote.log.wal.storage.system.enable": func(sc *ServerConfig, v string) error {
		b, err := strconv.ParseBool(v)
		sc.Broker.RemoteWAL.SystemEnable = b
		return err
	},
	"remote.wal.log.manager.thread.pool.size": func(sc *ServerConfig, v string) error {
		return parseInt(v, &sc.Broker.RemoteWAL.ThreadPoolSize)
	},
	"remote.wal.log.manager.combiner.thread.pool.size": func(sc *ServerConfig, v string) error {
		return parseInt(v, &sc.Broker.RemoteWAL.CombinerThreadPoolSize)
	},
	"remote.wal.log.manager.combiner.queue.size": func(sc *ServerConfig, v string) error {
		return parseInt(v, &sc.Broker.RemoteWAL.CombinerQueueSize)
	},
	"remote.wal.log.manager.combiner.task.interval.ms": func(sc *ServerConfig, v string) error {
		return parseMs(v, &sc.Broker.RemoteWAL.CombinerTaskInterval)
	},
	"remote.wal.log.manager.combiner.task.upload.bytes": func(sc *ServerConfig, v string) error {
		return parseInt64(v, &sc.Broker.RemoteWAL.CombinerTaskUploadBytes)
	},
	"remote.wal.retention.ms": func(sc *ServerConfig, v string) error {
		return parseMs(v, &sc.Broker.RemoteWAL.Retention)
	},
	"remote.wal.storage.url": func(sc *ServerConfig, v string) error {
		sc.Broker.RemoteWAL.StorageURL = v
		return nil
	},
	"remote.wal.storage.check.timeout.ms": func(sc *ServerConfig, v string) error {
		return parseMs(v, &sc.Broker.RemoteWAL.StorageCheckTimeout)
	},
	"remote.wal.metadata.bootstrap.timeout.ms": func(sc *ServerConfig, v string) error {
		return parseMs(v, &sc.Broker.RemoteWAL.MetadataBootstrapTimeout)
	},
	"remote.wal.metadata.start.wait.ms": func(sc *ServerConfig, v string) error {
		return parseMs(v, &sc.Broker.RemoteWAL.MetadataStartWait)
	},
	"remote.wal.follower.fallback.ms": func(sc *ServerConfig, v string) error {
		return parseMs(v, &sc.Broker.RemoteWAL.FollowerFallback)
	},
	"remote.wal.metadata.bootstrap.servers": func(sc *ServerConfig, v string) error {
		sc.Broker.RemoteWAL.MetadataBootstrapServers = v
		return nil
	},
	"controller.bootstrap.servers": func(sc *ServerConfig, v string) error {
		sc.Broker.RemoteWAL.ControllerBootstrapServers = v
		return nil
	},
}

// RackStorageURLKey + <rack> is the server.properties key of one rack's
// remote WAL store (see rwnode.StoreSet).
const RackStorageURLKey = "remote.wal.storage.url."

func setRackStorageURL(sc *ServerConfig, rack, v string) error {
	if rack == "" || strings.ContainsAny(rack, "\x00/{}") {
		return fmt.Errorf("bad rack name %q in the key", rack)
	}
	if v == "" {
		return errors.New("empty store URL")
	}
	if sc.Broker.RemoteWAL.RackStorageURLs == nil {
		sc.Broker.RemoteWAL.RackStorageURLs = map[string]string{}
	}
	sc.Broker.RemoteWAL.RackStorageURLs[rack] = v
	return nil
}

// ServerPropertyKeys returns every accepted server.properties key, sorted;
// remote.wal.storage.url.<rack> stands for one key per rack.
func ServerPropertyKeys() []string {
	keys := make([]string, 0, len(serverKeys)+1)
	for k := range serverKeys {
		keys = append(keys, k)
	}
	keys = append(keys, RackStorageURLKey+"<rack>")
	keys = append(keys, securityKeys()...)
	sort.Strings(keys)
	return keys
}

// ServerConfigFromProperties applies props over the defaults. An unknown
// key or a bad value is an error naming the key and its line. The result
// still needs a Controller (see ServerConfig.NewController) and Validate.
func ServerConfigFromProperties(props []Property) (ServerConfig, error) {
	return ServerConfigFromPropertiesEnv(props, os.Getenv)
}

// ServerConfigFromPropertiesEnv is ServerConfigFromProperties with the
// environment (secrets: EnvInterBrokerSASLPassword,
// EnvMetadataSASLPassword) read through getenv.
func ServerConfigFromPropertiesEnv(props []Property, getenv func(string) string) (ServerConfig, error) {
	var sc ServerConfig
	sc.Broker.LogDir = "/tmp/kwal-logs"
	sc.retention = [3]int64{-2, -2, -2}
	sec := securityProps{}
	for _, p := range props {
		set, ok := serverKeys[p.Key]
		if !ok && isSecurityKey(p.Key) {
			sec[p.Key] = p
			continue
		}
		if rack, isRack := strings.CutPrefix(p.Key, RackStorageURLKey); !ok && isRack {
			ok, set = true, func(sc *ServerConfig, v string) error { return setRackStorageURL(sc, rack, v) }
		}
		if !ok {
			return ServerConfig{}, fmt.Errorf("%w: line %d: unknown key %q (kwal broker --keys lists the keys)", ErrConfig, p.Line, p.Key)
		}
		if err := checkPropertyRange(p.Key, p.Value); err != nil {
			return ServerConfig{}, fmt.Errorf("line %d: %w", p.Line, err)
		}
		if err := set(&sc, p.Value); err != nil {
			return ServerConfig{}, fmt.Errorf("%w: line %d: %s=%q: %v", ErrConfig, p.Line, p.Key, p.Value, err)
		}
	}
	if err := sec.apply(&sc, getenv); err != nil {
		return ServerConfig{}, err
	}
	for _, ms := range sc.retention {
		if ms != -2 {
			// 0 would read as "the default" to Config; 1 ms is as good as
			// Kafka's "delete at once".
			sc.Broker.RetentionMs = max(ms, 1)
			if ms == -1 {
				sc.Broker.RetentionMs = -1
			}
			break
		}
	}
	if len(sc.Cluster) > 0 {
		found := false
		for _, b := range sc.Cluster {
			if b.ID == sc.Broker.BrokerID {
				found = true
				if b.Rack != sc.Broker.Rack && sc.Broker.Rack != "" {
					return ServerConfig{}, fmt.Errorf("%w: broker.rack=%q but cluster.brokers says %q for broker %d", ErrConfig, sc.Broker.Rack, b.Rack, b.ID)
				}
				sc.Broker.Rack = b.Rack
			}
		}
		if !found {
			return ServerConfig{}, fmt.Errorf("%w: cluster.brokers does not list broker.id=%d", ErrConfig, sc.Broker.BrokerID)
		}
	}
	if err := sc.validateCluster(); err != nil {
		return ServerConfig{}, err
	}
	return sc, nil
}

// LoadServerProperties parses r as server.properties.
func LoadServerProperties(r io.Reader) (ServerConfig, error) {
	props, err := ParseProperties(r)
	if err != nil {
		return ServerConfig{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return ServerConfigFromProperties(props)
}

// ParseClusterBrokers parses "id@host:port#rack,..." (the rack part is
// optional). Ids must be unique.
func ParseClusterBrokers(v string) ([]BrokerInfo, error) {
	var out []BrokerInfo
	seen := map[int32]bool{}
	for _, item := range splitList(v) {
		idStr, rest, ok := strings.Cut(item, "@")
		if !ok {
			return nil, fmt.Errorf("%q: want id@host:port#rack", item)
		}
		addr, rack, _ := strings.Cut(rest, "#")
		var b BrokerInfo
		if err := parseInt32(idStr, &b.ID); err != nil || b.ID < 0 {
			return nil, fmt.Errorf("%q: bad broker id", item)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", item, err)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("%q: bad port", item)
		}
		if seen[b.ID] {
			return nil, fmt.Errorf("broker id %d listed twice", b.ID)
		}
		seen[b.ID] = true
		b.Host, b.Port, b.Rack = host, int32(p), rack
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no brokers")
	}
	return out, nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseInt(v string, dst *int) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	*dst = n
	return err
}

func parseInt32(v string, dst *int32) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	*dst = int32(n)
	return err
}

func parseInt64(v string, dst *int64) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	*dst = n
	return err
}

func parseMs(v string, dst *time.Duration) error {
	var n int64
	if err := parseInt64(v, &n); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("negative duration")
	}
	*dst = time.Duration(n) * time.Millisecond
	return nil
}

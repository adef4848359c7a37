package metadata

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// DefaultTopic is the metadata topic the KIP names.
const DefaultTopic = "__remote_wal_log_metadata"

// TopicConfig describes the metadata topic and how to reach it.
type TopicConfig struct {
	// Bootstrap: remote.wal.metadata.bootstrap.servers. Required here; the
	// broker starts an Embedded cluster when the setting is empty and puts
	// its addresses here.
	Bootstrap []string
	// Topic defaults to DefaultTopic.
	Topic string
	// Partitions used when the topic is created; default 50 (as Kafka's
	// remote.log.metadata.topic.num.partitions). An existing topic keeps
	// its count, and every client uses the count the topic really has.
	Partitions int32
	// ReplicationFactor used at creation; default 1 (kfake, one laptop);
	// -1 means the cluster default.
	ReplicationFactor int16
	// Retention is the topic's retention.ms; default 1 hour. The KIP asks
	// for a value above every remote-WAL topic's local.retention.ms: past
	// it, the WAL objects are gone and so is the need for their metadata.
	Retention time.Duration
	// DeleteRetention is delete.retention.ms, how long tombstones outlive
	// compaction; default 1 minute.
	DeleteRetention time.Duration
	// ClientID for the franz-go clients; default "kwal-metadata".
	ClientID string
	// Security is TLS and SASL of the clients; zero: plaintext.
	Security ClientSecurity
}

// ClientSecurity is how a franz-go client reaches a secured Kafka.
type ClientSecurity struct {
	// TLS: dial with TLS with this config (nil: plaintext). Its
	// ServerName is filled per broker by franz-go when empty.
	TLS *tls.Config
	// SASL authenticates every connection (nil: none).
	SASL sasl.Mechanism
}

// Opts are the franz-go options for s.
func (s ClientSecurity) Opts() []kgo.Opt {
	var out []kgo.Opt
	if s.TLS != nil {
		out = append(out, kgo.DialTLSConfig(s.TLS.Clone()))
	}
	if s.SASL != nil {
		out = append(out, kgo.SASL(s.SASL))
	}
	return out
}

// Validate fills defaults and rejects nonsense.
func (c *TopicConfig) Validate() error {
	var errs []error
	if len(c.Bootstrap) == 0 {
		errs = append(errs, errors.New("no bootstrap servers"))
	}
	for _, b := range c.Bootstrap {
		if strings.TrimSpace(b) == "" {
			errs = append(errs, errors.New("empty bootstrap server"))
		}
	}
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.Partitions == 0 {
		c.Partitions = 50
	}
	if c.Partitions < 0 {
		errs = append(errs, fmt.Errorf("partitions %d < 0", c.Partitions))
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 1
	}
	if c.ReplicationFactor < -1 {
		errs = append(errs, fmt.Errorf("replication factor %d", c.ReplicationFactor))
	}
	if c.Retention == 0 {
		c.Retention = time.Hour
	}
	if c.Retention < time.Millisecond {
		errs = append(errs, fmt.Errorf("retention %v < 1ms", c.Retention))
	}
	if c.DeleteRetention == 0 {
		c.DeleteRetention = time.Minute
	}
	if c.DeleteRetention < 0 {
		errs = append(errs, fmt.Errorf("delete retention %v < 0", c.DeleteRetention))
	}
	if c.ClientID == "" {
		c.ClientID = "kwal-metadata"
	}
	if len(errs) > 0 {
		return fmt.Errorf("metadata: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

func (c *TopicConfig) topicConfigs() map[string]*string {
	s := func(v string) *string { return &v }
	return map[string]*string{
		"cleanup.policy":      s("compact,delete"),
		"retention.ms":        s(fmt.Sprint(c.Retention.Milliseconds())),
		"delete.retention.ms": s(fmt.Sprint(c.DeleteRetention.Milliseconds())),
	}
}

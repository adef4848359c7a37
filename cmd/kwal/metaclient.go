package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/metadata"
)

// metadataClientFlags adds --config to a command that reads the metadata
// Kafka: the broker's server.properties, whose remote.wal.metadata.* keys
// (security protocol, TLS, SASL; the password from
// KWAL_METADATA_SASL_PASSWORD) and bootstrap servers the command then
// uses. Credentials never come from flags.
type metadataClientFlags struct{ config *string }

func addMetadataClientFlags(fs *flag.FlagSet) metadataClientFlags {
	return metadataClientFlags{config: fs.String("config", "", "server.properties whose remote.wal.metadata.* keys (bootstrap, TLS, SASL) to use; the SASL password comes from "+broker.EnvMetadataSASLPassword)}
}

// topicConfig is the metadata client config: bootstrap from the flag,
// else from --config; security from --config.
func (m metadataClientFlags) topicConfig(bootstrap, topic string) (metadata.TopicConfig, error) {
	tc := metadata.TopicConfig{Topic: topic}
	if bootstrap != "" {
		tc.Bootstrap = strings.Split(bootstrap, ",")
	}
	if *m.config == "" {
		return tc, nil
	}
	f, err := os.Open(*m.config)
	if err != nil {
		return tc, err
	}
	defer f.Close()
	sc, err := broker.LoadServerProperties(f)
	if err != nil {
		return tc, fmt.Errorf("%s: %w", *m.config, err)
	}
	if tc.Security, err = sc.Broker.RemoteWAL.MetadataClient(); err != nil {
		return tc, err
	}
	if len(tc.Bootstrap) == 0 {
		for _, s := range strings.Split(sc.Broker.RemoteWAL.MetadataBootstrapServers, ",") {
			if s = strings.TrimSpace(s); s != "" {
				tc.Bootstrap = append(tc.Bootstrap, s)
			}
		}
	}
	return tc, nil
}

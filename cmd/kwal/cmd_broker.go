package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore/ledger"
	"github.com/kwal/kwal/rwnode"
	"github.com/twmb/franz-go/pkg/kerr"
)

func init() {
	register(command{
		words: []string{"broker"},
		short: "run one Kafka-compatible broker from a server.properties file",
		run:   runBroker,
	})
}

func runBroker(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kwal broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "server.properties file (Kafka's format; see broker.ServerPropertyKeys)")
	keys := fs.Bool("keys", false, "list the accepted server.properties keys, with defaults and allowed ranges, and exit")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *keys {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tDEFAULT\tRANGE\tNOTE")
		for _, d := range broker.ServerKeyDocs() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Key, orDash(d.Default), orDash(d.Range), d.Hint)
		}
		return tw.Flush()
	}
	var sc broker.ServerConfig
	if *config != "" {
		f, err := os.Open(*config)
		if err != nil {
			return err
		}
		sc, err = broker.LoadServerProperties(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *config, err)
		}
	} else {
		var err error
		if sc, err = broker.ServerConfigFromProperties(nil); err != nil {
			return err
		}
	}
	// Every setting is checked before anything is opened: a bad value
	// fails at once, naming the key, not after a timeout elsewhere.
	if err := sc.Broker.CheckSettings(); err != nil {
		return err
	}
	if err := broker.CheckLogDir(sc.Broker.LogDir); err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := sc.Broker
	cfg.Logger = logger
	wait := startWait{Bound: cfg.RemoteWAL.MetadataStartWait, Backoff: startWaitBackoff, Clock: clock.Real{}, Logger: logger}
	if wait.Bound <= 0 {
		wait.Bound = broker.DefaultMetadataStartWait
	}
	ctrl, closeCtrl, err := openController(sc, logger, wait)
	if err != nil {
		return err
	}
	defer closeCtrl()
	cfg.Controller = ctrl
	var closeRemoteWAL func()
	if cfg.RemoteWAL.SystemEnable {
		var parts *rwnode.RemoteWALParts
		err := wait.run(context.Background(), "the remote WAL's store and metadata Kafka",
			"remote.wal.storage.url="+cfg.RemoteWAL.StorageURL+" remote.wal.metadata.bootstrap.servers="+cfg.RemoteWAL.MetadataBootstrapServers,
			"check that both are up and the addresses are right", retryingAtStart(func(ctx context.Context) (err error) {
				ctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				parts, err = rwnode.OpenRemoteWALParts(ctx, &cfg, sc.Cluster)
				return err
			}))
		if err != nil {
			return err
		}
		if cfg.Ledger == nil {
			cfg.Ledger = ledger.New() // one ledger for the broker and its replicator
		}
		var r interface{ Close(context.Context) error }
		if parts.SelfHosted {
			// The metadata topic lives on this cluster, which is not
			// answering yet: build the replicator once it does.
			logger.Info("remote WAL metadata topic hosted by this cluster", "bootstrap", parts.Bootstrap,
				"replication_factor", parts.MetadataReplicationFactor)
			rc := cfg
			d := rwnode.NewDeferredReplicator(func() (*rwnode.RemoteWALReplicator, error) {
				return rwnode.NewRemoteWALReplicatorFor(&rc, parts, logger)
			}, selfHostedRetry, clock.Real{}, logger)
			cfg.Replicator, r = d, d
		} else {
			rr, err := rwnode.NewRemoteWALReplicatorFor(&cfg, parts, logger)
			if err != nil {
				parts.Close()
				return err
			}
			cfg.Replicator, r = rr, rr
		}
		closeRemoteWAL = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.Close(ctx); err != nil {
				logger.Error("closing the remote WAL", "err", err)
			}
			parts.Close()
		}
	}
	b, err := broker.New(cfg)
	if err != nil {
		if closeRemoteWAL != nil {
			closeRemoteWAL()
		}
		return err
	}
	if closeRemoteWAL != nil {
		defer closeRemoteWAL()
	}
	fmt.Fprintf(stdout, "kwal broker %d (rack %q) listening on %s, logs in %s\n", cfg.BrokerID, cfg.Rack, b.Addr(), cfg.LogDir)
	for _, l := range b.Info().Endpoints {
		addr, _ := b.ListenerAddr(l.Listener)
		fmt.Fprintf(stdout, "  listener %s on %s, advertised as %s\n", l.Listener, addr, l.Addr())
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
	return b.Shutdown()
}

// selfHostedRetry is how long a broker whose cluster hosts the metadata
// topic waits between attempts to reach it at start.
const selfHostedRetry = time.Second

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// openController picks the controller. With controller.bootstrap.servers
// (default: remote.wal.metadata.bootstrap.servers) set, the cluster state
// lives in that Kafka (topic broker.DefaultClusterStateTopic), shared by every
// broker pointed at it: a topic created on one broker is learned by all,
// and a restarted broker finds its topics again. The static cluster.brokers
// list fixes the broker set, so every process assigns alike. Without it
// the broker runs alone (or with a static list, computing the same
// assignment as its peers but learning nothing from them) on an in-memory
// controller; producer ids are then made disjoint by broker id and start
// time. With the metadata Kafka, brokers heartbeat into the state topic
// and a broker silent for broker.session.timeout.ms is fenced and its
// partitions get new leaders; the in-memory controller watches nobody.
//
// An unreachable controller Kafka is waited for (wait, startWait): each
// attempt is bounded by remote.wal.metadata.bootstrap.timeout.ms, the
// whole wait by remote.wal.metadata.start.wait.ms.
func openController(sc broker.ServerConfig, logger *slog.Logger, wait startWait) (broker.Controller, func(), error) {
	key, bootstrap, err := broker.ControllerBootstrap(&sc.Broker, sc.Cluster)
	if err != nil {
		return nil, nil, err
	}
	if len(bootstrap) == 0 {
		pidBase := int64(sc.Broker.BrokerID)<<48 | (time.Now().UnixMilli() & (1<<47 - 1))
		return broker.NewMemController(sc.Cluster, pidBase), func() {}, nil
	}
	sec, err := sc.Broker.RemoteWAL.MetadataClient()
	if err != nil {
		return nil, nil, err
	}
	session := sc.Broker.BrokerSessionTimeout
	if session == 0 {
		session = broker.DefaultBrokerSessionTimeout
	}
	timeout := sc.Broker.RemoteWAL.MetadataBootstrapTimeout
	if timeout <= 0 {
		timeout = broker.DefaultMetadataBootstrapTimeout
	}
	where := key + "=" + strings.Join(bootstrap, ",")
	var c *broker.KafkaController
	err = wait.run(context.Background(), "the controller's Kafka", where, "start it, or set "+key+" to a Kafka that is up",
		retryingAtStart(func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var err error
			c, err = broker.NewKafkaController(ctx, broker.KafkaControllerConfig{
				Security:  sec,
				Bootstrap: bootstrap,
				Brokers:   sc.Cluster,
				ClientID:  fmt.Sprintf("kwal-controller-%d", sc.Broker.BrokerID),
				Logger:    logger,
				// Liveness: every broker heartbeats into the state topic and
				// every broker's controller fences the silent (broker/doc.go).
				SessionTimeout:        session,
				UncleanLeaderElection: sc.Broker.UncleanLeaderElection,
			})
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("no usable answer within remote.wal.metadata.bootstrap.timeout.ms=%d: %w", timeout.Milliseconds(), err)
			}
			return err
		}))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: controller: %w", where, err)
	}
	return c, func() { c.Close() }, nil
}

// retryingAtStart stops a startWait at an error no retry mends: a
// refused setting (broker.ErrConfig) or a Kafka error that is not
// retriable (authentication, authorization, a topic of the wrong shape).
// Everything else (refused or timed-out connections, a Kafka still
// electing) is waited out.
func retryingAtStart(attempt func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		err := attempt(ctx)
		var ke *kerr.Error
		if errors.Is(err, broker.ErrConfig) || errors.As(err, &ke) && !ke.Retriable {
			return permanent{err}
		}
		return err
	}
}

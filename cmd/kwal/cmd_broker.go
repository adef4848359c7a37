package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kwal/kwal/broker"
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
	keys := fs.Bool("keys", false, "list the accepted server.properties keys and exit")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *keys {
		for _, k := range broker.ServerPropertyKeys() {
			fmt.Fprintln(stdout, k)
		}
		return nil
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
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := sc.Broker
	cfg.Logger = logger
	// Harness stand-in for a controller that keeps its state in the
	// metadata Kafka cluster: every broker given the same cluster.brokers
	// computes the same assignment; producer ids are made disjoint by
	// broker id and start time.
	pidBase := int64(cfg.BrokerID)<<48 | (time.Now().UnixMilli() & (1<<47 - 1))
	cfg.Controller = broker.NewMemController(sc.Cluster, pidBase)
	var closeRemoteWAL func()
	if cfg.RemoteWAL.SystemEnable {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		parts, err := broker.OpenRemoteWALParts(ctx, &cfg)
		cancel()
		if err != nil {
			return err
		}
		r, err := broker.NewRemoteWALReplicatorFor(&cfg, parts, logger)
		if err != nil {
			parts.Close()
			return err
		}
		cfg.Replicator = r
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
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
	return b.Close()
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/kwal/kwal/cmd/kwal/internal/audit"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/storeurl"
)

func init() {
	register(command{
		words: []string{"audit"},
		short: "rebuild the metadata from the combined objects alone and compare it with the metadata topic",
		run:   runAudit,
	})
}

func runAudit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kwal audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "", "object store URL (remote.wal.storage.url): file:///dir, s3://bucket/prefix?endpoint=…, minio://…")
	prefix := fs.String("prefix", "", "the combiner's key prefix inside the store")
	storeID := fs.String("store-id", "", "the store's id in the metadata: its rack with one store per rack (remote.wal.storage.url.<rack>), empty for the default store")
	bootstrap := fs.String("bootstrap", "", "Kafka with __remote_wal_log_metadata (host:port,…); empty checks the objects alone")
	topic := fs.String("topic", "__remote_wal_log_metadata", "metadata topic")
	verify := fs.Bool("verify-slices", false, "also read every slice and check its CRC32C")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	mc := addMetadataClientFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *store == "" {
		return errors.New("--store is required (the remote.wal.storage.url of the brokers)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := storeurl.Open(ctx, *store)
	if err != nil {
		return err
	}
	cfg := audit.Config{Store: s, Prefix: *prefix, StoreID: *storeID, VerifySlices: *verify, Logger: logger, Progress: stderr}
	tc, err := mc.topicConfig(*bootstrap, *topic)
	if err != nil {
		return err
	}
	if len(tc.Bootstrap) > 0 {
		st := metadata.NewState()
		bad := 0
		err := metadata.ReadTopic(ctx, tc, logger, func(r metadata.TopicRecord) error {
			if r.Err != nil {
				bad++
				logger.Warn("audit: undecodable metadata record", "partition", r.Partition, "offset", r.Offset, "err", r.Err)
				return nil
			}
			if err := st.Apply(r.Event); err != nil {
				logger.Warn("audit: metadata event refused by the state machine", "partition", r.Partition, "offset", r.Offset, "err", err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("reading %s from %s: %w", *topic, *bootstrap, err)
		}
		if bad > 0 {
			fmt.Fprintf(stdout, "%d metadata records could not be decoded (see the log)\n", bad)
		}
		cfg.Metadata = st
	}
	rep, err := audit.Run(ctx, cfg)
	if err != nil {
		return err
	}
	audit.WriteText(stdout, rep)
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := audit.WriteJSON(f, rep); err != nil {
			return err
		}
	}
	if !rep.OK() {
		return fmt.Errorf("%d findings", len(rep.Findings))
	}
	return nil
}

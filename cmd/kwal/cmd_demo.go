package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kwal/kwal/cmd/kwal/internal/demo"
)

func init() {
	register(command{
		words: []string{"demo"},
		short: "3 brokers in 2 racks in one process: produce acks=all, consume from the follower's rack, summary",
		run:   runDemo,
	})
}

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kwal demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg demo.Config
	fs.IntVar(&cfg.Records, "records", 20000, "records to produce")
	fs.IntVar(&cfg.RecordBytes, "record-bytes", 1024, "payload bytes per record")
	fs.IntVar(&cfg.Rate, "rate", 4000, "records per second the producer sends (0: unthrottled)")
	var partitions int
	fs.IntVar(&partitions, "partitions", 3, "partitions of the demo topic")
	fs.StringVar(&cfg.Topic, "topic", "kwal-demo", "topic name")
	fs.StringVar(&cfg.Mode, "mode", "remotewal", "replication mode of the topic: remotewal or classic")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for logs and the fs object store (default: a temporary one)")
	fs.StringVar(&cfg.StorageURL, "store", "", "remote.wal.storage.url: s3://bucket/prefix?endpoint=…, minio://…, file:///dir (default: fs in --dir)")
	fs.BoolVar(&cfg.StorePerRack, "store-per-rack", false, "one store per rack, as the KIP puts a bucket in each AZ (--store is then a {rack} template)")
	fs.StringVar(&cfg.LatencyModel, "latency-model", "s3express", "object-store latency model: s3express, s3standard or none")
	fs.StringVar(&cfg.MetadataBootstrap, "metadata-bootstrap", "", "Kafka for __remote_wal_log_metadata (default: embedded kfake)")
	fs.DurationVar(&cfg.Interval, "interval", 10*time.Millisecond, "combiner interval (remote.wal.log.manager.combiner.task.interval.ms)")
	fs.StringVar(&cfg.Bootstrap, "bootstrap", "", "run only the clients against a running cluster (e.g. docker-compose)")
	fs.StringVar(&cfg.ConsumerRack, "rack", "az2", "the consumer's rack")
	fs.StringVar(&cfg.ProducerRack, "producer-rack", "az1", "the rack the producer runs in (producers send no rack; their bytes are attributed to it)")
	fs.BoolVar(&cfg.Serve, "serve", false, "keep the cluster up after the summary, until interrupted")
	verbose := fs.Bool("v", false, "log at info level (default: warnings only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Partitions = int32(partitions)
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	return demo.Run(context.Background(), cfg, stdout)
}

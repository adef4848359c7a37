package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kwal/kwal/cmd/kwal/internal/brokerbench"
)

func init() {
	register(command{
		words: []string{"bench", "broker"},
		short: "produce throughput (franz-go, acks=1/all, classic/remotewal) against kfake and loopback TCP",
		run:   runBenchBroker,
	})
}

func runBenchBroker(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kwal bench broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg brokerbench.Config
	fs.IntVar(&cfg.Records, "records", 200000, "records per case")
	fs.IntVar(&cfg.RecordBytes, "record-bytes", 1024, "bytes per record")
	var parts int
	fs.IntVar(&parts, "partitions", 6, "partitions per topic")
	fs.IntVar(&cfg.Runs, "runs", 3, "repetitions (medians reported)")
	fs.StringVar(&cfg.LatencyModel, "latency-model", "s3express", "object-store latency model for remotewal: s3express, s3standard, none")
	quick := fs.Bool("quick", false, "fewer records (CI)")
	out := fs.String("json", "", "also write the report as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Partitions = int32(parts)
	if *quick {
		cfg.Records = 30000
	}
	rep, err := brokerbench.Run(context.Background(), cfg, stderr)
	if err != nil {
		return err
	}
	brokerbench.WriteTable(stdout, rep)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := brokerbench.WriteJSON(f, rep); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "JSON: %s\n", *out)
	}
	return nil
}

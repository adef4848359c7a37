package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kwal/kwal/cmd/kwal/internal/replbench"
)

func init() {
	register(command{
		words: []string{"bench", "replication"},
		short: "remote-WAL replication lag by stage (queue, PUT, publish, metadata delivery, GET, append)",
		run:   runBenchReplication,
	})
}

func runBenchReplication(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("kwal bench replication", stderr)
	var cfg replbench.Config
	fs.IntVar(&cfg.Partitions, "partitions", 20, "partitions on the leader")
	fs.IntVar(&cfg.BatchBytes, "batch-bytes", 4096, "bytes per produced batch of 1 KiB records")
	fs.Float64Var(&cfg.RateMBps, "rate", 4, "produced MB/s over all partitions")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "how long each run produces")
	fs.DurationVar(&cfg.Interval, "interval", 10*time.Millisecond, "combiner interval")
	fs.DurationVar(&cfg.TaskInterval, "task-interval", 5*time.Millisecond, "remote-WAL task interval (the tasks hold their bytes until the combiner calls for them, so this is only the retry delay after a failed cut)")
	fs.Int64Var(&cfg.UploadBytes, "upload-bytes", 256<<10, "combiner upload size")
	latencyModelFlag(fs, &cfg.LatencyModel)
	runs := fs.Int("runs", 3, "repetitions (medians are reported)")
	quick := fs.Bool("quick", false, "short runs for CI (2 s each)")
	out := fs.String("json", "", "also write every figure as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *quick {
		cfg.Duration = 2 * time.Second
	}
	var results []*replbench.Result
	for i := 0; i < *runs; i++ {
		fmt.Fprintf(stderr, "run %d/%d\n", i+1, *runs)
		r, err := replbench.Run(context.Background(), cfg, stderr)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	replbench.WriteTable(stdout, results)
	if *out == "" {
		return nil
	}
	return writeJSONFile(stdout, *out, func(w io.Writer) error { return replbench.WriteJSON(w, results) })
}

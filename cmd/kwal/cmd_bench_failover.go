package main

import (
	"context"
	"io"
	"time"

	"github.com/kwal/kwal/cmd/kwal/internal/failbench"
)

func init() {
	register(command{
		words: []string{"bench", "failover"},
		short: "leader killed N times under load (classic/remotewal): time to a new leader and to the first ack, records lost",
		run:   runBenchFailover,
	})
}

func runBenchFailover(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("kwal bench failover", stderr)
	var cfg failbench.Config
	fs.IntVar(&cfg.Kills, "kills", 5, "leader kills per mode")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", 9*time.Second, "broker.session.timeout.ms")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", 2*time.Second, "broker.heartbeat.interval.ms")
	fs.IntVar(&cfg.RecordBytes, "record-bytes", 256, "bytes per record")
	latencyModelFlag(fs, &cfg.LatencyModel)
	quick := fs.Bool("quick", false, "2 kills per mode, 1 s session timeout (CI)")
	out := fs.String("out", "", "also write report.json and failover.png into this directory")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if *quick {
		cfg.Kills, cfg.SessionTimeout, cfg.HeartbeatInterval = 2, time.Second, 200*time.Millisecond
	}
	rep, err := failbench.Run(context.Background(), cfg, stderr)
	if err != nil {
		return err
	}
	failbench.WriteTable(stdout, rep)
	if *out == "" {
		return nil
	}
	return writeReportFiles(stdout, *out, map[string]func(io.Writer) error{
		"report.json":  func(w io.Writer) error { return failbench.WriteJSON(w, rep) },
		"failover.png": func(w io.Writer) error { return failbench.WritePNG(w, rep) },
	})
}

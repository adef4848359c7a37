package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kwal/kwal/cmd/kwal/internal/brokerbench"

	"github.com/kwal/kwal/cmd/kwal/internal/benchreport"
)

func init() {
	register(command{
		words: []string{"bench", "broker"},
		short: "produce throughput (franz-go, acks=1/all, classic/remotewal) against kfake and loopback TCP; one broker RF 1 in its own process: produce/consume MB/s, broker CPU-s/GB",
		run:   runBenchBroker,
	})
	register(command{
		words: []string{"bench", "broker-client"},
		short: "(used by bench broker) one franz-go producer or consumer process; prints JSON",
		run:   runBenchBrokerClient,
	})
	register(command{
		words: []string{"bench", "kfake-server"},
		short: "(used by bench broker) one kfake broker on loopback until SIGTERM",
		run:   runBenchKfakeServer,
	})
}

func runBenchBroker(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("kwal bench broker", stderr)
	var cfg brokerbench.Config
	fs.IntVar(&cfg.Records, "records", 200000, "records per case (in process)")
	fs.IntVar(&cfg.RecordBytes, "record-bytes", 1024, "bytes per record")
	var parts int
	fs.IntVar(&parts, "partitions", 6, "partitions per topic")
	fs.IntVar(&cfg.Runs, "runs", 3, "repetitions (medians reported)")
	fs.StringVar(&cfg.LatencyModel, "latency-model", "s3express", "object-store latency model for remotewal (in process): s3express, s3standard, none")
	oneRecords := fs.Int("one-broker-records", 300000, "records per target in the one-broker case")
	cases := fs.String("cases", "in-process,one-broker", "which cases: in-process (RF 3, three brokers, client in process), one-broker (RF 1, broker, kfake and client in separate processes)")
	quick := fs.Bool("quick", false, "fewer records (CI)")
	out := fs.String("json", "", "also write the report as JSON to this file")
	outDir := fs.String("out", "", "also write report.json and the one-broker plots (onebroker-throughput.png, onebroker-cpu.png) into this directory")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	cfg.Partitions = int32(parts)
	if *quick {
		cfg.Records, *oneRecords = 30000, 30000
	}
	want := map[string]bool{}
	for _, c := range strings.Split(*cases, ",") {
		switch c = strings.TrimSpace(c); c {
		case "in-process", "one-broker":
			want[c] = true
		default:
			return fmt.Errorf("--cases: unknown case %q (in-process, one-broker)", c)
		}
	}
	full := struct {
		InProcess *brokerbench.Report          `json:"in_process,omitempty"`
		OneBroker *brokerbench.OneBrokerReport `json:"one_broker,omitempty"`
	}{}
	if want["in-process"] {
		rep, err := brokerbench.Run(context.Background(), cfg, stderr)
		if err != nil {
			return err
		}
		brokerbench.WriteTable(stdout, rep)
		full.InProcess = rep
		if *out != "" {
			if err := writeJSONFile(stdout, *out, func(w io.Writer) error { return brokerbench.WriteJSON(w, rep) }); err != nil {
				return err
			}
		}
	}
	if want["one-broker"] {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		rep, err := brokerbench.RunOneBroker(context.Background(), brokerbench.OneBrokerConfig{
			Exe: exe, Records: *oneRecords, RecordBytes: cfg.RecordBytes, Partitions: cfg.Partitions, Runs: cfg.Runs,
		}, stderr)
		if err != nil {
			return err
		}
		if full.InProcess != nil {
			fmt.Fprintln(stdout)
		}
		brokerbench.WriteOneBrokerTable(stdout, rep)
		full.OneBroker = rep
	}
	if *outDir == "" {
		return nil
	}
	files := map[string]func(io.Writer) error{
		"report.json": func(w io.Writer) error { return benchreport.WriteJSON(w, full) },
	}
	if full.OneBroker != nil {
		files["onebroker-throughput.png"] = func(w io.Writer) error { return brokerbench.WriteOneBrokerPNG(w, full.OneBroker, false) }
		files["onebroker-cpu.png"] = func(w io.Writer) error { return brokerbench.WriteOneBrokerPNG(w, full.OneBroker, true) }
	}
	return writeReportFiles(stdout, *outDir, files)
}

func runBenchBrokerClient(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("kwal bench broker-client", stderr)
	var cfg brokerbench.ClientConfig
	bootstrap := fs.String("bootstrap", "", "host:port[,host:port]")
	fs.StringVar(&cfg.Topic, "topic", "", "topic")
	fs.StringVar(&cfg.Mode, "mode", "produce", "produce or consume")
	fs.IntVar(&cfg.Records, "records", 0, "records to produce, or to consume before stopping")
	fs.IntVar(&cfg.RecordBytes, "record-bytes", 1024, "bytes per record")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Bootstrap = strings.Split(*bootstrap, ",")
	res, err := brokerbench.RunClient(context.Background(), cfg)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

func runBenchKfakeServer(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("kwal bench kfake-server", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	fake, err := brokerbench.StartKfake()
	if err != nil {
		return err
	}
	defer fake.Close()
	fmt.Fprintf(stdout, "kfake listening on %s\n", fake.ListenAddrs()[0])
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
	return nil
}

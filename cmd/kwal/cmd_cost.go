package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kwal/kwal/cost"
)

func init() {
	register(command{
		words: []string{"cost"},
		short: "price the remote WAL against classic replication (KIP-1176 appendix, sensitivity, break-even)",
		run:   runCost,
	})
}

func runCost(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kwal cost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kip := fs.Bool("kip", false, "print the reproduced KIP-1176 table with its assumptions, then the fully counted tables")
	sens := fs.Bool("sensitivity", false, "print the sensitivity tables and the break-even table")
	sheets := fs.String("sheets", "", "directory of extra price-sheet *.json files (see cost/sheets for the format)")
	jsonFile := fs.String("json", "", "write the whole report as JSON to this file")
	outDir := fs.String("out", filepath.Join("out", "cost"), "directory for the break-even chart (breakeven.png)")
	interval := fs.Duration("interval", 0, "upload interval (default: the KIP's 10ms)")
	mbps := fs.Float64("mbps", 0, "inbound MB/s per broker (default: the KIP's 112 GB/h = 33.4 MB/s)")
	partitions := fs.Int("partitions", 0, "leader partitions per broker, slices per object (default 1)")
	spread := fs.Int("spread", 0, "brokers over which one broker's followers are spread (default 1, paired)")
	readers := fs.Int("readers", -1, "remote-WAL reading followers (default 1)")
	rf := fs.Int("rf", 0, "baseline replication factor (default 3)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	book, err := cost.DefaultBook()
	if err != nil {
		return err
	}
	if *sheets != "" {
		if err := book.LoadDir(*sheets); err != nil {
			return err
		}
	}
	m, err := cost.NewModel(book)
	if err != nil {
		return err
	}
	w := cost.KIPWorkload()
	if *interval != 0 {
		w.UploadInterval = *interval
	}
	if *mbps != 0 {
		w = w.WithInboundMBps(*mbps, m.BytesPerGB)
	}
	if *partitions != 0 {
		w.PartitionsPerBroker = *partitions
	}
	if *spread != 0 {
		w.FollowerSpread = *spread
	}
	if *readers >= 0 {
		w.ReadingFollowers = *readers
	}
	if *rf != 0 {
		w.ReplicationFactor = *rf
	}
	r, err := m.BuildReport(w, book)
	if err != nil {
		return err
	}

	switch {
	case *kip && *sens:
		cost.WriteKIP(stdout, r)
		cost.WriteSensitivity(stdout, r)
	case *kip:
		cost.WriteKIP(stdout, r)
	case *sens:
		cost.WriteSensitivity(stdout, r)
	default:
		cost.WriteSummary(stdout, r)
	}

	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	var png bytes.Buffer
	if err := cost.WriteBreakEvenPNG(&png, r); err != nil {
		return err
	}
	chart := filepath.Join(*outDir, "breakeven.png")
	if err := os.WriteFile(chart, png.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s", chart)
	if *jsonFile != "" {
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonFile, append(data, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, ", %s", *jsonFile)
	}
	fmt.Fprintln(stdout)
	if !*kip && !*sens {
		fmt.Fprintln(stdout, "more: kwal cost --kip (the KIP table, what it leaves out, everything counted), --sensitivity, --json FILE")
	}
	return nil
}

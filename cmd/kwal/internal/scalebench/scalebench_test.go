package scalebench

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"strings"
	"testing"
	"time"
)

// TestRunTiny runs the benchmark on tiny counts and checks that every
// figure was measured, not left at zero, and that the outputs parse.
func TestRunTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded kfake and the remote-WAL node")
	}
	cfg := Quick()
	cfg.Partitions, cfg.RateMBps, cfg.Duration, cfg.Warmup = []int{3, 12}, 2, 1500*time.Millisecond, 300*time.Millisecond
	var progress bytes.Buffer
	rep, err := Run(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want 2", len(rep.Results))
	}
	for _, r := range rep.Results {
		// How far below the rate the producers fall depends on the CPU
		// they get, which a test must not judge; the pacer must never run
		// above the rate.
		if !(r.ProducedMBps > 0) || r.ProducedMBps > cfg.RateMBps*1.5 {
			t.Errorf("%d partitions: produced %.2f MB/s, target %.1f", r.Partitions, r.ProducedMBps, cfg.RateMBps)
		}
		if r.IndexedPartitions != r.Partitions {
			t.Errorf("%d partitions: the follower indexed %d", r.Partitions, r.IndexedPartitions)
		}
		for name, v := range map[string]float64{
			"PUTs/s": r.PutsPerS, "metadata events/s": r.MetaEventsPerS, "metadata bytes/s": r.MetaBytesPerS,
			"metadata topic bytes": float64(r.MetaBytes), "bootstrap ms": r.BootstrapMs,
			"bootstrap records": float64(r.BootstrapRecords), "heap": r.HeapMB, "rss": r.RSSMB,
			"cpu": r.CPUPerS, "GETs/s": r.GetsPerS, "$": r.CostUSD, "steady topic bytes": r.MetaSteadyBytes,
		} {
			if !(v > 0) {
				t.Errorf("%d partitions: %s = %v, want > 0", r.Partitions, name, v)
			}
		}
		// The window's events are part of what the topic holds.
		if float64(r.MetaRecords) < r.MetaEventsPerS*r.WindowS {
			t.Errorf("%d partitions: topic holds %d records, fewer than the window's %.0f", r.Partitions, r.MetaRecords, r.MetaEventsPerS*r.WindowS)
		}
		if r.CostLines["PUT requests"] <= 0 || r.CostLines["GET requests"] <= 0 {
			t.Errorf("%d partitions: cost lines %v lack PUTs or GETs", r.Partitions, r.CostLines)
		}
	}
	if !strings.Contains(progress.String(), "12 partitions done") {
		t.Errorf("no progress line for the last count in %q", progress.String())
	}
	var table bytes.Buffer
	WriteTable(&table, rep)
	for _, want := range []string{"PUTs/s", "follower bootstrap ms", "$ per broker-month", "metadata topic MB"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Results) != 2 {
		t.Fatalf("JSON does not round-trip: %v", err)
	}
	var img bytes.Buffer
	if err := WritePNG(&img, rep); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&img); err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
}

func TestConfigRefused(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"no counts":       func(c *Config) { c.Partitions = nil },
		"zero count":      func(c *Config) { c.Partitions = []int{0} },
		"zero rate":       func(c *Config) { c.RateMBps = 0 },
		"odd batch":       func(c *Config) { c.BatchBytes = c.RecordBytes + 1 },
		"no producers":    func(c *Config) { c.Producers = 0 },
		"unknown store":   func(c *Config) { c.Store = "tape" },
		"unknown model":   func(c *Config) { c.LatencyModel = "carrier-pigeon" },
		"unknown sheet":   func(c *Config) { c.Sheet = "nope" },
		"negative reader": func(c *Config) { c.Readers = -1 },
	} {
		c := Quick()
		mut(&c)
		if _, err := Run(context.Background(), c, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

package latbench

import (
	"slices"
	"testing"
	"time"

	"github.com/kwal/kwal/broker"
)

func TestValidateDefaults(t *testing.T) {
	var c Config
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Reps != 3 || c.CrossAZ != 500*time.Microsecond || c.LatencyModel != "s3express" || c.Sheet != "s3express-2025" ||
		c.PerfRecords != 100_000 || c.E2ERecords != 100 || c.PerfRecordBytes != 2000 || c.ReplicationFactor != 2 || c.ProducePartitions != 1 {
		t.Errorf("defaults: %+v", c)
	}
	if len(c.Intervals) != 5 || len(c.UploadSizes) != 3 {
		t.Errorf("full sweep: %v x %v", c.Intervals, c.UploadSizes)
	}
	q := Config{Quick: true, LatencyModel: "s3standard"}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	if q.Reps < 3 || q.PerfRecords >= 100_000 || len(q.Intervals)*len(q.UploadSizes) >= 15 || q.Sheet != "s3-standard" {
		t.Errorf("quick: %+v", q)
	}
	off := Config{NoCrossAZ: true}
	if err := off.Validate(); err != nil || off.CrossAZ != 0 {
		t.Errorf("NoCrossAZ: %v, %v", off.CrossAZ, err)
	}
}

func TestValidateRejects(t *testing.T) {
	for name, c := range map[string]Config{
		"two reps":            {Reps: 2},
		"bad model":           {LatencyModel: "s3glacier"},
		"rf 1":                {ReplicationFactor: 1},
		"negative latency":    {CrossAZ: -time.Millisecond},
		"zero interval":       {Intervals: []time.Duration{0}},
		"consume alone":       {Workloads: []Workload{Consume}},
		"unknown workload":    {Workloads: []Workload{"soak"}},
		"negative partitions": {ProducePartitions: -1},
		"too many partitions": {ProducePartitions: maxProducePartitions + 1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
}

func TestPlan(t *testing.T) {
	c := Config{Quick: true, Intervals: []time.Duration{5 * time.Millisecond, 50 * time.Millisecond}, UploadSizes: []int64{1 << 20}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	phases := Plan(c)
	if len(phases) != 3 || !phases[0].Headline || phases[1].Headline {
		t.Fatalf("phases: %+v", phases)
	}
	if phases[0].Setting != c.Headline || phases[1].Setting != (Setting{5 * time.Millisecond, 1 << 20}) {
		t.Errorf("settings: %v, %v", phases[0].Setting, phases[1].Setting)
	}
	head := phases[0].Steps
	if len(head) != len(HeadlineWorkloads())*c.Reps*2 {
		t.Fatalf("%d headline steps", len(head))
	}
	// Every (workload, mode) runs Reps times; modes alternate, and which
	// goes first alternates per repetition.
	count := map[[2]string]int{}
	for i, s := range head {
		count[[2]string{string(s.Workload), s.Mode}]++
		if i%2 == 1 {
			prev := head[i-1]
			if prev.Workload != s.Workload || prev.Rep != s.Rep || prev.Mode == s.Mode {
				t.Errorf("steps %d,%d are not one repetition of both modes: %+v %+v", i-1, i, prev, s)
			}
			if first := modeOrder(s.Rep)[0]; prev.Mode != first {
				t.Errorf("rep %d starts with %s, want %s", s.Rep, prev.Mode, first)
			}
		}
	}
	for k, n := range count {
		if n != c.Reps {
			t.Errorf("%v runs %d times", k, n)
		}
	}
	// Consume reads what Produce wrote: every Consume comes after the
	// Produce of its mode and repetition.
	for i, s := range head {
		if s.Workload != Consume {
			continue
		}
		if !slices.ContainsFunc(head[:i], func(p Step) bool { return p.Workload == Produce && p.Mode == s.Mode && p.Rep == s.Rep }) {
			t.Errorf("consume %+v before its produce", s)
		}
	}
	for _, ph := range phases[1:] {
		if len(ph.Steps) != 2*c.Reps || ph.Steps[0].Workload != Stream {
			t.Errorf("sweep phase %+v", ph)
		}
	}
	c.NoSweep = true
	c.Workloads = []Workload{E2E}
	if ps := Plan(c); len(ps) != 1 || len(ps[0].Steps) != 2*c.Reps {
		t.Errorf("no sweep, E2E only: %+v", ps)
	}
}

func TestTopicNamePlacement(t *testing.T) {
	brokers := []broker.BrokerInfo{{ID: 1, Rack: "az1"}, {ID: 2, Rack: "az2"}, {ID: 3, Rack: "az2"}}
	rack := map[int32]string{1: "az1", 2: "az2", 3: "az2"}
	for _, rf := range []int16{2, 3} {
		seen := map[string]bool{}
		for _, prefix := range []string{"a", "e2e-acks1-classic-p0-r0", "produce-acksall-remotewal-p3-r2"} {
			name, err := TopicName(prefix, brokers, rf)
			if err != nil {
				t.Fatal(err)
			}
			if seen[name] {
				t.Errorf("duplicate name %s", name)
			}
			seen[name] = true
			ps, err := broker.AssignReplicas(name, 1, rf, brokers)
			if err != nil {
				t.Fatal(err)
			}
			if rack[ps[0].Leader] == consumerRack || !placementOK(ps[0], rack) {
				t.Errorf("rf %d: %s placed %+v", rf, name, ps[0])
			}
		}
	}
	if _, err := TopicName("x", []broker.BrokerInfo{{ID: 1, Rack: "az2"}, {ID: 2, Rack: "az2"}}, 2); err == nil {
		t.Error("all brokers in the consumer's rack: want an error")
	}
}

func TestHumanBytes(t *testing.T) {
	for in, want := range map[int64]string{64 << 10: "64KiB", 4 << 20: "4MiB", 1500: "1.5KiB", 100: "100B"} {
		if got := humanBytes(in); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

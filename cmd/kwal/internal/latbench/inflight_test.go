package latbench

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceRuns returns three repetitions of ProduceAll in both modes with
// wire figures: classic requests of 16,000 B take rtt(classic) on the
// wire and the run achieves mbps(classic); likewise the remote WAL.
func produceRuns() []RunResult {
	var runs []RunResult
	head := Setting{10 * time.Millisecond, 4 << 20}
	for rep := 0; rep < 3; rep++ {
		for _, mode := range []string{Classic, RemoteWAL} {
			rtt, mbps := 2*time.Millisecond, 32.0
			if mode == RemoteWAL {
				rtt, mbps = 16*time.Millisecond, 4.0
			}
			// Rep 1 is the median: reps 0 and 2 straddle it.
			rtt += time.Duration(rep-1) * 100 * time.Microsecond
			mbps += float64(rep-1) * 0.5
			rtts := []time.Duration{rtt - time.Millisecond, rtt, rtt + time.Millisecond}
			// CPU: 10 ms per MB classic, 15 remote WAL (rep 1, the median).
			cpu := time.Duration(2000+rep*100) * time.Millisecond
			if mode == RemoteWAL {
				cpu += 1000 * time.Millisecond
			}
			run := RunResult{Headline: true, Setting: head, Step: Step{Workload: ProduceAll, Mode: mode, Rep: rep},
				Records: 1000, Bytes: 210_000_000, CPU: cpu, MBPerSec: mbps, Wire: WireFigures{RTT: Summarize(rtts), Requests: 3, RequestBytes: 3 * 16_000, Connections: 1}}
			if mode == RemoteWAL {
				// The store: PUT p50 4 ms, GET p50 3 ms (rep 1).
				d := time.Duration(rep-1) * 100 * time.Microsecond
				run.StorePut = Summarize([]time.Duration{4*time.Millisecond + d})
				run.StoreGet = Summarize([]time.Duration{3*time.Millisecond + d})
			}
			runs = append(runs, run)
		}
	}
	return runs
}

func TestInFlightBoundFromTheRunsOwnFigures(t *testing.T) {
	r := &Report{Runs: produceRuns()}
	r.Aggregate()
	if len(r.InFlight) != 2 {
		t.Fatalf("%d in-flight rows, want 2: %+v", len(r.InFlight), r.InFlight)
	}
	c, rw := r.InFlight[0], r.InFlight[1]
	if c.Mode != Classic || rw.Mode != RemoteWAL {
		t.Fatalf("rows %+v", r.InFlight)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	// Java's max.in.flight: 5. Classic: 5 × 16,000 B / 2 ms = 40 MB/s;
	// achieved 32 MB/s, 0.8 of it.
	if c.Window != 5 || c.MeanRTT != 2*time.Millisecond || c.MeanRequestByte != 16_000 {
		t.Errorf("classic %+v", c)
	}
	near("classic bound", c.BoundMBPerSec, 40)
	near("classic of bound", c.OfBound, 0.8)
	if c.RTTForHalfClassic != 0 {
		t.Errorf("classic row carries a half-classic round trip %v", c.RTTForHalfClassic)
	}
	// Remote WAL: 5 × 16,000 / 16 ms = 5 MB/s, 4 achieved: 0.8. Half of
	// classic's 32 MB/s with 16,000 B requests, 5 in flight: 5 ms.
	near("remotewal bound", rw.BoundMBPerSec, 5)
	near("remotewal of bound", rw.OfBound, 0.8)
	if rw.RTTForHalfClassic != 5*time.Millisecond {
		t.Errorf("RTT for 0.5x classic = %v, want 5ms", rw.RTTForHalfClassic)
	}
	// The store's floor: PUT p50 4 ms + GET p50 3 ms, more than the 5 ms
	// half of classic needs.
	if rw.StoreFloor != 7*time.Millisecond || c.StoreFloor != 0 {
		t.Errorf("store floor: remotewal %v, classic %v; want 7ms and none", rw.StoreFloor, c.StoreFloor)
	}

	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"### The producer's in-flight bound (Little's law)",
		"| produce-acksall | classic | 1 | 5 | 2.00 | 2.00 | 16.0 | 40.00 | 32.00 | 0.80 | - | 10.00 |",
		"| produce-acksall | remotewal | 1 | 5 | 16.0 | 16.0 | 16.0 | 5.00 | 4.00 | 0.80 | 5.00 | 14.76 |",
		"cannot be below the store's PUT p50 + GET p50 as this run measured them: 7.00 ms. Half of classic's throughput needs a round trip of 5.00 ms: the store alone takes more than that",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// With partitions led by several brokers the producer keeps a window per
// connection: the bound, and the round trip half of classic needs, grow
// with the connections.
func TestInFlightBoundCountsConnections(t *testing.T) {
	runs := produceRuns()
	for i := range runs {
		runs[i].Wire.Connections = 3
	}
	runs[0].Wire.Connections = 2 // one run of classic saw two: the median is 3
	r := &Report{Runs: runs}
	r.Aggregate()
	if len(r.InFlight) != 2 {
		t.Fatalf("%d in-flight rows, want 2", len(r.InFlight))
	}
	c, rw := r.InFlight[0], r.InFlight[1]
	// Classic: 3 × 5 × 16,000 B / 2 ms = 120 MB/s. Remote WAL: 3 × 5 ×
	// 16,000 / 16 ms = 15 MB/s; half of classic's 32 MB/s: 15 ms.
	if c.Connections != 3 || rw.Connections != 3 || c.Window != 5 {
		t.Fatalf("connections %d and %d, window %d; want 3, 3 and 5", c.Connections, rw.Connections, c.Window)
	}
	if math.Abs(c.BoundMBPerSec-120) > 1e-9 || math.Abs(rw.BoundMBPerSec-15) > 1e-9 {
		t.Errorf("bounds %v and %v MB/s, want 120 and 15", c.BoundMBPerSec, rw.BoundMBPerSec)
	}
	if rw.RTTForHalfClassic != 15*time.Millisecond {
		t.Errorf("RTT for 0.5x classic = %v, want 15ms", rw.RTTForHalfClassic)
	}
	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	// The store's 7 ms floor is now within the 15 ms half of classic needs.
	if md := b.String(); !strings.Contains(md, "| produce-acksall | remotewal | 3 | 5 | 16.0 |") ||
		!strings.Contains(md, "the store alone takes less than that") {
		t.Errorf("report:\n%s", md)
	}
}

func TestInFlightNeedsWireFigures(t *testing.T) {
	runs := produceRuns()
	for i := range runs {
		if runs[i].Mode == Classic {
			runs[i].Wire = WireFigures{}
		}
	}
	r := &Report{Runs: runs}
	r.Aggregate()
	if len(r.InFlight) != 1 || r.InFlight[0].Mode != RemoteWAL || r.InFlight[0].RTTForHalfClassic != 0 {
		t.Fatalf("without classic wire figures: %+v", r.InFlight)
	}
	// E2E rows never get a bound, whatever they carry.
	for i := range runs {
		runs[i].Workload = E2E
	}
	r = &Report{Runs: runs}
	r.Aggregate()
	if len(r.InFlight) != 0 {
		t.Fatalf("E2E rows got in-flight bounds: %+v", r.InFlight)
	}
}

func TestWireRecorderCountsProduceAfterStart(t *testing.T) {
	var w wireRecorder
	e := kgo.BrokerE2E{BytesWritten: 100, TimeToWrite: time.Millisecond, ReadWait: 2 * time.Millisecond, TimeToRead: time.Millisecond}
	w.OnBrokerE2E(kgo.BrokerMetadata{}, produceKey, e) // warm-up: before start
	w.start()
	w.OnBrokerE2E(kgo.BrokerMetadata{}, produceKey, e)
	w.OnBrokerE2E(kgo.BrokerMetadata{}, 1, e) // a fetch
	bad := e
	bad.ReadErr = errors.New("reset")
	w.OnBrokerE2E(kgo.BrokerMetadata{}, produceKey, bad)
	f := w.figures()
	if f.Requests != 1 || f.RequestBytes != 100 || f.RTT.Mean != 4*time.Millisecond || f.Connections != 1 {
		t.Fatalf("figures %+v, want one produce of 100 B taking 4ms, to one broker", f)
	}
	w.OnBrokerE2E(kgo.BrokerMetadata{NodeID: 2}, produceKey, e)
	w.OnBrokerE2E(kgo.BrokerMetadata{NodeID: 2}, produceKey, e)
	if f := w.figures(); f.Requests != 3 || f.Connections != 2 {
		t.Fatalf("figures %+v, want 3 produces to 2 brokers", f)
	}
	w.start()
	if f := w.figures(); f.Requests != 0 || f.Connections != 0 {
		t.Fatalf("after start again: %+v, want nothing", f)
	}
}

func TestStoreNames(t *testing.T) {
	for u, want := range map[string]string{
		"":                                  "the fs backend",
		FSStore:                             "the fs backend",
		DefaultStorageURL:                   "the mem backend",
		"s3://bucket/p?endpoint=x&secret=y": "`s3://bucket/p`",
	} {
		if got := storeName(u); !strings.HasPrefix(got, want) {
			t.Errorf("storeName(%q) = %q, want it to start %q", u, got, want)
		}
	}
	if got := localStorageURL(FSStore); got != "" {
		t.Errorf("localStorageURL(fs) = %q, want empty (localcluster's fs in Dir)", got)
	}
	c := Config{}
	if err := c.Validate(); err != nil || c.StorageURL != DefaultStorageURL {
		t.Errorf("default store %q (err %v), want %q", c.StorageURL, err, DefaultStorageURL)
	}
}

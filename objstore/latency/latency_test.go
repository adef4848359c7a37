package latency_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/latency"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/objstoretest"
)

func TestAcceptanceNone(t *testing.T) {
	m, err := latency.Preset("none")
	if err != nil {
		t.Fatal(err)
	}
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		s, err := latency.New(mem.New(), m, clock.NewManual(time.Unix(0, 0)), 1)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// The sampled distribution must have the median and p99 the table claims.
func TestPresetPercentiles(t *testing.T) {
	for _, name := range []string{"s3express", "s3standard"} {
		m, err := latency.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for op, d := range map[string]latency.Dist{"put": m.Put, "get": m.Get, "list": m.List} {
			xs := make([]time.Duration, 50000)
			for i := range xs {
				xs[i] = d.Sample(rng.NormFloat64())
			}
			slices.Sort(xs)
			p50, p99 := xs[len(xs)/2], xs[len(xs)*99/100]
			if r := float64(p50) / float64(d.Median); r < 0.95 || r > 1.05 {
				t.Errorf("%s %s: sampled median %v, table %v", name, op, p50, d.Median)
			}
			if r := float64(p99) / float64(d.P99); r < 0.9 || r > 1.1 {
				t.Errorf("%s %s: sampled p99 %v, table %v", name, op, p99, d.P99)
			}
		}
	}
	if _, err := latency.Preset("s3glacier"); err == nil {
		t.Fatal("unknown preset accepted")
	}
}

func TestDelayAddsTransferTime(t *testing.T) {
	m := latency.Model{BandwidthBytesPerSec: 1e6}
	if got := m.Delay(latency.Dist{Median: time.Millisecond}, 0, 2e6); got != time.Millisecond+2*time.Second {
		t.Fatalf("Delay = %v, want 2.001s", got)
	}
}

func TestWaitsOnClock(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	m := latency.Model{Name: "fixed", Put: latency.Dist{Median: 4 * time.Millisecond, P99: 4 * time.Millisecond}}
	inner := mem.New()
	s, err := latency.New(inner, m, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Put(context.Background(), "k", []byte("x"), objstore.PutOptions{}) }()
	for c.Pending() == 0 {
		runtime.Gosched() // until the Put is waiting on its timer
	}
	c.Advance(3 * time.Millisecond)
	if _, err := inner.Head(context.Background(), "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Put landed before its latency: %v", err)
	}
	c.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- s.Put(ctx, "k2", nil, objstore.PutOptions{}) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait = %v, want Canceled", err)
	}
}

func TestValidate(t *testing.T) {
	bad := latency.Model{Get: latency.Dist{Median: 10 * time.Millisecond, P99: time.Millisecond}}
	if _, err := latency.New(mem.New(), bad, nil, 1); err == nil {
		t.Fatal("p99 below median accepted")
	}
}

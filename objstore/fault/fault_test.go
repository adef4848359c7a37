package fault_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fault"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/objstoretest"
)

func mustNew(t *testing.T, inner objstore.Store, cfg fault.Config) *fault.Store {
	t.Helper()
	s, err := fault.New(inner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// With every probability at zero the decorator must be invisible.
func TestAcceptanceNoFaults(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return mustNew(t, mem.New(), fault.Config{Seed: 1, Rules: []fault.Rule{
			{Kind: fault.SlowDown, Prob: 0}, {Kind: fault.Corrupt, Prob: 0}, {Kind: fault.Timeout, Prob: 0},
		}})
	})
}

func TestValidate(t *testing.T) {
	for _, r := range []fault.Rule{
		{Kind: 0, Prob: 0.1}, {Kind: fault.SlowDown, Prob: 1.5}, {Kind: fault.SlowDown, Prob: -0.1},
		{Kind: fault.Latency, Prob: 0.1}, {Kind: fault.SlowDown, Prob: 0.1, Ops: []fault.Op{"POST"}},
	} {
		if _, err := fault.New(mem.New(), fault.Config{Rules: []fault.Rule{r}}); err == nil {
			t.Errorf("New accepted rule %+v", r)
		}
	}
}

func TestDecideProbabilityAndReplay(t *testing.T) {
	rules := []fault.Rule{{Kind: fault.SlowDown, Prob: 0.3}}
	fired := 0
	for seq := range uint64(20000) {
		d := fault.Decide(7, seq, fault.OpPut, rules)
		if d != fault.Decide(7, seq, fault.OpPut, rules) {
			t.Fatalf("Decide is not a function of its inputs at seq %d", seq)
		}
		if d.Fault == fault.SlowDown {
			fired++
		}
	}
	if fired < 5600 || fired > 6400 {
		t.Fatalf("Prob 0.3 fired %d of 20000 times", fired)
	}
	same := 0
	for seq := range uint64(1000) {
		if fault.Decide(7, seq, fault.OpPut, rules) == fault.Decide(8, seq, fault.OpPut, rules) {
			same++
		}
	}
	if same == 1000 {
		t.Fatalf("seeds 7 and 8 made identical decisions")
	}
}

// A replayed run with the same seed injects the same faults in the same
// requests.
func TestReplay(t *testing.T) {
	run := func(seed uint64) (string, fault.Stats) {
		s := mustNew(t, mem.New(), fault.Config{Seed: seed, Rules: []fault.Rule{
			{Kind: fault.InternalError, Prob: 0.1},
			{Kind: fault.SlowDown, Prob: 0.1},
			{Kind: fault.Truncate, Prob: 0.1},
			{Kind: fault.AmbiguousPut, Prob: 0.1},
		}})
		ctx := context.Background()
		var trace bytes.Buffer
		for i := range 300 {
			key := fmt.Sprintf("k%d", i%20)
			err := s.Put(ctx, key, bytes.Repeat([]byte{byte(i)}, 100), objstore.PutOptions{})
			b, gerr := s.GetRange(ctx, key, 0, -1)
			fmt.Fprintf(&trace, "%d %v %d %v\n", i, err, len(b), gerr)
		}
		return trace.String(), s.Stats()
	}
	t1, s1 := run(42)
	t2, s2 := run(42)
	if t1 != t2 || s1 != s2 {
		t.Fatalf("same seed, different runs:\n%+v\n%+v", s1, s2)
	}
	if s1.InternalErrors == 0 || s1.SlowDowns == 0 || s1.Truncated == 0 || s1.AmbiguousPuts == 0 {
		t.Fatalf("expected every kind to fire in 600 requests: %+v", s1)
	}
	if s1.Requests != 600 {
		t.Fatalf("Requests = %d, want 600", s1.Requests)
	}
	if t3, _ := run(43); t3 == t1 {
		t.Fatalf("different seeds gave the same trace")
	}
}

func TestInjectedErrorsAreTyped(t *testing.T) {
	for _, tc := range []struct {
		kind   fault.Kind
		code   int
		s3Code string
	}{{fault.InternalError, 500, "InternalError"}, {fault.SlowDown, 503, "SlowDown"}} {
		inner := mem.New()
		s := mustNew(t, inner, fault.Config{Rules: []fault.Rule{{Kind: tc.kind, Prob: 1, Ops: []fault.Op{fault.OpPut}}}})
		err := s.Put(context.Background(), "k", []byte("x"), objstore.PutOptions{})
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Code != tc.code || fe.S3Code != tc.s3Code || !fe.Retriable || fe.Applied || fe.Op != fault.OpPut || fe.Key != "k" {
			t.Fatalf("%v: Put error = %#v", tc.kind, err)
		}
		if _, err := inner.Head(context.Background(), "k"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("%v: a failed injected Put reached the store: %v", tc.kind, err)
		}
		// The rule selects PUT only.
		if _, err := s.Head(context.Background(), "k"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("%v: Head = %v, want ErrNotFound passed through", tc.kind, err)
		}
	}
}

func TestAmbiguousPut(t *testing.T) {
	inner := mem.New()
	s := mustNew(t, inner, fault.Config{Rules: []fault.Rule{{Kind: fault.AmbiguousPut, Prob: 1}}})
	ctx := context.Background()
	err := s.Put(ctx, "k", []byte("v1"), objstore.PutOptions{IfNoneMatch: true})
	var fe *fault.Error
	if !errors.As(err, &fe) || !fe.Applied {
		t.Fatalf("Put error = %v, want *fault.Error with Applied", err)
	}
	if got, err := inner.GetRange(ctx, "k", 0, -1); err != nil || string(got) != "v1" {
		t.Fatalf("ambiguous Put did not apply: %q, %v", got, err)
	}
	// The retry a client would make finds its own write.
	if err := s.Put(ctx, "k", []byte("v1"), objstore.PutOptions{IfNoneMatch: true}); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("retried create-only Put = %v, want ErrExists", err)
	}
	if st := s.Stats(); st.AmbiguousPuts != 1 {
		t.Fatalf("Stats = %+v, want 1 ambiguous put", st)
	}
}

func TestTruncateAndCorrupt(t *testing.T) {
	ctx := context.Background()
	inner := mem.New()
	body := bytes.Repeat([]byte("abcdefgh"), 64)
	if err := inner.Put(ctx, "k", body, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tr := mustNew(t, inner, fault.Config{Seed: 3, Rules: []fault.Rule{{Kind: fault.Truncate, Prob: 1}}})
	for range 20 {
		got, err := tr.GetRange(ctx, "k", 0, -1)
		if err != nil || len(got) >= len(body) || !bytes.Equal(got, body[:len(got)]) {
			t.Fatalf("truncated body: %d bytes, %v", len(got), err)
		}
	}
	co := mustNew(t, inner, fault.Config{Seed: 3, Rules: []fault.Rule{{Kind: fault.Corrupt, Prob: 1}}})
	for range 20 {
		got, err := co.GetRange(ctx, "k", 0, -1)
		if err != nil || len(got) != len(body) {
			t.Fatalf("corrupted body: %d bytes, %v", len(got), err)
		}
		diff := 0
		for i := range got {
			if got[i] != body[i] {
				diff++
			}
		}
		if diff != 1 {
			t.Fatalf("corrupted body differs in %d bytes, want 1", diff)
		}
	}
	if st := co.Stats(); st.Corrupted != 20 {
		t.Fatalf("Stats = %+v", st)
	}
	if again, _ := inner.GetRange(ctx, "k", 0, -1); !bytes.Equal(again, body) {
		t.Fatal("corruption leaked into the stored object")
	}
}

func waitPending(t *testing.T, c *clock.Manual, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Pending() < n {
		if time.Now().After(deadline) {
			t.Fatalf("no timer armed")
		}
		runtime.Gosched() // waiting for a goroutine to block, not for time to pass
	}
}

func TestTimeoutOnClock(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	s := mustNew(t, mem.New(), fault.Config{Clock: c, Rules: []fault.Rule{{Kind: fault.Timeout, Prob: 1, Delay: 30 * time.Second}}})
	done := make(chan error, 1)
	go func() { _, err := s.Head(context.Background(), "k"); done <- err }()
	waitPending(t, c, 1)
	select {
	case err := <-done:
		t.Fatalf("timed-out request returned before the clock moved: %v", err)
	default:
	}
	c.Advance(30 * time.Second)
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
}

func TestTimeoutHonoursCancel(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	s := mustNew(t, mem.New(), fault.Config{Clock: c, Rules: []fault.Rule{{Kind: fault.Timeout, Prob: 1}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, "k", nil, objstore.PutOptions{}) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want Canceled", err)
	}
}

func TestLatencyOnClock(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	inner := mem.New()
	s := mustNew(t, inner, fault.Config{Clock: c, Rules: []fault.Rule{{Kind: fault.Latency, Prob: 1, Delay: 5 * time.Millisecond}}})
	done := make(chan error, 1)
	go func() { done <- s.Put(context.Background(), "k", []byte("x"), objstore.PutOptions{}) }()
	waitPending(t, c, 1)
	if _, err := inner.Head(context.Background(), "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Put reached the store before its latency passed: %v", err)
	}
	c.Advance(5 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Latencies != 1 {
		t.Fatalf("Stats = %+v", st)
	}
}

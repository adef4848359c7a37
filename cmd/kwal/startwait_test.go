package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/logbuf"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// runWait runs w on a manual clock with an attempt that fails until
// failures have failed (or for ever, -1), advancing the clock to each
// pause's end once the wait is parked on it. It returns the error, the
// attempts' times and the log.
func runWait(t *testing.T, bound time.Duration, failures int, fail error) (error, []time.Duration, []string) {
	t.Helper()
	clk := clock.NewManual(t0)
	var log logbuf.Buffer
	w := startWait{Bound: bound, Backoff: startWaitBackoff, Clock: clk, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	var (
		mu sync.Mutex
		at []time.Duration
	)
	attempts := func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), at...)
	}
	done := make(chan error, 1)
	go func() {
		done <- w.run(context.Background(), "the controller's Kafka", "controller.bootstrap.servers=127.0.0.1:1", "start it", func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, clk.Since(t0))
			if failures < 0 || len(at) <= failures {
				return fail
			}
			return nil
		})
	}()
	for {
		armed := clk.Armed() // taken before looking: no arming is missed
		if clk.Pending() > 0 {
			// The pause the wait is parked on: the backoff of its last
			// failure, 100 ms doubling to 2 s (Delay with no jitter).
			clk.Advance(startWaitBackoff.Delay(len(attempts()), 0))
			continue
		}
		select {
		case err := <-done:
			return err, attempts(), log.Lines()
		case <-armed:
		case <-time.After(30 * time.Second):
			t.Fatal("the wait neither paused nor returned")
		}
	}
}

// TestStartWaitRetriesThenStarts: an unreachable metadata Kafka is
// retried with the backoff's pauses, and the whole wait is two log lines
// (entered, left), whatever the number of attempts.
func TestStartWaitRetriesThenStarts(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	err, at, lines := runWait(t, time.Minute, 9, refused)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{0}
	for n := 1; n <= 9; n++ {
		want = append(want, want[n-1]+startWaitBackoff.Delay(n, 0))
	}
	if fmt.Sprint(at) != fmt.Sprint(want) {
		t.Fatalf("attempts at %v, want %v", at, want)
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "cannot reach the controller's Kafka") ||
		!strings.Contains(lines[0], "connection refused") || !strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], "attempts=10") {
		t.Fatalf("log, want one WARN and one INFO line:\n%s", strings.Join(lines, "\n"))
	}
}

// TestStartWaitGivesUpAtItsBound: past remote.wal.metadata.start.wait.ms
// the wait ends with an error naming what, where, the key, the last
// error and what to do; no pause ends past the bound; one log line.
func TestStartWaitGivesUpAtItsBound(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	const bound = 5 * time.Second
	err, at, lines := runWait(t, bound, -1, refused)
	if !errors.Is(err, errStartWait) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("error %v: want errStartWait wrapping the last attempt's", err)
	}
	for _, w := range []string{"the controller's Kafka", "controller.bootstrap.servers=127.0.0.1:1", "remote.wal.metadata.start.wait.ms=5000", "start it"} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
	// 0, .1, .3, .7, 1.5, 3.1 s; the next pause (2 s) would end at 5.1.
	if last := at[len(at)-1]; len(at) != 6 || last >= bound {
		t.Fatalf("attempts at %v, want 6 within %v", at, bound)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") {
		t.Fatalf("log, want one WARN line:\n%s", strings.Join(lines, "\n"))
	}
}

// TestStartWaitStopsAtPermanentErrors: a refused setting or a Kafka error
// no retry mends ends the wait at its first attempt, with that error.
func TestStartWaitStopsAtPermanentErrors(t *testing.T) {
	for _, e := range []error{kerr.SaslAuthenticationFailed, fmt.Errorf("x: %w", kerr.TopicAuthorizationFailed)} {
		clk := clock.NewManual(t0)
		var log logbuf.Buffer
		w := startWait{Bound: time.Minute, Backoff: startWaitBackoff, Clock: clk, Logger: slog.New(slog.NewTextHandler(&log, nil))}
		n := 0
		err := w.run(context.Background(), "the controller's Kafka", "here", "fix it", retryingAtStart(func(context.Context) error { n++; return e }))
		if n != 1 || !errors.Is(err, e) || errors.Is(err, errStartWait) {
			t.Fatalf("%v: %d attempts, error %v", e, n, err)
		}
	}
}

// TestBrokerWaitsForItsMetadataKafka: a `kwal broker` process started
// before its metadata Kafka waits for it, logging that once, and comes up
// once the Kafka does (here a kfake started on the address afterwards).
func TestBrokerWaitsForItsMetadataKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child broker process")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there until the Kafka starts
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	props := filepath.Join(dir, "server.properties")
	body := "broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs=" + filepath.Join(dir, "logs") +
		"\nremote.wal.metadata.bootstrap.servers=" + addr + "\nremote.wal.metadata.bootstrap.timeout.ms=2000\nremote.wal.metadata.start.wait.ms=120000\n"
	if err := os.WriteFile(props, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// The Kafka is closed after the broker has stopped (cleanups run last
	// first): a broker shutting down with its metadata Kafka gone waits
	// for it.
	var kf *kfake.Cluster
	t.Cleanup(func() {
		if kf != nil {
			kf.Close()
		}
	})
	waiting, reached := make(chan struct{}, 1), make(chan struct{}, 1)
	var mu sync.Mutex
	warns := 0
	listening := startChildBroker(t, props, childAsKwalEnv+"=1", func(line string) {
		switch {
		case strings.Contains(line, "cannot reach the controller's Kafka at start"):
			mu.Lock()
			warns++
			mu.Unlock()
			waiting <- struct{}{}
		case strings.Contains(line, "reached the controller's Kafka at start"):
			reached <- struct{}{}
		}
	})
	select {
	case <-waiting:
	case <-listening:
		t.Fatal("the broker listened without its metadata Kafka")
	case <-time.After(60 * time.Second):
		t.Fatal("the broker did not say it waits for its metadata Kafka")
	}
	kf, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-listening:
	case <-time.After(90 * time.Second):
		t.Fatal("the broker did not come up once its metadata Kafka did")
	}
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the end of the wait was not logged")
	}
	mu.Lock()
	defer mu.Unlock()
	if warns != 1 {
		t.Fatalf("the wait was logged %d times, want once", warns)
	}
}

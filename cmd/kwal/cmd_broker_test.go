package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kwal/kwal/internal/wiretest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// childRlimitEnv makes the test binary run `kwal <args>` with
// RLIMIT_NOFILE lowered to its value, instead of the tests.
const childRlimitEnv = "KWAL_TEST_CHILD_NOFILE"

// childAsKwalEnv makes the test binary run as kwal (for benches that start
// kwal processes).
const childAsKwalEnv = "KWAL_TEST_CHILD_AS_KWAL"

func TestMain(m *testing.M) {
	if os.Getenv(childAsKwalEnv) != "" {
		// A child this test binary started to stand for the kwal binary.
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if v := os.Getenv(childRlimitEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
			fmt.Fprintln(os.Stderr, "setrlimit:", err)
			os.Exit(2)
		}
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// A `kwal broker` process whose file descriptors run out keeps serving the
// connections it has, logs the failing accepts once, and accepts again
// (logging it with the count) once descriptors free up; a normal client
// then gets in.
func TestBrokerRecoversFromFDExhaustion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child broker process")
	}
	dir := t.TempDir()
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte("broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs="+filepath.Join(dir, "logs")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	failing, again := make(chan string, 1), make(chan string, 1)
	addrCh := startChildBroker(t, props, childRlimitEnv+"=64", func(line string) {
		switch {
		case strings.Contains(line, "accept failing"):
			select {
			case failing <- line:
			default:
				t.Error("accept failure logged more than once in a row")
			}
		case strings.Contains(line, "accepting connections again"):
			select {
			case again <- line:
			default: // a later recovery: the first one is what counts
			}
		}
	})
	var addr string
	select {
	case addr = <-addrCh:
	case <-time.After(30 * time.Second):
		t.Fatal("child broker did not start")
	}
	keep, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	if err := wiretest.ApiVersions(keep, 1); err != nil {
		t.Fatal(err)
	}
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	var failLine string
	for i := 0; failLine == "" && i < 500; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		flood = append(flood, c)
		select {
		case failLine = <-failing:
		default:
		}
	}
	if failLine == "" {
		select {
		case failLine = <-failing:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d connections and the broker never ran out of descriptors", len(flood))
		}
	}
	if !strings.Contains(failLine, "too many open files") {
		t.Fatalf("failure line %q", failLine)
	}
	// Out of descriptors, and still serving what it has.
	if err := wiretest.ApiVersions(keep, 2); err != nil {
		t.Fatalf("open connection during exhaustion: %v", err)
	}
	for _, c := range flood {
		c.Close()
	}
	flood = nil
	select {
	case line := <-again:
		if !strings.Contains(line, "failed_accepts=") {
			t.Fatalf("recovery line %q has no count", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the broker never accepted again")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "after-emfile", Value: []byte("in")}).FirstErr(); err != nil {
		t.Fatalf("normal client after recovery: %v", err)
	}
}

// An unreachable remote.wal.metadata.bootstrap.servers fails the start
// once remote.wal.metadata.start.wait.ms has passed (each attempt bounded
// by remote.wal.metadata.bootstrap.timeout.ms), naming the keys and the
// address; a bad setting fails before anything is opened.
func TestBrokerStartFailsFast(t *testing.T) {
	dead, quiet := wiretest.RefusingAddr(t), wiretest.SilentAddr(t)
	dir := t.TempDir()
	cases := []struct {
		name, props string
		want        []string
		within      time.Duration
	}{
		{"refusing metadata bootstrap", "remote.wal.metadata.bootstrap.servers=" + dead + "\nremote.wal.metadata.bootstrap.timeout.ms=500\nremote.wal.metadata.start.wait.ms=500\n",
			[]string{"remote.wal.metadata.bootstrap.servers=" + dead, "connection refused", "remote.wal.metadata.start.wait.ms=500"}, time.Second},
		{"silent metadata bootstrap", "remote.wal.metadata.bootstrap.servers=" + quiet + "\nremote.wal.metadata.bootstrap.timeout.ms=500\nremote.wal.metadata.start.wait.ms=500\n",
			[]string{"remote.wal.metadata.bootstrap.servers=" + quiet, "remote.wal.metadata.bootstrap.timeout.ms=500"}, time.Second},
		{"bad setting before the bootstrap", "remote.wal.metadata.bootstrap.servers=" + dead + "\nmin.insync.replicas=0\n",
			[]string{"min.insync.replicas=0"}, time.Second},
		{"log dir is a file", "log.dirs=" + os.Args[0] + "\n", []string{"log.dirs="}, time.Second},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			props := filepath.Join(dir, fmt.Sprintf("p%d.properties", i))
			body := tc.props
			if !strings.Contains(body, "log.dirs=") {
				body += "log.dirs=" + filepath.Join(dir, fmt.Sprintf("logs%d", i)) + "\n"
			}
			if err := os.WriteFile(props, []byte("listeners=127.0.0.1:0\n"+body), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errOut strings.Builder
			done := make(chan int, 1)
			start := time.Now()
			go func() { done <- run([]string{"broker", "--config", props}, &out, &errOut) }()
			select {
			case code := <-done:
				took := time.Since(start)
				if code == 0 {
					t.Fatalf("started: %s", out.String())
				}
				for _, w := range tc.want {
					if !strings.Contains(errOut.String(), w) {
						t.Fatalf("stderr %q does not say %q", errOut.String(), w)
					}
				}
				// Bounds with ten times slack for a loaded machine.
				if took > tc.within*10 {
					t.Fatalf("took %v", took)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("kwal broker did not fail")
			}
		})
	}
}

// startChildBroker runs `kwal broker --config props` as a child of the test
// binary, with env added to its environment. Each stderr line is logged
// and passed to onStderr; the returned channel gets the address of each
// "listening on" line of stdout. At cleanup the child gets SIGTERM, and
// its pipes are read to their end before Wait, so that no line is logged
// after the test.
func startChildBroker(t *testing.T, props, env string, onStderr func(line string)) <-chan string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "broker", "--config", props)
	cmd.Env = append(os.Environ(), env)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdoutDone, stderrDone := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-stdoutDone
		<-stderrDone
		cmd.Wait()
	})
	listening := make(chan string, 1)
	go func() {
		defer close(stdoutDone)
		re := regexp.MustCompile(`listening on (\S+),`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				listening <- m[1]
			}
		}
	}()
	go func() {
		defer close(stderrDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			t.Log("child:", line)
			onStderr(line)
		}
	}()
	return listening
}

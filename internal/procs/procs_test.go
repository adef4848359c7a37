package procs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFileSizeLimitFailsWrites: past a zero RLIMIT_FSIZE set from outside,
// the child's write fails (EFBIG; the shell ignores SIGXFSZ as a Go broker
// does), while its output still reaches the log through the pipe.
func TestFileSizeLimitFailsWrites(t *testing.T) {
	dir := t.TempDir()
	gate, data := filepath.Join(dir, "go"), filepath.Join(dir, "data")
	script := `trap "" XFSZ; while [ ! -e "$1" ]; do sleep 0.01; done; printf x > "$2"; echo "status=$?"`
	p := &Process{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", script, "sh", gate, data}, LogPath: filepath.Join(dir, "log")}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if err := p.SetFileSizeLimit(0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not finish")
	}
	out, _ := os.ReadFile(p.LogPath)
	if !strings.Contains(string(out), "status=1") {
		t.Fatalf("the write past the limit did not fail: %q", out)
	}
	if b, _ := os.ReadFile(data); len(b) != 0 {
		t.Fatalf("%d bytes written past a zero file-size limit", len(b))
	}
}

func TestStopAndSignals(t *testing.T) {
	dir := t.TempDir()
	p := &Process{Name: "sleep", Bin: "/bin/sleep", Args: []string{"60"}, LogPath: filepath.Join(dir, "log")}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A stopped process still stops on Stop (SIGCONT, then SIGTERM).
	if !p.Stop(30 * time.Second) {
		t.Fatal("SIGTERM did not stop a paused process")
	}
	if p.Running() || p.Pid() != 0 {
		t.Fatal("still running after Stop")
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil || p.Running() {
		t.Fatalf("kill: %v", err)
	}
}

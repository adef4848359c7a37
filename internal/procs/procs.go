// Package procs runs the real processes of kwal's multi-process tests and
// fault harness: `kwal broker` processes from a server.properties file,
// and versitygw. It owns starting a process with its output appended to a
// log file, waiting until it listens, and signalling it (SIGKILL, SIGSTOP,
// SIGCONT, SIGTERM with a deadline). It knows nothing of Kafka.
//
// A process's output reaches its log file through a pipe the parent
// copies, not as an inherited file descriptor: a child whose file-size
// limit is lowered (RLIMIT_FSIZE, the harness's disk-full fault) still
// logs.
//
// Concurrency: a Process is driven by one goroutine at a time (its
// owner); Exited may be watched from any.
package procs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is one restartable child process.
type Process struct {
	// Name names it in errors ("broker 2", "versitygw").
	Name string
	Bin  string
	Args []string
	// LogPath receives stdout and stderr, appended across restarts.
	LogPath string
	// Addr, if set, is where it listens: Start waits until it accepts.
	Addr string
	// Env is added to this process's environment (KEY=value).
	Env []string

	cmd    *exec.Cmd
	exited chan struct{}
}

// ErrExited: the process exited while Start waited for it to listen.
var ErrExited = errors.New("procs: process exited")

// Start starts the process (again) and, with Addr set, waits until it
// accepts connections or ctx ends.
func (p *Process) Start(ctx context.Context) error {
	if p.Running() {
		return fmt.Errorf("procs: %s already runs (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Bin, p.Args...)
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	// A writer that is not an *os.File makes exec copy through a pipe.
	w := struct{ io.Writer }{logf}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("procs: starting %s: %w", p.Name, err)
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func(done chan struct{}) {
		cmd.Wait()
		logf.Close()
		close(done)
	}(p.exited)
	if p.Addr == "" {
		return nil
	}
	for {
		conn, err := net.DialTimeout("tcp", p.Addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%w: %s exited at start:\n%s", ErrExited, p.Name, Tail(p.LogPath, 40))
		case <-ctx.Done():
			return fmt.Errorf("procs: %s not listening on %s: %w\n%s", p.Name, p.Addr, ctx.Err(), Tail(p.LogPath, 40))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Running says the process was started and has not exited.
func (p *Process) Running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Pid is the running process's id, 0 if none.
func (p *Process) Pid() int {
	if !p.Running() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited is closed when the last started process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Signal sends sig to the running process.
func (p *Process) Signal(sig os.Signal) error {
	if !p.Running() {
		return fmt.Errorf("procs: %s does not run", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL (which ends a stopped process too) and waits for
// the exit.
func (p *Process) Kill() error {
	if !p.Running() {
		return nil
	}
	err := p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	return err
}

// Stop asks the process to stop with SIGTERM (a controlled shutdown) and
// kills it if it has not exited after grace. It reports whether SIGTERM
// sufficed.
func (p *Process) Stop(grace time.Duration) bool {
	if !p.Running() {
		return true
	}
	p.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot act on SIGTERM
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return true
	case <-time.After(grace):
		p.Kill()
		return false
	}
}

// NoFileSizeLimit lifts a file-size limit.
const NoFileSizeLimit = unix.RLIM_INFINITY

// SetFileSizeLimit sets the running process's RLIMIT_FSIZE (soft and
// hard) with prlimit(2): past limit bytes a write fails with EFBIG, as a
// full disk makes it fail with ENOSPC. Go programs ignore the SIGXFSZ
// that comes with it unless they ask for it (os/signal), so a kwal broker
// sees the failed write. Raising the limit again needs the privilege to
// raise a hard limit (CAP_SYS_RESOURCE); without it, restart the process.
func (p *Process) SetFileSizeLimit(limit uint64) error {
	if !p.Running() {
		return fmt.Errorf("procs: %s does not run", p.Name)
	}
	lim := unix.Rlimit{Cur: limit, Max: limit}
	if limit != NoFileSizeLimit {
		var old unix.Rlimit
		if err := unix.Prlimit(p.cmd.Process.Pid, unix.RLIMIT_FSIZE, nil, &old); err != nil {
			return fmt.Errorf("procs: reading %s's file-size limit: %w", p.Name, err)
		}
		lim.Max = old.Max // keep the hard limit, so that the soft one can be raised again
	}
	if err := unix.Prlimit(p.cmd.Process.Pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		return fmt.Errorf("procs: setting %s's file-size limit to %d: %w", p.Name, limit, err)
	}
	return nil
}

// Tail returns the last n lines of the file at path.
func Tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// WriteProperties writes props as a server.properties file, keys sorted.
func WriteProperties(path string, props map[string]string) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%s\n", k, props[k])
	}
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

// FreePort returns a loopback TCP port free at the time of the call.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Broker returns the Process of `bin broker -config props` listening on
// addr, logging to broker.log beside props.
func Broker(name, bin, props, addr string) *Process {
	return &Process{Name: name, Bin: bin, Args: []string{"broker", "-config", props}, Addr: addr,
		LogPath: filepath.Join(filepath.Dir(props), "broker.log")}
}

// Versitygw returns the Process of a versitygw serving dir (posix
// backend) on addr with one access key.
func Versitygw(bin, addr, access, secret, dir string) *Process {
	return &Process{Name: "versitygw", Bin: bin, Addr: addr,
		Args:    []string{"--port", addr, "--access", access, "--secret", secret, "--quiet", "posix", dir},
		LogPath: filepath.Join(filepath.Dir(dir), "versitygw.log")}
}

// FindVersitygw looks for the versitygw binary: $KWAL_VERSITYGW, then
// PATH, then $(go env GOPATH)/bin (where scripts/test-env.sh installs it).
func FindVersitygw() (string, error) {
	if p := os.Getenv("KWAL_VERSITYGW"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("procs: versitygw not found (set KWAL_VERSITYGW, or run scripts/test-env.sh, which installs it into $(go env GOPATH)/bin)")
}

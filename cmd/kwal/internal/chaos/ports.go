package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ErrNoPorts is what listenPorts returns when it finds no free ports.
var ErrNoPorts = errors.New("chaos: no free listener ports below the ephemeral range")

// The in-process brokers listen on ports below the kernel's ephemeral
// range, handed out by one allocator per process, so that a killed
// broker's port stays free for its restart: a port from the ephemeral
// range (what "127.0.0.1:0" binds) may be taken, while the broker is
// down, as the local port of any outgoing connection, this cluster's or
// another's running in parallel, and the restart then fails to bind until
// that connection closes.
var ports = struct {
	mu struct {
		sync.Mutex
		next, lo, hi int
	}
}{}

// ephemeralLow is the first port of the kernel's ephemeral range
// (32768 when /proc does not say).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 2048 {
		return 32768
	}
	return n
}

// listenPorts returns n loopback ports free now, below the ephemeral
// range, that no other caller in this process gets again before the
// allocator wraps around (thousands of ports later). It starts at a
// random port, so that two processes are unlikely to hand out the same
// ports at once, and skips any port it cannot bind.
func listenPorts(n int) ([]int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.mu.hi == 0 {
		ports.mu.lo, ports.mu.hi = 10000, ephemeralLow()
		if ports.mu.hi-ports.mu.lo < 1000 {
			ports.mu.lo = ports.mu.hi / 2
		}
		ports.mu.next = ports.mu.lo + rand.IntN(ports.mu.hi-ports.mu.lo)
	}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > ports.mu.hi-ports.mu.lo {
			return nil, fmt.Errorf("%w [%d, %d)", ErrNoPorts, ports.mu.lo, ports.mu.hi)
		}
		p := ports.mu.next
		ports.mu.next++
		if ports.mu.next >= ports.mu.hi {
			ports.mu.next = ports.mu.lo
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		out = append(out, p)
	}
	return out, nil
}

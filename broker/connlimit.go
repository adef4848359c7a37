package broker

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/clock"
)

// ConnLimits are the connection caps of a listener, Kafka's keys.
type ConnLimits struct {
	// Max: max.connections. When reached, the listener stops accepting
	// (new connections wait in the kernel's backlog) until one closes, as
	// Kafka's acceptor does.
	Max int
	// PerIP: max.connections.per.ip. A connection over it is closed at
	// once, with a log line.
	PerIP int
	// PerIPOverrides: max.connections.per.ip.overrides, per client IP.
	PerIPOverrides map[netip.Addr]int
}

// limitListener enforces ConnLimits on an inner listener. It wraps the
// net.Listener (and each net.Conn, whose Close frees its slots), so that a
// TLS listener can sit on top of it.
type limitListener struct {
	net.Listener
	limits ConnLimits
	logger *slog.Logger
	clock  clock.Clock

	// refusedPerIP counts connections closed for the per-IP cap.
	refusedPerIP atomic.Int64

	mu struct {
		sync.Mutex
		total  int
		perIP  map[netip.Addr]int
		closed bool
		// unlogged counts refusals since the last warning, lastLog
		// when that was: a flood logs once a second, not per connection.
		unlogged int64
		lastLog  time.Time
		// free is signalled when a slot frees (or on Close) while Accept
		// waits at max.connections.
		free *sync.Cond
	}
}

func newLimitListener(inner net.Listener, limits ConnLimits, logger *slog.Logger, clk clock.Clock) *limitListener {
	l := &limitListener{Listener: inner, limits: limits, logger: logger, clock: clk}
	l.mu.perIP = map[netip.Addr]int{}
	l.mu.free = sync.NewCond(&l.mu.Mutex)
	return l
}

// Accept waits for a free slot under max.connections, accepts, and closes
// connections over their IP's cap (going on to the next).
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		for l.mu.total >= l.limits.Max && !l.mu.closed {
			l.mu.free.Wait()
		}
		closed := l.mu.closed
		l.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		limit := l.limits.PerIP
		if o, ok := l.limits.PerIPOverrides[ip]; ok {
			limit = o
		}
		if l.mu.perIP[ip] >= limit {
			n := l.mu.perIP[ip]
			l.mu.unlogged++
			now := l.clock.Now()
			logIt := now.Sub(l.mu.lastLog) >= time.Second
			refused := l.mu.unlogged
			if logIt {
				l.mu.unlogged, l.mu.lastLog = 0, now
			}
			l.mu.Unlock()
			l.refusedPerIP.Add(1)
			if logIt {
				l.logger.Warn("closing connection: max.connections.per.ip reached", "remote", c.RemoteAddr().String(), "connections", n, "limit", limit, "refused_since_last_warning", refused)
			}
			c.Close()
			continue
		}
		l.mu.total++
		l.mu.perIP[ip]++
		l.mu.Unlock()
		return &limitConn{Conn: c, l: l, ip: ip}, nil
	}
}

// Close closes the inner listener and wakes an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.mu.Lock()
	l.mu.closed = true
	l.mu.free.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

func (l *limitListener) release(ip netip.Addr) {
	l.mu.Lock()
	l.mu.total--
	if l.mu.perIP[ip]--; l.mu.perIP[ip] <= 0 {
		delete(l.mu.perIP, ip)
	}
	l.mu.free.Signal()
	l.mu.Unlock()
}

// open reports the connections counted now.
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.total
}

type limitConn struct {
	net.Conn
	l    *limitListener
	ip   netip.Addr
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}

func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return ip.Unmap()
		}
	}
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// ParseConnectionOverrides parses max.connections.per.ip.overrides:
// "ip:count,ip:count" (IPv6 as [addr]:count). Kafka also takes host
// names; kwal takes IP addresses only, so that the cap does not depend on
// DNS at start.
func ParseConnectionOverrides(v string) (map[netip.Addr]int, error) {
	out := map[netip.Addr]int{}
	for _, item := range splitList(v) {
		i := strings.LastIndex(item, ":")
		if i < 0 {
			return nil, fmt.Errorf("%q: want ip:count", item)
		}
		host := strings.TrimSuffix(strings.TrimPrefix(item[:i], "["), "]")
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not an IP address (host names are not resolved)", item, host)
		}
		n, err := strconv.Atoi(item[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: count must be an integer >= 0", item)
		}
		if _, dup := out[ip.Unmap()]; dup {
			return nil, fmt.Errorf("%s listed twice", ip)
		}
		out[ip.Unmap()] = n
	}
	return out, nil
}

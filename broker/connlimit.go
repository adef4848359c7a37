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

// ConnLimits are the connection caps of a broker, Kafka's keys.
type ConnLimits struct {
	// Max: max.connections, over all listeners. When reached, a listener
	// stops accepting (new connections wait in the kernel's backlog)
	// until one closes, as Kafka's acceptor does, except the inter-broker
	// listener when there are several: its connections are let in, and
	// the broker then closes the least recently used connection of
	// another listener (Kafka's protected listener).
	Max int
	// PerIP: max.connections.per.ip. A connection over it is closed at
	// once, with a log line.
	PerIP int
	// PerIPOverrides: max.connections.per.ip.overrides, per client IP.
	PerIPOverrides map[netip.Addr]int
}

// connQuota counts a broker's connections, in total and per client IP,
// for every listener (Kafka's ConnectionQuotas). Each listener accepts
// through a quotaListener over it; each accepted net.Conn is wrapped so
// that its Close frees its slots, and so that a TLS listener can sit on
// top of it.
type connQuota struct {
	limits ConnLimits
	logger *slog.Logger
	clock  clock.Clock

	// refusedPerIP counts connections closed for the per-IP cap;
	// evicted, connections closed to make room for an inter-broker one.
	refusedPerIP atomic.Int64
	evicted      atomic.Int64

	mu struct {
		sync.Mutex
		total  int
		perIP  map[netip.Addr]int
		closed bool
		// unlogged counts refusals since the last warning, lastLog
		// when that was: a flood logs once a second, not per connection.
		unlogged int64
		lastLog  time.Time
		// free is broadcast when a slot frees (or on close) while
		// listeners wait at max.connections.
		free *sync.Cond
	}
}

func newConnQuota(limits ConnLimits, logger *slog.Logger, clk clock.Clock) *connQuota {
	q := &connQuota{limits: limits, logger: logger, clock: clk}
	q.mu.perIP = map[netip.Addr]int{}
	q.mu.free = sync.NewCond(&q.mu.Mutex)
	return q
}

// waitSlotLocked waits, unless protected, until the total is under
// max.connections; it reports false once the quota is closed.
func (q *connQuota) waitSlotLocked(protected bool) bool {
	for !protected && q.mu.total >= q.limits.Max && !q.mu.closed {
		q.mu.free.Wait()
	}
	return !q.mu.closed
}

// admit counts c, waiting first for a slot if another listener took the
// one this listener waited for (unless protected); it closes c and
// reports false if c's IP is at its cap or the quota closed.
func (q *connQuota) admit(c net.Conn, protected bool) (net.Conn, bool) {
	ip := remoteIP(c)
	q.mu.Lock()
	if !q.waitSlotLocked(protected) {
		q.mu.Unlock()
		c.Close()
		return nil, false
	}
	limit := q.limits.PerIP
	if o, ok := q.limits.PerIPOverrides[ip]; ok {
		limit = o
	}
	if n := q.mu.perIP[ip]; n >= limit {
		q.mu.unlogged++
		now := q.clock.Now()
		logIt := now.Sub(q.mu.lastLog) >= time.Second
		refused := q.mu.unlogged
		if logIt {
			q.mu.unlogged, q.mu.lastLog = 0, now
		}
		q.mu.Unlock()
		q.refusedPerIP.Add(1)
		if logIt {
			q.logger.Warn("closing connection: max.connections.per.ip reached", "remote", c.RemoteAddr().String(), "connections", n, "limit", limit, "refused_since_last_warning", refused)
		}
		c.Close()
		return nil, false
	}
	q.mu.total++
	q.mu.perIP[ip]++
	q.mu.Unlock()
	return &limitConn{Conn: c, q: q, ip: ip}, true
}

// exceeded reports whether more connections are open than
// max.connections (inter-broker connections let in at the cap).
func (q *connQuota) exceeded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.total > q.limits.Max
}

// close wakes every listener waiting for a slot; they accept no more.
func (q *connQuota) close() {
	q.mu.Lock()
	q.mu.closed = true
	q.mu.free.Broadcast()
	q.mu.Unlock()
}

func (q *connQuota) release(ip netip.Addr) {
	q.mu.Lock()
	q.mu.total--
	if q.mu.perIP[ip]--; q.mu.perIP[ip] <= 0 {
		delete(q.mu.perIP, ip)
	}
	q.mu.free.Broadcast()
	q.mu.Unlock()
}

// open reports the connections counted now.
func (q *connQuota) open() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.total
}

// quotaListener is one listener under its broker's connQuota. Protected
// is Kafka's protected listener: the inter-broker listener of a broker
// with several, whose connections do not wait at max.connections.
type quotaListener struct {
	net.Listener
	q         *connQuota
	protected bool
}

// Accept waits for a free slot under max.connections (unless protected),
// accepts, and closes connections over their IP's cap (going on to the
// next).
func (l *quotaListener) Accept() (net.Conn, error) {
	for {
		l.q.mu.Lock()
		ok := l.q.waitSlotLocked(l.protected)
		l.q.mu.Unlock()
		if !ok {
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc, ok := l.q.admit(c, l.protected); ok {
			return lc, nil
		}
	}
}

type limitConn struct {
	net.Conn
	q    *connQuota
	ip   netip.Addr
	once sync.Once
}

// Close frees the connection's slots, then closes it: a peer that sees
// its connection closed finds the slot already free (closing first let
// TestMaxConnectionsInterBrokerListenerExempt count the evicted
// connection as open after its client had read EOF, 5 runs in 100).
func (c *limitConn) Close() error {
	c.once.Do(func() { c.q.release(c.ip) })
	return c.Conn.Close()
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

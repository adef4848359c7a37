package latbench

import (
	"context"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwal/kwal/broker"
)

// netModel is the network between racks: a one-way delay for every byte
// that leaves one rack for another, none within a rack. It knows which rack
// each broker address is in once register has been called; a connection
// whose peer is not yet known is looked up again on every write, so dials
// made before the brokers' addresses were known are still delayed once
// they are.
type netModel struct {
	oneWay time.Duration
	mu     struct {
		sync.RWMutex
		rackOf map[string]string // broker address -> rack
	}
	// Measured delay actually applied to cross-rack writes (timers on a
	// busy machine overshoot; the report prints what happened).
	delayedWrites atomic.Int64
	delayedNanos  atomic.Int64
}

func newNetModel(oneWay time.Duration) *netModel {
	n := &netModel{oneWay: oneWay}
	n.mu.rackOf = map[string]string{}
	return n
}

// register records the rack of a broker address.
func (n *netModel) register(addr, rack string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.rackOf[addr] = rack
}

// delay is the one-way delay from rack to the broker at addr; ok is false
// while addr's rack is unknown.
func (n *netModel) delay(fromRack, addr string) (d time.Duration, ok bool) {
	n.mu.RLock()
	to, ok := n.mu.rackOf[addr]
	n.mu.RUnlock()
	if !ok {
		return 0, false
	}
	if to == fromRack {
		return 0, true
	}
	return n.oneWay, true
}

// measured returns the mean one-way delay applied to cross-rack writes and
// how many there were.
func (n *netModel) measured() (mean time.Duration, writes int64) {
	w := n.delayedWrites.Load()
	if w == 0 {
		return 0, 0
	}
	return time.Duration(n.delayedNanos.Load() / w), w
}

// brokerDial is a broker.DialFunc for a broker in rack.
func (n *netModel) brokerDial(rack string) broker.DialFunc {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return n.wrap(c, rack, addr), nil
	}
}

// clientDial is a kgo.Dialer function for a client in rack.
func (n *netModel) clientDial(rack string) func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return n.wrap(c, rack, host), nil
	}
}

func (n *netModel) wrap(c net.Conn, fromRack, addr string) net.Conn {
	if d, ok := n.delay(fromRack, addr); n.oneWay <= 0 || (ok && d == 0) {
		return c // same rack, known now and forever: no delay, no goroutine
	}
	dc := &delayConn{Conn: c, n: n, fromRack: fromRack, addr: addr,
		queue: make(chan pendingWrite, 256), closed: make(chan struct{}), done: make(chan struct{})}
	go dc.deliver()
	return dc
}

// timerSlack is how much of a wait is yielded through rather than slept.
const timerSlack = 1500 * time.Microsecond

type pendingWrite struct {
	b       []byte
	written time.Time
	due     time.Time
}

// delayConn delivers each Write to the peer after the one-way delay, in
// order, like a link with latency and unlimited bandwidth. Write returns at
// once (the bytes are "on the wire"); a delivery error is returned by the
// next Write. Reads are not delayed: the peer's writes are.
//
// One goroutine (deliver) owns the underlying conn's writes; it stops on
// Close.
type delayConn struct {
	net.Conn
	n        *netModel
	fromRack string
	addr     string
	queue    chan pendingWrite
	closed   chan struct{}
	done     chan struct{}
	once     sync.Once
	err      atomic.Pointer[error]
}

func (c *delayConn) Write(b []byte) (int, error) {
	if e := c.err.Load(); e != nil {
		return 0, *e
	}
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	d, _ := c.n.delay(c.fromRack, c.addr)
	now := time.Now()
	p := pendingWrite{b: append([]byte(nil), b...), written: now, due: now.Add(d)}
	select {
	case c.queue <- p:
		return len(b), nil
	case <-c.closed:
		return 0, net.ErrClosed
	case <-c.done:
		if e := c.err.Load(); e != nil {
			return 0, *e
		}
		return 0, net.ErrClosed
	}
}

func (c *delayConn) deliver() {
	defer close(c.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var p pendingWrite
		select {
		case p = <-c.queue:
		case <-c.closed:
			return
		}
		// Go's timers overshoot sub-millisecond waits by up to a
		// millisecond or so, which would double a 0.5 ms link; so sleep
		// on a timer only for the part of the wait beyond timerSlack and
		// yield until the due time for the rest.
		if w := time.Until(p.due); w > timerSlack {
			t.Reset(w - timerSlack)
			select {
			case <-t.C:
			case <-c.closed:
				return
			}
		}
		for time.Now().Before(p.due) {
			select {
			case <-c.closed:
				return
			default:
				runtime.Gosched()
			}
		}
		if !p.due.Equal(p.written) {
			c.n.delayedWrites.Add(1)
			c.n.delayedNanos.Add(int64(time.Since(p.written)))
		}
		if _, err := c.Conn.Write(p.b); err != nil {
			c.err.CompareAndSwap(nil, &err)
			return
		}
	}
}

func (c *delayConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

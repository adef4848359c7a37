package latbench

import (
	"context"
	"net"
	"os"
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
	wire   *wire // wakes deliveries at their due times
	mu     struct {
		sync.RWMutex
		rackOf map[string]string // broker address -> rack
	}
	// Measured delay actually applied to cross-rack writes and to the
	// replies read back (timers on a busy machine overshoot; the report
	// prints what happened).
	delayedWrites atomic.Int64
	delayedReads  atomic.Int64
	delayedNanos  atomic.Int64
}

func newNetModel(oneWay time.Duration) *netModel {
	n := &netModel{oneWay: oneWay, wire: newWire()}
	n.mu.rackOf = map[string]string{}
	return n
}

// close stops the model's wire; deliveries still waiting go at once.
func (n *netModel) close() { n.wire.close() }

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

// measured returns the mean one-way delay applied to cross-rack deliveries
// (writes and the replies read back) and how many of each there were.
func (n *netModel) measured() (mean time.Duration, writes, reads int64) {
	w, r := n.delayedWrites.Load(), n.delayedReads.Load()
	if w+r == 0 {
		return 0, 0, 0
	}
	return time.Duration(n.delayedNanos.Load() / (w + r)), w, r
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
		queue: make(chan pendingWrite, 256), closed: make(chan struct{}), done: make(chan struct{}),
		inbox: make(chan arrival, inboxChunks), kick: make(chan struct{}, 1)}
	go dc.deliver()
	go dc.receive()
	return dc
}

// inboxChunks bounds what a delayConn reads ahead of its reader (chunks of
// at most readChunk bytes): past it, the receiving goroutine stops reading
// and TCP's flow control holds the peer back, as on a real link.
const (
	inboxChunks = 64
	readChunk   = 64 << 10
)

// arrival is what one read of the underlying conn returned, and when.
type arrival struct {
	b   []byte
	err error
	at  time.Time
}

type pendingWrite struct {
	b       []byte
	written time.Time
	due     time.Time
}

// delayConn is the dialing side's end of a cross-rack link with latency
// and unlimited bandwidth, in both directions: each Write reaches the peer
// the one-way delay after it was made, and each byte the peer sends is
// handed to Read the one-way delay after it arrived. Only the dialing side
// is wrapped (the brokers' listeners are not), so both directions are
// modelled here. Write returns at once (the bytes are "on the wire"); a
// delivery error is returned by the next Write.
//
// One goroutine (deliver) owns the underlying conn's writes and one
// (receive) its reads; both stop on Close. The underlying conn never gets
// a read deadline: SetReadDeadline and SetDeadline apply to Read here.
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

	inbox chan arrival  // filled by receive, in order
	kick  chan struct{} // a read deadline changed
	rd    struct {
		sync.Mutex
		deadline time.Time
	}
	// Read's own state (one reader at a time, as net.Conn users do).
	cur    []byte      // the rest of the chunk being handed out
	pend   *arrival    // received, not yet due when a deadline cut the wait
	rerr   error       // the read error, once delivered, returned from then on
	rtimer *time.Timer // waitUntil's timer for Read
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
		if c.waitUntil(p.due, t, nil) == waitClosed {
			return
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

// receive reads the underlying conn into the inbox, stamping each chunk
// with its arrival time, until the conn fails or is closed.
func (c *delayConn) receive() {
	buf := make([]byte, readChunk)
	for {
		n, err := c.Conn.Read(buf)
		now := time.Now()
		if n > 0 {
			a := arrival{b: append([]byte(nil), buf[:n]...), at: now}
			select {
			case c.inbox <- a:
			case <-c.closed:
				return
			}
		}
		if err != nil {
			select {
			case c.inbox <- arrival{err: err, at: now}:
			case <-c.closed:
			}
			return
		}
	}
}

func (c *delayConn) Read(b []byte) (int, error) {
	if len(c.cur) == 0 {
		if c.rerr != nil {
			return 0, c.rerr
		}
		a, err := c.next()
		if err != nil {
			return 0, err
		}
		if a.err != nil {
			c.rerr = a.err
			return 0, a.err
		}
		c.cur = a.b
	}
	n := copy(b, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// next waits for the next chunk and then for its delivery time, within
// the read deadline.
func (c *delayConn) next() (arrival, error) {
	for {
		c.rd.Lock()
		dl := c.rd.deadline
		c.rd.Unlock()
		var t *time.Timer
		var expired <-chan time.Time
		if !dl.IsZero() {
			w := time.Until(dl)
			if w <= 0 {
				return arrival{}, os.ErrDeadlineExceeded
			}
			t = time.NewTimer(w)
			expired = t.C
		}
		a, again, err := c.nextWithin(expired)
		if t != nil {
			t.Stop()
		}
		if !again {
			return a, err
		}
	}
}

// nextWithin is one wait of next: again is true when the deadline changed
// and next must start over with the new one.
func (c *delayConn) nextWithin(expired <-chan time.Time) (a arrival, again bool, err error) {
	if c.pend != nil {
		a = *c.pend
	} else {
		select {
		case a = <-c.inbox:
		case <-expired:
			return arrival{}, false, os.ErrDeadlineExceeded
		case <-c.kick:
			return arrival{}, true, nil
		case <-c.closed:
			return arrival{}, false, net.ErrClosed
		}
	}
	c.pend = nil
	if a.err != nil {
		return a, false, nil
	}
	if d, _ := c.n.delay(c.fromRack, c.addr); d > 0 {
		if c.rtimer == nil {
			c.rtimer = time.NewTimer(time.Hour)
			c.rtimer.Stop()
		}
		switch c.waitUntil(a.at.Add(d), c.rtimer, expired) {
		case waitDeadline:
			// Still on the wire: the next Read waits for the rest.
			pend := a
			c.pend = &pend
			return arrival{}, false, os.ErrDeadlineExceeded
		case waitClosed:
			return arrival{}, false, net.ErrClosed
		}
		c.n.delayedReads.Add(1)
		c.n.delayedNanos.Add(int64(time.Since(a.at)))
	}
	return a, false, nil
}

type waitEnd int

const (
	waitDue waitEnd = iota
	waitDeadline
	waitClosed
)

// spinLead is the last part of a wait spent yielding rather than asleep:
// a goroutine woken by a timer waits for a P behind whatever else is
// runnable, which on a busy machine would add to every delayed hop, while
// one that yields is already runnable when its due time comes. Yielding
// costs CPU the brokers under test need, so only this much of each wait
// is yielded through.
const spinLead = 100 * time.Microsecond

// waitUntil waits for due, unless expired fires or the conn closes first.
// It sleeps until spinLead before due, on two clocks, whichever wakes it
// first: t, a Go timer, which is precise while the process is busy
// (running Ps look at their timers on every scheduling round) but, when
// every P is idle, rounds a sub-millisecond wait up to the netpoller's
// millisecond; and the model's wire, which is precise then. It yields
// through the rest.
func (c *delayConn) waitUntil(due time.Time, t *time.Timer, expired <-chan time.Time) waitEnd {
	if d := time.Until(due) - spinLead; d > 0 {
		t.Reset(d)
		select {
		case <-t.C:
		case <-c.n.wire.after(due.Add(-spinLead)):
			t.Stop()
		case <-expired:
			t.Stop()
			return waitDeadline
		case <-c.closed:
			t.Stop()
			return waitClosed
		}
	}
	for time.Now().Before(due) {
		select {
		case <-expired:
			return waitDeadline
		case <-c.closed:
			return waitClosed
		default:
			runtime.Gosched()
		}
	}
	return waitDue
}

func (c *delayConn) SetReadDeadline(t time.Time) error {
	c.rd.Lock()
	c.rd.deadline = t
	c.rd.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return nil
}

func (c *delayConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

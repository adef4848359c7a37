package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/internal/logbuf"
	"github.com/kwal/kwal/internal/wiretest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// connTestBroker is one broker on the manual clock with the connection
// hooks turned into channels.
type connTestBroker struct {
	b      *Broker
	clk    *clock.Manual
	phases chan connPhase
	reaps  chan reapEvent
	armed  chan struct{}
	// passes counts reaper passes seen: after the first, the reaper's
	// timer is re-armed (armed) before the clock may move again.
	passes int
}

type connPhase struct {
	remote string
	phase  int32
}

type reapEvent struct {
	now    time.Time
	closed int
}

func startConnTestBroker(t *testing.T, tweak func(*Config)) *connTestBroker {
	t.Helper()
	ct := &connTestBroker{clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		phases: make(chan connPhase, 1024), reaps: make(chan reapEvent, 1024), armed: make(chan struct{}, 1024)}
	cfg := Config{
		BrokerID: 1, Listener: "127.0.0.1:0", LogDir: t.TempDir(), Controller: NewMemController(nil, 1),
		Logger: testLogger(t, slog.LevelInfo), Clock: ct.clk,
		// The broker's other periodic tasks do not fire within these
		// tests' few seconds of manual time.
		ReplicaLagTimeMax: time.Hour,
		LogCleanerDisable: true,
		onConnPhase:       func(remote string, p int32) { ct.phases <- connPhase{remote, p} },
		onReap:            func(now time.Time, closed int) { ct.reaps <- reapEvent{now, closed} },
		afterReapArmed:    func() { ct.armed <- struct{}{} },
	}
	if tweak != nil {
		tweak(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ct.b = b
	return ct
}

// waitPhase waits for the connection from local to enter phase.
func (ct *connTestBroker) waitPhase(t *testing.T, local net.Addr, phase int32) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e := <-ct.phases:
			if e.remote == local.String() && e.phase == phase {
				return
			}
		case <-timeout:
			t.Fatalf("connection %s never reached phase %d", local, phase)
		}
	}
}

// waitServed waits until the connection from local has served a request
// and is idle again (the serving event, then the next idle one), so that
// its idle time is stamped before the clock moves.
func (ct *connTestBroker) waitServed(t *testing.T, local net.Addr) {
	t.Helper()
	ct.waitPhase(t, local, phaseServing)
	ct.waitPhase(t, local, phaseIdle)
}

// tick advances the clock by d once the reaper waits on its timer (made
// in New for the first pass, re-armed after each), and returns the pass.
func (ct *connTestBroker) tick(t *testing.T, d time.Duration) reapEvent {
	t.Helper()
	if ct.passes > 0 {
		select {
		case <-ct.armed:
		case <-time.After(20 * time.Second):
			t.Fatal("reaper never re-armed its timer")
		}
	}
	ct.clk.Advance(d)
	select {
	case e := <-ct.reaps:
		ct.passes++
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no reaper pass after advancing the clock")
	}
	return reapEvent{}
}

func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// assertClosedByPeer reads until the broker's close shows (EOF or reset).
func assertClosedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection still open")
	}
}

// A slowloris client (one byte a second, never a whole request) is closed
// once kwal.socket.request.read.timeout.ms has passed since its first
// byte, however steadily it trickles.
func TestSlowlorisClosedAfterRequestReadTimeout(t *testing.T) {
	ct := startConnTestBroker(t, func(c *Config) { c.RequestReadTimeout = 4 * time.Second })
	slow := dialFrom(t, "127.0.0.1", ct.b.Addr())
	healthy := dialFrom(t, "127.0.0.1", ct.b.Addr())
	// A 100-byte request announced, then sent a byte a second.
	frame := make([]byte, 104)
	binary.BigEndian.PutUint32(frame, 100)
	if _, err := slow.Write(frame[:1]); err != nil {
		t.Fatal(err)
	}
	ct.waitPhase(t, slow.LocalAddr(), phaseReading)
	for sec := 1; ; sec++ {
		e := ct.tick(t, time.Second)
		if e.closed > 0 {
			if sec != 5 { // age 5 s > 4 s; at 4 s it was not over yet
				t.Fatalf("closed after %d s, want 5", sec)
			}
			break
		}
		if sec > 5 {
			t.Fatal("slow connection never closed")
		}
		if _, err := slow.Write(frame[sec : sec+1]); err != nil {
			t.Fatalf("write at %d s: %v", sec, err)
		}
	}
	assertClosedByPeer(t, slow)
	// The other connection, idle but under connections.max.idle.ms, serves.
	if err := wiretest.ApiVersions(healthy, 7); err != nil {
		t.Fatalf("healthy connection: %v", err)
	}
	if got := ct.b.conns.reapedSlow.Load(); got != 1 {
		t.Fatalf("reapedSlow %d", got)
	}
}

// A connection idle for longer than connections.max.idle.ms is closed; one
// that sends a request more often than that stays.
func TestIdleConnectionClosed(t *testing.T) {
	ct := startConnTestBroker(t, func(c *Config) {
		c.ConnectionsMaxIdle = 8 * time.Second
		c.RequestReadTimeout = 4 * time.Second
	})
	idle := dialFrom(t, "127.0.0.1", ct.b.Addr())
	busy := dialFrom(t, "127.0.0.1", ct.b.Addr())
	for i, c := range []net.Conn{idle, busy} {
		if err := wiretest.ApiVersions(c, int32(i)); err != nil {
			t.Fatal(err)
		}
		ct.waitServed(t, c.LocalAddr())
	}
	closedAt := 0
	for sec := 1; sec <= 12; sec++ {
		if sec%5 == 0 {
			// The busy client's request resets its idle time.
			if err := wiretest.ApiVersions(busy, int32(sec)); err != nil {
				t.Fatalf("busy connection at %d s: %v", sec, err)
			}
			ct.waitServed(t, busy.LocalAddr())
		}
		if e := ct.tick(t, time.Second); e.closed > 0 {
			if closedAt != 0 || e.closed != 1 {
				t.Fatalf("second close at %d s (%d closed)", sec, e.closed)
			}
			closedAt = sec
		}
	}
	if closedAt != 9 {
		t.Fatalf("idle connection closed at %d s, want 9", closedAt)
	}
	assertClosedByPeer(t, idle)
	if err := wiretest.ApiVersions(busy, 99); err != nil {
		t.Fatalf("busy connection after 12 s: %v", err)
	}
}

// max.connections.per.ip closes a client's connections over its cap at
// once, overrides apply per address, and another client still gets in and
// produces.
func TestConnectionsPerIPCap(t *testing.T) {
	ct := startConnTestBroker(t, func(c *Config) {
		c.MaxConnectionsPerIP = 3
		c.MaxConnectionsPerIPOverrides = map[netip.Addr]int{netip.MustParseAddr("127.0.0.3"): 1}
	})
	addr := ct.b.Addr()
	for i := range 3 {
		if err := wiretest.ApiVersions(dialFrom(t, "127.0.0.1", addr), int32(i)); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	over := dialFrom(t, "127.0.0.1", addr)
	assertClosedByPeer(t, over)
	if err := wiretest.ApiVersions(dialFrom(t, "127.0.0.3", addr), 1); err != nil {
		t.Fatal(err)
	}
	assertClosedByPeer(t, dialFrom(t, "127.0.0.3", addr))
	if got := ct.b.limits.refusedPerIP.Load(); got != 2 {
		t.Fatalf("refused %d, want 2", got)
	}
	// A normal client from another address.
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.Dialer(d.DialContext), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "caps", Value: []byte("in")}).FirstErr(); err != nil {
		t.Fatalf("normal client: %v", err)
	}
}

// At max.connections the broker stops accepting: a new connection waits
// in the backlog unanswered, and is served once another closes.
func TestMaxConnectionsWaitsForASlot(t *testing.T) {
	ct := startConnTestBroker(t, func(c *Config) {
		c.MaxConnections = 3
	})
	addr := ct.b.Addr()
	var open []net.Conn
	for i := range 3 {
		c := dialFrom(t, "127.0.0.1", addr)
		if err := wiretest.ApiVersions(c, int32(i)); err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	waiting := dialFrom(t, "127.0.0.2", addr) // the kernel completes the handshake
	if err := wiretest.WriteApiVersions(waiting, 42); err != nil {
		t.Fatal(err)
	}
	// Not answered while the cap holds: a timeout here cannot come from a
	// slow machine answering late, only from not answering.
	waiting.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if _, err := waiting.Read(b[:]); err == nil {
		t.Fatal("a connection over max.connections was served")
	}
	if n := ct.b.limits.open(); n != 3 {
		t.Fatalf("%d connections open, want 3", n)
	}
	open[0].Close()
	waiting.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := wiretest.ReadResponse(waiting, 42); err != nil {
		t.Fatalf("after a slot freed: %v", err)
	}
}

// Pipelined requests beyond kwal.connection.max.buffered.bytes wait for
// the bytes held to drop instead of being read; the connection stays
// correct.
func TestConnectionBufferedBytesBound(t *testing.T) {
	a, pb := net.Pipe()
	defer pb.Close()
	cs := newConnState(a)
	ok1, w1 := cs.reserve(60, 100, nil)
	ok2, w2 := cs.reserve(30, 100, nil)
	if !ok1 || !ok2 || w1 || w2 {
		t.Fatal("reserve under the bound")
	}
	got := make(chan bool)
	go func() {
		ok, waited := cs.reserve(20, 100, nil)
		got <- ok && waited
	}()
	select {
	case <-got:
		t.Fatal("reserve past the bound did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	cs.release(60)
	if !<-got {
		t.Fatal("reserve failed after release, or did not say it waited")
	}
	// One request larger than the bound passes alone.
	cs.release(50)
	if ok, _ := cs.reserve(500, 100, nil); !ok {
		t.Fatal("lone large request refused")
	}
	go func() {
		ok, _ := cs.reserve(1, 100, nil)
		got <- ok
	}()
	cs.close()
	if <-got {
		t.Fatal("reserve succeeded on a closed connection")
	}
}

// With several listeners, max.connections does not hold back the
// inter-broker one (Kafka's protected listener): at the cap an
// inter-broker connection is served at once and the least recently used
// connection of another listener is closed to make room; a client of
// another listener keeps waiting for a slot, and gets in once the
// inter-broker connection closes.
func TestMaxConnectionsInterBrokerListenerExempt(t *testing.T) {
	logs := &logbuf.Buffer{}
	ct := startConnTestBroker(t, func(c *Config) {
		c.MaxConnections = 3
		c.Listeners = []ListenerConfig{
			{Name: "INTERNAL", Addr: "127.0.0.1:0", Protocol: ProtocolPlaintext},
			{Name: "EXTERNAL", Addr: "127.0.0.1:0", Protocol: ProtocolPlaintext},
		}
		c.InterBrokerListenerName = "INTERNAL"
		c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, &testLogWriter{t: t}), nil))
	})
	internal, _ := ct.b.ListenerAddr("INTERNAL")
	external, _ := ct.b.ListenerAddr("EXTERNAL")
	// Three EXTERNAL connections, used in the order 0, 1, 2, then 0 and 2
	// again: 1 is the least recently used. The manual clock moves between
	// requests so that their times differ.
	var ext []net.Conn
	for range 3 {
		c := dialFrom(t, "127.0.0.1", external)
		ext = append(ext, c)
	}
	corr := int32(0)
	use := func(c net.Conn) {
		t.Helper()
		corr++
		if err := wiretest.ApiVersions(c, corr); err != nil {
			t.Fatal(err)
		}
		ct.waitServed(t, c.LocalAddr())
		ct.clk.Advance(time.Millisecond)
	}
	for _, i := range []int{0, 1, 2, 0, 2} {
		use(ext[i])
	}
	waiting := dialFrom(t, "127.0.0.2", external)
	if err := wiretest.WriteApiVersions(waiting, 100); err != nil {
		t.Fatal(err)
	}
	// An inter-broker connection at the cap is served.
	ib := dialFrom(t, "127.0.0.3", internal)
	ib.SetDeadline(time.Now().Add(20 * time.Second))
	if err := wiretest.ApiVersions(ib, 200); err != nil {
		t.Fatalf("inter-broker connection at max.connections: %v", err)
	}
	// The least recently used EXTERNAL connection was closed for it, the
	// others still serve.
	assertClosedByPeer(t, ext[1])
	for _, i := range []int{0, 2} {
		if err := wiretest.ApiVersions(ext[i], 300+int32(i)); err != nil {
			t.Fatalf("external connection %d: %v", i, err)
		}
	}
	if n := ct.b.limits.open(); n != 3 {
		t.Fatalf("%d connections open, want 3", n)
	}
	if n := ct.b.limits.evicted.Load(); n != 1 {
		t.Fatalf("%d connections closed for the inter-broker one, want 1", n)
	}
	if !strings.Contains(logs.String(), "making room for an inter-broker connection") {
		t.Fatalf("no log line for the closed connection:\n%s", logs)
	}
	// The waiting EXTERNAL client is still not served: the room made was
	// the inter-broker connection's. A timeout here cannot come from a
	// slow machine answering late, only from not answering.
	waiting.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if _, err := waiting.Read(b[:]); err == nil {
		t.Fatal("an external connection over max.connections was served")
	}
	ib.Close()
	waiting.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := wiretest.ReadResponse(waiting, 100); err != nil {
		t.Fatalf("after the inter-broker connection closed: %v", err)
	}
}

// max.connections holds across listeners: each listener's accept goroutine
// passed its wait for a slot when nothing was open, so a second
// listener's connection is accepted while the first's takes the last
// slot; it must then wait for a slot too, not be let in over the cap.
func TestMaxConnectionsAcrossListeners(t *testing.T) {
	ct := startConnTestBroker(t, func(c *Config) {
		c.MaxConnections = 1
		c.Listeners = []ListenerConfig{
			{Name: "INTERNAL", Addr: "127.0.0.1:0", Protocol: ProtocolPlaintext},
			{Name: "A", Addr: "127.0.0.1:0", Protocol: ProtocolPlaintext},
			{Name: "B", Addr: "127.0.0.1:0", Protocol: ProtocolPlaintext},
		}
		c.InterBrokerListenerName = "INTERNAL"
	})
	a, _ := ct.b.ListenerAddr("A")
	bAddr, _ := ct.b.ListenerAddr("B")
	first := dialFrom(t, "127.0.0.1", a)
	if err := wiretest.ApiVersions(first, 1); err != nil {
		t.Fatal(err)
	}
	second := dialFrom(t, "127.0.0.1", bAddr)
	if err := wiretest.WriteApiVersions(second, 2); err != nil {
		t.Fatal(err)
	}
	second.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if _, err := second.Read(b[:]); err == nil {
		t.Fatal("a second listener's connection was served over max.connections")
	}
	if n := ct.b.limits.open(); n != 1 {
		t.Fatalf("%d connections open, want 1", n)
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := wiretest.ReadResponse(second, 2); err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
}

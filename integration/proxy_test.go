package integration

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// tcpProxy is a network link a test can cut: it forwards each loopback
// TCP connection made to it to target, both ways. Cut closes every open
// connection and refuses new ones (accepted and closed at once, so the
// other side sees a reset link, not a hang) until Resume. A broker
// pointed at a proxy (a peer's address in cluster.brokers, a store's
// endpoint) loses that link alone while everything else it talks to,
// the metadata Kafka with its heartbeats included, stays up.
type tcpProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		cut    bool
		closed bool
		conns  map[net.Conn]struct{}
	}
}

// startProxy listens on a free loopback port and forwards to target until
// the test ends.
func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	p.mu.conns = map[net.Conn]struct{}{}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

// cut closes every forwarded connection and refuses new ones.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.cut = true
	for c := range p.mu.conns {
		c.Close()
	}
}

// resume forwards new connections again.
func (p *tcpProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.cut = false
}

func (p *tcpProxy) close() {
	p.mu.Lock()
	p.mu.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// track adds c to the open connections, or reports false (c closed) if
// the link is cut.
func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.cut || p.mu.closed {
		c.Close()
		return false
	}
	p.mu.conns[c] = struct{}{}
	return true
}

func (p *tcpProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.mu.conns, c)
		c.Close()
	}
}

func (p *tcpProxy) forward(in net.Conn) {
	defer p.wg.Done()
	if !p.track(in) {
		return
	}
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.untrack(in)
		return
	}
	if !p.track(out) {
		p.untrack(in)
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		if _, err := io.Copy(dst, src); err != nil {
			// A reset or a cut: the link is gone both ways.
			src.Close()
			dst.Close()
		} else if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite() // pass the half close on
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
	p.untrack(in, out)
}

// TestProxyCutAndResume: bytes pass both ways; a cut ends an open
// connection and refuses new ones; after resume new connections pass.
func TestProxyCutAndResume(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	p := startProxy(t, echo.Addr().String())
	roundTrip := func(c net.Conn, msg string) error {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != msg {
			t.Fatalf("echoed %q, want %q", buf, msg)
		}
		return nil
	}
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", p.addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	open := dial()
	if err := roundTrip(open, "before the cut"); err != nil {
		t.Fatal(err)
	}
	p.cut()
	if err := roundTrip(open, "through a cut link"); err == nil {
		t.Fatal("an open connection still passes bytes after the cut")
	}
	if err := roundTrip(dial(), "new while cut"); err == nil {
		t.Fatal("a new connection passes bytes while the link is cut")
	}
	p.resume()
	if err := roundTrip(dial(), "after the resume"); err != nil {
		t.Fatalf("after resume: %v", err)
	}
}

package integration

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/kwal/kwal/internal/faultnet"
)

// tcpProxy is a network link a test can cut: a faultnet.Proxy that
// forwards each loopback TCP connection made to it to target, both ways.
// Cut closes every open connection and refuses new ones (accepted and
// closed at once, so the other side sees a reset link, not a hang) until
// Resume. A broker pointed at a proxy (a peer's address in
// cluster.brokers, a store's endpoint) loses that link alone while
// everything else it talks to, the metadata Kafka with its heartbeats
// included, stays up.
type tcpProxy struct{ p *faultnet.Proxy }

// startProxy listens on a free loopback port and forwards to target until
// the test ends.
func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p, err := faultnet.Listen("127.0.0.1:0", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &tcpProxy{p}
}

func (p *tcpProxy) addr() string { return p.p.Addr() }

// cut closes every forwarded connection and refuses new ones.
func (p *tcpProxy) cut() { p.p.Set(faultnet.Reset) }

// resume forwards new connections again.
func (p *tcpProxy) resume() { p.p.Set(faultnet.Open) }

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

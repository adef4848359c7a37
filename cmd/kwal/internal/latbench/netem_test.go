package latbench

import (
	"io"
	"net"
	"testing"
	"time"
)

// pipePair returns a connected TCP pair on loopback.
func pipePair(t *testing.T) (client, server net.Conn, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			acc <- c
		}
		close(acc)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s, ln.Addr().String()
}

func TestDelayConnCrossRack(t *testing.T) {
	const oneWay = 20 * time.Millisecond
	n := newNetModel(oneWay)
	c, s, addr := pipePair(t)
	n.register(addr, "az2")
	dc := n.wrap(c, "az1", addr)
	if _, ok := dc.(*delayConn); !ok {
		t.Fatalf("cross-rack conn not wrapped: %T", dc)
	}
	start := time.Now()
	for _, part := range []string{"hello ", "kafka ", "world"} {
		if n, err := dc.Write([]byte(part)); err != nil || n != len(part) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if w := time.Since(start); w > oneWay/2 {
		t.Errorf("Write blocked for %v; it should return at once", w)
	}
	buf := make([]byte, len("hello kafka world"))
	if _, err := io.ReadFull(s, buf); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); got < oneWay {
		t.Errorf("bytes arrived after %v, before the one-way delay %v", got, oneWay)
	}
	if string(buf) != "hello kafka world" {
		t.Errorf("got %q: order or content lost", buf)
	}
	if mean, writes := n.measured(); writes != 3 || mean < oneWay {
		t.Errorf("measured %v over %d writes", mean, writes)
	}
	if err := dc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Write([]byte("x")); err == nil {
		t.Error("Write after Close succeeded")
	}
}

func TestDelayConnSameRackAndUnknown(t *testing.T) {
	n := newNetModel(time.Second)
	c, _, addr := pipePair(t)
	n.register(addr, "az1")
	if got := n.wrap(c, "az1", addr); got != c {
		t.Errorf("same-rack conn wrapped: %T", got)
	}
	// An address not yet registered is wrapped and resolved at each write.
	c2, s2, addr2 := pipePair(t)
	dc := n.wrap(c2, "az1", addr2)
	if _, ok := dc.(*delayConn); !ok {
		t.Fatalf("unknown peer not wrapped: %T", dc)
	}
	n.register(addr2, "az1")
	if _, err := dc.Write([]byte("now")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	s2.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := io.ReadFull(s2, buf); err != nil {
		t.Fatalf("same-rack bytes delayed or lost: %v", err)
	}
	dc.Close()
	if off := newNetModel(0); off.wrap(c, "az1", "elsewhere:1") != c {
		t.Error("a zero delay wraps connections")
	}
}

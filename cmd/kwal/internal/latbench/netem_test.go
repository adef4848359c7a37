package latbench

import (
	"errors"
	"io"
	"net"
	"os"
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
	t.Cleanup(n.close)
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
	if mean, writes, reads := n.measured(); writes != 3 || reads != 0 || mean < oneWay {
		t.Errorf("measured %v over %d writes and %d reads", mean, writes, reads)
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
	t.Cleanup(n.close)
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

// The replies to a dialing side cross the racks too: bytes the peer writes
// are handed to Read no sooner than the one-way delay after they were
// written, in order, and the read deadline applies to that wait.
func TestDelayConnDelaysReplies(t *testing.T) {
	const oneWay = 30 * time.Millisecond
	n := newNetModel(oneWay)
	t.Cleanup(n.close)
	c, s, addr := pipePair(t)
	n.register(addr, "az2")
	dc := n.wrap(c, "az1", addr)

	// Nothing sent: the deadline ends the Read with a timeout.
	dc.SetReadDeadline(time.Now().Add(oneWay / 3))
	var ne net.Error
	if _, err := dc.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read with nothing sent = %v, want a timeout", err)
	}

	// A reply still on the wire when the deadline passes stays there: the
	// deadline error first, then the bytes once due, not before.
	sent := time.Now()
	if _, err := s.Write([]byte("reply ")); err != nil {
		t.Fatal(err)
	}
	dc.SetReadDeadline(time.Now().Add(time.Millisecond))
	if _, err := dc.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read before the reply was due = %v, want the deadline", err)
	}
	dc.SetReadDeadline(time.Time{})
	if _, err := s.Write([]byte("two")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("reply two"))
	if _, err := io.ReadFull(dc, buf); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(sent); got < oneWay {
		t.Errorf("reply read %v after it was written, before the one-way delay %v", got, oneWay)
	}
	if string(buf) != "reply two" {
		t.Errorf("got %q: order or content lost", buf)
	}
	if _, writes, reads := n.measured(); writes != 0 || reads < 1 {
		t.Errorf("measured %d writes and %d reads, want 0 and at least 1", writes, reads)
	}

	// The peer's close reaches Read after its last bytes, and stays.
	if _, err := s.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	last, err := io.ReadAll(dc)
	if err != nil || string(last) != "bye" {
		t.Fatalf("ReadAll after the peer closed = %q, %v", last, err)
	}
	if _, err := dc.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("Read after EOF = %v, want io.EOF again", err)
	}
	dc.Close()
	if _, err := dc.Write([]byte("x")); err == nil {
		t.Error("Write after Close succeeded")
	}
}

// A Read blocked on a delayConn returns when the conn is closed, and a
// deadline set while it waits applies to it.
func TestDelayConnReadUnblocks(t *testing.T) {
	n := newNetModel(time.Hour)
	t.Cleanup(n.close)
	c, _, addr := pipePair(t)
	n.register(addr, "az2")
	dc := n.wrap(c, "az1", addr)
	got := make(chan error, 1)
	go func() {
		_, err := dc.Read(make([]byte, 1))
		got <- err
	}()
	dc.SetReadDeadline(time.Now().Add(-time.Second))
	if err := <-got; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read after a deadline in the past was set = %v", err)
	}
	dc.SetReadDeadline(time.Time{})
	go func() {
		_, err := dc.Read(make([]byte, 1))
		got <- err
	}()
	dc.Close()
	if err := <-got; err == nil {
		t.Fatal("Read on a closed conn returned no error")
	}
}

package wiretest

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// RefusingAddr returns a loopback address nothing listens on (a port that
// was just free): connecting to it is refused.
func RefusingAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// SilentAddr returns a loopback address that accepts connections, holds
// them open and never answers, until the test ends.
func SilentAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// WriteApiVersions sends an ApiVersions v0 request with correlation id
// corr.
func WriteApiVersions(c net.Conn, corr int32) error {
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 0, 0xff, 0xff}
	binary.BigEndian.PutUint32(req[8:], uint32(corr))
	_, err := c.Write(req)
	return err
}

// ReadResponse reads one response frame and checks its correlation id.
func ReadResponse(c net.Conn, corr int32) error {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	if len(body) < 4 {
		return fmt.Errorf("response of %d bytes", len(body))
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	return nil
}

// ApiVersions sends an ApiVersions request and reads its response within
// 20 s (a bound for a loaded machine, not a wait for state).
func ApiVersions(c net.Conn, corr int32) error {
	c.SetDeadline(time.Now().Add(20 * time.Second))
	defer c.SetDeadline(time.Time{})
	if err := WriteApiVersions(c, corr); err != nil {
		return err
	}
	return ReadResponse(c, corr)
}

package broker

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// wireClient is the replica fetcher's connection to a leader: one request
// at a time, Kafka framing, request header v1/v2. Not safe for concurrent
// use.
type wireClient struct {
	conn     net.Conn
	clientID string
	corr     int32
	buf      []byte
	maxResp  int32
}

func dialWire(dial DialFunc, addr, clientID string, timeout time.Duration, maxResp int32) (*wireClient, error) {
	c, err := dial("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &wireClient{conn: c, clientID: clientID, maxResp: maxResp}, nil
}

func (c *wireClient) close() { c.conn.Close() }

// roundTrip sends req at its set version and decodes the response.
func (c *wireClient) roundTrip(req kmsg.Request, deadline time.Time) (kmsg.Response, error) {
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	c.corr++
	b := append(c.buf[:0], 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(c.corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.clientID)))
	b = append(b, c.clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	c.buf = b
	if _, err := c.conn.Write(b); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > c.maxResp {
		return nil, fmt.Errorf("response size %d out of range", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, c.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && resp.Key() != apiKeyApiVersions {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp, nil
}

// WireConn is a Kafka wire connection to another broker, opened by
// FollowerReplica.Dial: one request at a time, Kafka framing. Not safe for
// concurrent use.
type WireConn struct{ c *wireClient }

// RoundTrip sends req at its set version and decodes the response; the
// connection is unusable after an error.
func (w *WireConn) RoundTrip(req kmsg.Request, deadline time.Time) (kmsg.Response, error) {
	return w.c.roundTrip(req, deadline)
}

// Close closes the connection.
func (w *WireConn) Close() { w.c.close() }

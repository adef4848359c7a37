package broker

import (
	"crypto/tls"
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
	// resp is the response buffer roundTripReused reads into and keeps
	// (up to maxKeptResponse bytes) for its next call.
	resp []byte
}

// maxKeptResponse bounds the response buffer a wireClient keeps between
// reusing round trips: a default replica fetch response (10 MiB) and its
// framing fit; a larger one is read into memory of its own.
const maxKeptResponse = DefaultReplicaFetchResponseMax + 1<<20

func dialWire(dial DialFunc, addr, clientID string, timeout time.Duration, maxResp int32) (*wireClient, error) {
	c, err := dial("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &wireClient{conn: c, clientID: clientID, maxResp: maxResp}, nil
}

func (c *wireClient) close() { c.conn.Close() }

// abort closes the connection with a reset (SO_LINGER 0) where it is TCP
// (under TLS too): the leader's next write on it, the answer to a long
// poll cut here, then fails, so it is not counted as told
// (fetchOp.told). A plain close would let that write succeed into the
// socket buffer of a peer that never reads it. Other connections (a
// test's or a proxy's dialer) are closed plainly.
func (c *wireClient) abort() {
	nc := c.conn
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if tcp, ok := tcpConnOf(nc); ok {
		tcp.SetLinger(0)
	}
	c.conn.Close()
}

// roundTrip sends req at its set version and decodes the response. The
// response's byte fields (a fetch's record batches) are its own.
func (c *wireClient) roundTrip(req kmsg.Request, deadline time.Time) (kmsg.Response, error) {
	return c.exchange(req, deadline, func(n int) []byte { return make([]byte, n) })
}

// roundTripReused is roundTrip reading the response into a buffer the
// client keeps and reads the next reused response into: the response's
// byte fields (a fetch's record batches, which kmsg does not copy) are
// valid only until the next roundTripReused, so the caller must be done
// with them by then. The replica fetcher appends what a fetch brings
// before it sends the next, as the remote WAL's follower appends a GET
// body from a pooled buffer: without it every fetch response was fresh
// memory for the garbage collector, which the remote WAL's path does not
// make.
func (c *wireClient) roundTripReused(req kmsg.Request, deadline time.Time) (kmsg.Response, error) {
	return c.exchange(req, deadline, func(n int) []byte {
		if n > maxKeptResponse {
			return make([]byte, n)
		}
		if cap(c.resp) < n {
			c.resp = make([]byte, n)
		}
		return c.resp[:n]
	})
}

// exchange sends req and decodes the response, read into body(n) for a
// response of n bytes.
func (c *wireClient) exchange(req kmsg.Request, deadline time.Time, body func(n int) []byte) (kmsg.Response, error) {
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
	b = body(int(n))
	if _, err := io.ReadFull(c.conn, b); err != nil {
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(b)); corr != c.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, c.corr)
	}
	b = b[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && resp.Key() != apiKeyApiVersions {
		var err error
		if b, err = skipTags(b); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(b); err != nil {
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

// dialBroker connects to broker id on the inter-broker listener (see
// secureDial). It returns the address dialled, for errors.
func (b *Broker) dialBroker(id int32, clientID string, timeout time.Duration, maxResp int32) (*wireClient, string, error) {
	addr := b.interBrokerAddr(id)
	if addr == "" {
		return nil, "", fmt.Errorf("%w: broker %d on %s", errNoEndpoint, id, b.cfg.InterBrokerListenerName)
	}
	c, err := b.secureDial(addr, clientID, timeout, maxResp)
	return c, addr, err
}

// interBrokerAddr is broker id's address on the inter-broker listener,
// "" if unknown.
func (b *Broker) interBrokerAddr(id int32) string {
	for _, bi := range b.ctrl.Brokers() {
		if bi.ID == id {
			if ep, ok := bi.Endpoint(b.cfg.InterBrokerListenerName); ok {
				return ep.Addr()
			}
		}
	}
	return ""
}

// secureDial connects to another broker's inter-broker listener at addr,
// with TLS and SASL as that listener asks (InterBrokerTLS,
// InterBrokerSASL); TLS checks the certificate against addr's host.
func (b *Broker) secureDial(addr, clientID string, timeout time.Duration, maxResp int32) (*wireClient, error) {
	deadline := time.Now().Add(timeout)
	c, err := dialWire(b.cfg.Dial, addr, clientID, timeout, maxResp)
	if err != nil {
		return nil, err
	}
	lc, _ := b.cfg.listenerConfig(b.cfg.InterBrokerListenerName)
	if lc.Protocol.UsesTLS() {
		tc := b.cfg.InterBrokerTLS.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		conn := tls.Client(c.conn, tc)
		if err := conn.SetDeadline(deadline); err == nil {
			err = conn.Handshake()
		}
		if err != nil {
			c.close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		c.conn = conn
	}
	if lc.Protocol.UsesSASL() {
		mech, err := b.cfg.InterBrokerSASL.SASL()
		if err == nil {
			err = c.authenticate(mech, deadline)
		}
		if err != nil {
			c.close()
			return nil, fmt.Errorf("SASL with %s: %w", addr, err)
		}
	}
	return c, nil
}

package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"runtime/debug"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// connState is one client connection. Requests on it are served one at a
// time, in order (Kafka mutes a connection until its response is sent), so
// at most one request body is held per connection.
type connState struct {
	conn     net.Conn
	remote   string
	clientID string
	// listener is the listener the connection came in on: Metadata
	// answers with addresses on it, and its protocol decides TLS and SASL.
	listener *listener
	// sasl is the connection's SASL state (nil on listeners without SASL).
	sasl *saslState
	// tlsPrincipal is User:<subject> of a verified client certificate.
	tlsPrincipal string
	buf          []byte
	out          []byte
	// noWait completes delayed operations at once, as if they expired
	// (fuzzing drives handlers without a clock).
	noWait bool
	// pipelining is set while serveConn runs: a handler that must wait
	// (acks=all) may then set deferred to a function that waits and
	// returns the response, and return a nil response; serveConn reads on
	// and writes that response when its turn comes.
	pipelining bool
	deferred   func() kmsg.Response
	lastHeader requestHeader
}

// maxPipelined bounds the requests a connection has read but not yet
// answered, which bounds its memory.
const maxPipelined = 8

// reply is one response in the connection's write order.
type reply struct {
	frame []byte               // encoded response, or nil
	wait  func() kmsg.Response // a pipelined response still to come
	h     requestHeader
}

// retainedBuffer is the largest buffer a connection keeps between requests.
const retainedBuffer = 1 << 20

func (b *Broker) serveConn(raw net.Conn, l *listener) {
	defer b.wg.Done()
	cs := &connState{conn: raw, remote: raw.RemoteAddr().String(), listener: l}
	defer func() {
		raw.Close()
		b.mu.Lock()
		delete(b.mu.conns, raw)
		b.mu.Unlock()
	}()
	c, ok := b.secureConn(cs, raw)
	if !ok {
		return
	}
	cs.conn = c
	// Responses go out in request order from one writer; a request whose
	// response is pipelined (acks=all) does not stop the reader.
	replies := make(chan reply, maxPipelined)
	writerDone := make(chan struct{})
	// queued counts replies handed to the writer and not yet written; at
	// zero the writer is idle and the reader writes its reply itself,
	// without copying it out of cs.out.
	var queued atomic.Int32
	var writeFailed atomic.Bool
	go func() {
		defer close(writerDone)
		failed := false
		for r := range replies {
			failed = failed || writeFailed.Load()
			frame := r.frame
			if r.wait != nil {
				resp := r.wait()
				if resp == nil || failed {
					queued.Add(-1)
					continue
				}
				frame = encodeResponse(nil, r.h, resp)
			}
			if frame == nil || failed {
				queued.Add(-1)
				continue
			}
			if _, err := c.Write(frame); err != nil {
				b.logger.Debug("connection write", "remote", cs.remote, "err", err)
				failed = true
				writeFailed.Store(true)
				c.Close()
			}
			queued.Add(-1)
		}
	}()
	defer func() {
		close(replies)
		<-writerDone
	}()
	var size [4]byte
	for {
		if _, err := io.ReadFull(c, size[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				b.logger.Debug("connection read", "remote", cs.remote, "err", err)
			}
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if raw := cs.sasl != nil && cs.sasl.rawTokens; (n < 8 && !raw) || n < 0 || n > b.cfg.SocketRequestMaxBytes {
			b.logger.Warn("closing connection: bad request size", "remote", cs.remote, "size", n, "max", b.cfg.SocketRequestMaxBytes)
			return
		}
		if cs.sasl != nil && !cs.sasl.authenticated() && n > saslMaxReceiveSize {
			b.logger.Warn("closing connection: request before authentication too large", "remote", cs.remote, "listener", l.cfg.Name, "size", n, "max", saslMaxReceiveSize)
			return
		}
		if cap(cs.buf) < int(n) {
			cs.buf = make([]byte, n)
		}
		frame := cs.buf[:n]
		if _, err := io.ReadFull(c, frame); err != nil {
			b.logger.Warn("closing connection: short request", "remote", cs.remote, "size", n, "err", err)
			return
		}
		cs.pipelining, cs.deferred = true, nil
		resp, keep := b.handleFrame(cs, frame)
		r := reply{}
		if resp != nil && queued.Load() == 0 {
			// Nothing ahead of this reply: write it now, from cs.out.
			if writeFailed.Load() {
				return
			}
			if _, err := c.Write(resp); err != nil {
				b.logger.Debug("connection write", "remote", cs.remote, "err", err)
				return
			}
			resp = nil
		} else if resp != nil {
			r.frame = append([]byte(nil), resp...)
		}
		if cs.deferred != nil && r.frame == nil && resp == nil {
			r.wait, r.h = cs.deferred, cs.lastHeader
			// The handler may still hold parts of frame; read the next
			// request into a fresh buffer.
			cs.buf = nil
		}
		if cap(cs.buf) > retainedBuffer {
			cs.buf = nil
		}
		if cap(cs.out) > retainedBuffer {
			cs.out = nil
		}
		if r.frame != nil || r.wait != nil {
			queued.Add(1)
			replies <- r
		}
		if !keep {
			return
		}
	}
}

// requestHeader is Kafka's request header v1/v2.
type requestHeader struct {
	key, version int16
	correlation  int32
	clientID     string
}

var errShortHeader = errors.New("short request header")

// parseRequestHeader decodes key, version, correlation id and client id;
// it returns the rest of the frame (header tags not yet skipped).
func parseRequestHeader(frame []byte) (requestHeader, []byte, error) {
	if len(frame) < 10 {
		return requestHeader{}, nil, errShortHeader
	}
	h := requestHeader{
		key:         int16(binary.BigEndian.Uint16(frame[0:])),
		version:     int16(binary.BigEndian.Uint16(frame[2:])),
		correlation: int32(binary.BigEndian.Uint32(frame[4:])),
	}
	l := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	if l >= 0 {
		if int(l) > len(rest) {
			return h, nil, fmt.Errorf("client id of %d bytes in a %d byte frame", l, len(frame))
		}
		h.clientID, rest = string(rest[:l]), rest[l:]
	} else if l != -1 {
		return h, nil, fmt.Errorf("client id length %d", l)
	}
	return h, rest, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errors.New("bad tagged field count")
	}
	b = b[k:]
	for range n {
		_, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// handleFrame decodes one request frame, serves it and returns the
// encoded response frame (nil for none) and whether to keep the
// connection. It never panics: a panic is logged and closes the
// connection.
func (b *Broker) handleFrame(cs *connState, frame []byte) (resp []byte, keep bool) {
	defer func() {
		if r := recover(); r != nil {
			b.logger.Error("closing connection: panic serving request", "remote", cs.remote, "panic", r, "stack", string(debug.Stack()))
			resp, keep = nil, false
		}
	}()
	if cs.sasl != nil && cs.sasl.rawTokens {
		return b.saslRawToken(cs, frame)
	}
	h, rest, err := parseRequestHeader(frame)
	if err != nil {
		b.logger.Warn("closing connection: malformed request header", "remote", cs.remote, "err", err)
		return nil, false
	}
	cs.clientID = h.clientID
	cs.lastHeader = h
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		b.logger.Warn("closing connection: unknown api key", "remote", cs.remote, "key", h.key, "version", h.version)
		return nil, false
	}
	if !b.allowedBeforeAuth(cs, h) {
		return nil, false
	}
	if h.key == apiKeyApiVersions && !supported(h.key, h.version) {
		// KIP-511: answer a newer ApiVersions with v0 and our ranges.
		b.logger.Info("ApiVersions version not supported; answering v0", "remote", cs.remote, "version", h.version)
		r := kmsg.NewPtrApiVersionsResponse()
		r.Version = 0
		r.ErrorCode = kerr.UnsupportedVersion.Code
		r.ApiKeys = apiVersionKeys()
		return cs.encode(h, r), true
	}
	if !supported(h.key, h.version) {
		b.logger.Warn("unsupported api version", "remote", cs.remote, "key", kmsg.NameForKey(h.key), "version", h.version)
		if h.version < 0 || h.version > req.MaxVersion() {
			return nil, false
		}
		r := req.ResponseKind()
		r.SetVersion(h.version)
		if !setTopErrorCode(r, kerr.UnsupportedVersion.Code) {
			return nil, false
		}
		return cs.encode(h, r), true
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if rest, err = skipTags(rest); err != nil {
			b.logger.Warn("closing connection: malformed request header tags", "remote", cs.remote, "key", kmsg.NameForKey(h.key), "err", err)
			return nil, false
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		b.logger.Warn("closing connection: malformed request", "remote", cs.remote, "key", kmsg.NameForKey(h.key), "version", h.version, "err", err)
		return nil, false
	}
	r, keep := b.authorizedDispatch(cs, req)
	if r == nil {
		return nil, keep
	}
	return cs.encode(h, r), keep
}

// encode frames a response: size, correlation id, header tags for
// flexible versions except ApiVersions (whose response header is always
// v0), body.
func (cs *connState) encode(h requestHeader, r kmsg.Response) []byte {
	cs.out = encodeResponse(cs.out[:0], h, r)
	return cs.out
}

func encodeResponse(dst []byte, h requestHeader, r kmsg.Response) []byte {
	out := append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(out[4:], uint32(h.correlation))
	if r.IsFlexible() && r.Key() != apiKeyApiVersions {
		out = append(out, 0)
	}
	out = r.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// setTopErrorCode sets a response's top-level ErrorCode field, if it has one.
func setTopErrorCode(r kmsg.Response, code int16) bool {
	v := reflect.ValueOf(r)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	f := v.Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 || !f.CanSet() {
		return false
	}
	f.SetInt(int64(code))
	return true
}

// dispatch serves a decoded request. A nil response means none is sent
// (acks=0); keep false closes the connection.
func (b *Broker) dispatch(cs *connState, req kmsg.Request) (kmsg.Response, bool) {
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		return b.handleApiVersions(r), true
	case *kmsg.MetadataRequest:
		return b.handleMetadata(cs, r), true
	case *kmsg.SASLHandshakeRequest:
		return b.handleSASLHandshake(cs, r)
	case *kmsg.SASLAuthenticateRequest:
		return b.handleSASLAuthenticate(cs, r)
	case *kmsg.ProduceRequest:
		return b.handleProduce(cs, r)
	case *kmsg.FetchRequest:
		return b.handleFetch(cs, r), true
	case *kmsg.ListOffsetsRequest:
		return b.handleListOffsets(r), true
	case *kmsg.InitProducerIDRequest:
		return b.handleInitProducerID(r), true
	case *kmsg.CreateTopicsRequest:
		return b.handleCreateTopics(r), true
	case *kmsg.DescribeConfigsRequest:
		return b.handleDescribeConfigs(r), true
	case *kmsg.OffsetForLeaderEpochRequest:
		return b.handleOffsetForLeaderEpoch(r), true
	}
	if r := b.dispatchGroups(cs, req); r != nil {
		return r, true
	}
	// supported() and this switch list the same keys.
	panic(fmt.Sprintf("broker: no handler for supported key %d", req.Key()))
}

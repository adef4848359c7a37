package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

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
	// sendfile: the connection's responses go unchanged onto a TCP
	// socket (a plaintext or SASL_PLAINTEXT listener: PLAIN and SCRAM do
	// not wrap the stream), so fetched records may go out with sendfile.
	// A TLS connection must encrypt every byte and copies them, as
	// Kafka's SslTransportLayer does. Set by serveConn once the
	// connection is secured.
	sendfile bool
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

	// state is what the connection reaper reads, the phase and since when
	// in one word (see packPhase) so that it never pairs one phase with
	// another's time. queued counts replies handed to the writer and not
	// written; closed is set once the connection is closed.
	state  atomic.Int64
	queued atomic.Int32
	closed atomic.Bool

	// buffered bounds the bytes held for this connection: request frames
	// being served or waiting for their pipelined response, and response
	// frames queued for the writer (kwal.connection.max.buffered.bytes).
	buffered struct {
		sync.Mutex
		n      int64
		closed bool
		cond   *sync.Cond
	}
	// splices: the file sections of the fetch response being encoded;
	// spliced: the encoded frame handleFrame returned, when it has
	// sections to send with sendfile.
	splices []splice
	spliced *splicedFrame
	// written, set by a handler, runs once its response has been written
	// whole to the socket, never when the write fails: a fetch records
	// then what its answer told a follower (fetchOp.told).
	written func()
}

// Connection phases, for the reaper.
const (
	phaseIdle    = iota // waiting for a request's first byte
	phaseReading        // a request's first byte arrived, the rest not yet
	phaseServing        // serving a request
)

func newConnState(c net.Conn) *connState {
	cs := &connState{conn: c, remote: c.RemoteAddr().String()}
	cs.buffered.cond = sync.NewCond(&cs.buffered.Mutex)
	return cs
}

// packPhase puts a phase in the low 2 bits of a clock time in
// nanoseconds (the time loses its last 2 ns).
func packPhase(p int32, t time.Time) int64 { return t.UnixNano()&^3 | int64(p) }

func unpackPhase(v int64) (int32, time.Time) { return int32(v & 3), time.Unix(0, v&^3) }

func (b *Broker) setPhase(cs *connState, p int32) {
	cs.state.Store(packPhase(p, b.clock.Now()))
	if h := b.cfg.onConnPhase; h != nil {
		h(cs.remote, p)
	}
}

// reserve waits until n more bytes fit under max (a request larger than
// max alone is let through once nothing else is held, as
// socket.request.max.bytes already bounds it) and counts them; ok is
// false if the connection closed meanwhile, waited says whether it had
// to wait. waiting, if set, runs once before the first wait, under the
// buffer's lock (it must not block).
func (cs *connState) reserve(n, max int64, waiting func()) (ok, waited bool) {
	cs.buffered.Lock()
	defer cs.buffered.Unlock()
	for cs.buffered.n > 0 && cs.buffered.n+n > max && !cs.buffered.closed {
		if !waited && waiting != nil {
			waiting()
		}
		waited = true
		cs.buffered.cond.Wait()
	}
	cs.buffered.n += n
	return !cs.buffered.closed, waited
}

// hold counts n bytes already allocated, without waiting.
func (cs *connState) hold(n int64) {
	cs.buffered.Lock()
	cs.buffered.n += n
	cs.buffered.Unlock()
}

func (cs *connState) release(n int64) {
	if n == 0 {
		return
	}
	cs.buffered.Lock()
	cs.buffered.n -= n
	cs.buffered.cond.Broadcast()
	cs.buffered.Unlock()
}

// close closes the connection and wakes a reader waiting in reserve.
func (cs *connState) close() {
	cs.closed.Store(true)
	cs.conn.Close()
	cs.buffered.Lock()
	cs.buffered.closed = true
	cs.buffered.cond.Broadcast()
	cs.buffered.Unlock()
}

// maxPipelined bounds the requests a connection has read but not yet
// answered, which bounds its memory.
const maxPipelined = 8

// reply is one response in the connection's write order.
type reply struct {
	frame []byte // encoded response, or nil
	// spliced: frame is spliced.frame, whose record sections go out
	// with sendfile.
	spliced *splicedFrame
	wait    func() kmsg.Response // a pipelined response still to come
	h       requestHeader
	held    int64  // bytes reserved for this reply, released once written
	written func() // connState.written of the request, or nil
}

// retainedBuffer is the largest buffer a connection keeps between requests.
const retainedBuffer = 1 << 20

func (b *Broker) serveConn(cs *connState) {
	defer b.wg.Done()
	raw := cs.conn // closing it (cs.close, from anywhere) ends TLS too
	defer func() {
		cs.close()
		b.mu.Lock()
		delete(b.mu.conns, raw)
		b.mu.Unlock()
	}()
	c, ok := b.secureConn(cs, raw)
	if !ok {
		return
	}
	_, cs.sendfile = tcpConnOf(c)
	l := cs.listener
	// Responses go out in request order from one writer; a request whose
	// response is pipelined (acks=all) does not stop the reader.
	replies := make(chan reply, maxPipelined)
	writerDone := make(chan struct{})
	// cs.queued counts replies handed to the writer and not yet written;
	// at zero the writer is idle and the reader writes its reply itself,
	// without copying it out of cs.out.
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
					cs.release(r.held)
					cs.queued.Add(-1)
					continue
				}
				frame = encodeResponse(nil, r.h, resp)
			}
			if frame == nil || failed {
				cs.release(r.held)
				if r.spliced != nil {
					r.spliced.close()
				}
				cs.queued.Add(-1)
				continue
			}
			var err error
			if r.spliced != nil {
				_, err = b.writeSpliced(c, r.spliced)
			} else {
				_, err = b.writeResponse(c, frame)
			}
			if err != nil {
				b.logger.Debug("connection write", "remote", cs.remote, "err", err)
				failed = true
				writeFailed.Store(true)
				cs.close()
			} else if r.written != nil {
				r.written()
			}
			cs.release(r.held)
			cs.queued.Add(-1)
		}
	}()
	defer func() {
		close(replies)
		<-writerDone
	}()
	var size [4]byte
	for {
		b.setPhase(cs, phaseIdle)
		n, err := c.Read(size[:])
		if n > 0 {
			// The request has started: from now on it must arrive whole
			// within the read timeout (the reaper watches).
			b.setPhase(cs, phaseReading)
			if n < len(size) {
				_, err = io.ReadFull(c, size[n:])
			} else {
				err = nil
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				b.logger.Debug("connection read", "remote", cs.remote, "err", err)
			}
			return
		}
		size := int32(binary.BigEndian.Uint32(size[:]))
		// After SaslHandshake v0 a bare token may be shorter than a header.
		if rawToken := cs.sasl != nil && cs.sasl.rawTokens; (size < 8 && !rawToken) || size < 0 || size > b.cfg.SocketRequestMaxBytes {
			b.logger.Warn("closing connection: bad request size", "remote", cs.remote, "size", size, "max", b.cfg.SocketRequestMaxBytes)
			return
		}
		if cs.sasl != nil && !cs.sasl.authenticated() && size > saslMaxReceiveSize {
			b.logger.Warn("closing connection: request before authentication too large", "remote", cs.remote, "listener", l.cfg.Name, "size", size, "max", saslMaxReceiveSize)
			return
		}
		// Waiting here for the client to read its responses is
		// back-pressure, not a slow request: if reserve has to wait, the
		// read timeout starts again once the body may be read; if not,
		// it still runs from the request's first byte.
		// Only a wait leaves the reading phase: a request that fits stays
		// in it, stamped at its first byte, with no moment in which the
		// reaper would skip it (a pass that fell in such a moment let a
		// slowloris request live one reaper interval more).
		ok, waited := cs.reserve(int64(size), b.cfg.ConnectionMaxBufferedBytes, func() {
			cs.state.Store(packPhase(phaseServing, b.clock.Now()))
		})
		if !ok {
			cs.release(int64(size))
			return
		}
		if waited {
			b.setPhase(cs, phaseReading)
		}
		held := int64(size)
		if cap(cs.buf) < int(size) {
			cs.buf = make([]byte, size)
		}
		frame := cs.buf[:size]
		if _, err := io.ReadFull(c, frame); err != nil {
			cs.release(held)
			if cs.closed.Load() && errors.Is(err, net.ErrClosed) {
				return // the reaper closed it and said why
			}
			b.logger.Warn("closing connection: short request", "remote", cs.remote, "size", size, "err", err)
			return
		}
		b.setPhase(cs, phaseServing)
		cs.pipelining, cs.deferred = true, nil
		cs.written = nil
		resp, keep := b.handleFrame(cs, frame)
		sf := cs.spliced
		cs.spliced = nil
		r := reply{written: cs.written}
		cs.written = nil
		if resp != nil && cs.queued.Load() == 0 {
			// Nothing ahead of this reply: write it now, from cs.out.
			if writeFailed.Load() {
				cs.release(held)
				if sf != nil {
					sf.close()
				}
				return
			}
			var err error
			if sf != nil {
				_, err = b.writeSpliced(c, sf)
			} else {
				_, err = b.writeResponse(c, resp)
			}
			if err != nil {
				b.logger.Debug("connection write", "remote", cs.remote, "err", err)
				cs.release(held)
				return
			}
			if r.written != nil {
				r.written()
				r.written = nil
			}
			resp = nil
		} else if sf != nil {
			r.frame, r.spliced = sf.frame, sf
		} else if resp != nil {
			r.frame = append([]byte(nil), resp...)
			r.held = int64(len(r.frame))
			cs.hold(r.held)
		}
		if cs.deferred != nil && r.frame == nil && resp == nil {
			r.wait, r.h = cs.deferred, cs.lastHeader
			// The handler may still hold parts of frame; read the next
			// request into a fresh buffer. The frame stays counted until
			// the response is written.
			cs.buf = nil
			r.held += held
		} else {
			cs.release(held)
		}
		if cap(cs.buf) > retainedBuffer {
			cs.buf = nil
		}
		if cap(cs.out) > retainedBuffer {
			cs.out = nil
		}
		if r.frame != nil || r.wait != nil {
			cs.queued.Add(1)
			replies <- r
		}
		if !keep {
			return
		}
	}
}

// writeResponse writes one response frame. A client that stops reading
// is given connections.max.idle.ms for the write (a socket deadline, so
// wall-clock time) before the connection is closed, so that it cannot
// hold its goroutines and buffers forever.
func (b *Broker) writeResponse(c net.Conn, frame []byte) (int, error) {
	c.SetWriteDeadline(time.Now().Add(b.cfg.ConnectionsMaxIdle))
	return c.Write(frame)
}

// reapConns closes connections idle for longer than connections.max.idle.ms
// (with no response pending) and connections that started a request and
// did not send all of it within kwal.socket.request.read.timeout.ms (a
// slow or stalled client holds a goroutine and a buffer).
func (b *Broker) reapConns(now time.Time) {
	type victim struct {
		cs     *connState
		idle   bool
		reason string
		for_   time.Duration
	}
	var victims []victim
	b.mu.Lock()
	for _, cs := range b.mu.conns {
		if cs.closed.Load() {
			continue // closed already, its goroutine not yet gone
		}
		phase, since := unpackPhase(cs.state.Load())
		age := now.Sub(since)
		switch phase {
		case phaseIdle:
			if age > b.cfg.ConnectionsMaxIdle && cs.queued.Load() == 0 {
				victims = append(victims, victim{cs, true, "idle for longer than connections.max.idle.ms", age})
			}
		case phaseReading:
			if age > b.cfg.RequestReadTimeout {
				victims = append(victims, victim{cs, false, "request not received whole within kwal.socket.request.read.timeout.ms", age})
			}
		}
	}
	b.mu.Unlock()
	for _, v := range victims {
		if v.idle {
			b.logger.Info("closing connection: "+v.reason, "remote", v.cs.remote, "client_id", v.cs.clientID, "for", v.for_)
			b.conns.reapedIdle.Add(1)
		} else {
			b.logger.Warn("closing connection: "+v.reason, "remote", v.cs.remote, "client_id", v.cs.clientID, "for", v.for_)
			b.conns.reapedSlow.Add(1)
		}
		v.cs.close()
	}
	if h := b.cfg.onReap; h != nil {
		h(now, len(victims))
	}
}

// reapInterval is how often the reaper looks: a quarter of the shorter
// timeout, between 1 ms and 1 s (a connection is closed at most that
// late).
func reapInterval(idle, read time.Duration) time.Duration {
	return min(max(min(idle, read)/4, time.Millisecond), time.Second)
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
			closeSplices(cs.splices)
			cs.splices = nil
			if cs.spliced != nil {
				cs.spliced.close()
				cs.spliced = nil
			}
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
		// Kafka closes the connection (SocketServer.parseRequestHeader
		// throws InvalidRequestException); a client that asked
		// ApiVersions first never gets here.
		b.logger.Warn("closing connection: api version not supported", "remote", cs.remote, "client_id", h.clientID, "key", kmsg.NameForKey(h.key), "version", h.version)
		return nil, false
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
	if sp := cs.splices; len(sp) > 0 {
		cs.splices = nil
		fr := r.(*kmsg.FetchResponse)
		if f, ok := encodeSpliced(h, fr, sp); ok {
			cs.spliced = f
			return f.frame, keep
		}
		b.logger.Warn("fetch response: record marker found outside its places; copying the records instead", "remote", cs.remote)
		if err := unsplice(fr, sp); err != nil {
			b.logger.Warn("closing connection: reading fetched records", "remote", cs.remote, "err", err)
			return nil, false
		}
	}
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
	// Topic administration.
	case *kmsg.DeleteTopicsRequest:
		return b.handleDeleteTopics(r), true
	case *kmsg.DeleteRecordsRequest:
		return b.handleDeleteRecords(cs, r), true
	case *kmsg.CreatePartitionsRequest:
		return b.handleCreatePartitions(r), true
	case *kmsg.AlterConfigsRequest:
		return b.handleAlterConfigs(r), true
	case *kmsg.IncrementalAlterConfigsRequest:
		return b.handleIncrementalAlterConfigs(r), true
	case *kmsg.DescribeClusterRequest:
		return b.handleDescribeCluster(r), true
	}
	if r := b.dispatchGroups(cs, req); r != nil {
		return r, true
	}
	// supported() and this switch list the same keys.
	panic(fmt.Sprintf("broker: no handler for supported key %d", req.Key()))
}

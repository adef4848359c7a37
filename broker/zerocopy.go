package broker

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Zero-copy fetch (Kafka's FileRecords.writeTo): on a plaintext TCP
// connection a fetch takes each partition's record bytes as a
// kafkalog.Section (a region of a segment file with its own descriptor)
// instead of reading them. The response is encoded with a marker in place
// of each section's bytes; the marker is cut out, the real length prefix
// written, and the writer sends the framing with write(2) and each
// section with sendfile(2) at an explicit offset, so no record byte
// passes through user space. The marker is 16 random bytes drawn at
// start; if it occurs in the encoding other than in the sections' places
// (a topic name or copied records that happen to contain it), the
// response falls back to reading the sections, so the bytes on the wire
// never depend on the marker.

// recordsMarker stands for a section's bytes in an encoded response.
var recordsMarker = func() []byte {
	b := make([]byte, 16)
	rand.Read(b)
	return b
}()

// splice is a fetch-response partition whose record bytes are a section.
type splice struct {
	ti, pi int // index in FetchResponse.Topics and its Partitions
	sec    *kafkalog.Section
}

func closeSplices(sp []splice) {
	for _, s := range sp {
		s.sec.Close()
	}
}

// splicedFrame is an encoded response frame without its sections' bytes:
// secs[i] goes at frame[at[i]].
type splicedFrame struct {
	frame []byte
	at    []int
	secs  []*kafkalog.Section
}

func (f *splicedFrame) close() {
	for _, s := range f.secs {
		s.Close()
	}
}

// encodeSpliced encodes r, whose spliced partitions carry recordsMarker,
// into a splicedFrame. false: the marker occurs elsewhere too; the caller
// then reads the sections and encodes normally.
func encodeSpliced(h requestHeader, r *kmsg.FetchResponse, sp []splice) (*splicedFrame, bool) {
	enc := encodeResponse(nil, h, r)
	if bytes.Count(enc, recordsMarker) != len(sp) {
		return nil, false
	}
	flexible := r.IsFlexible()
	pat := appendBytesLen(nil, len(recordsMarker), flexible)
	pat = append(pat, recordsMarker...)
	f := &splicedFrame{frame: make([]byte, 0, len(enc)+5*len(sp))}
	pos, total := 0, int64(0)
	for _, s := range sp {
		j := bytes.Index(enc[pos:], pat)
		if j < 0 {
			return nil, false
		}
		j += pos
		f.frame = append(f.frame, enc[pos:j]...)
		f.frame = appendBytesLen(f.frame, int(s.sec.Len), flexible)
		f.at = append(f.at, len(f.frame))
		f.secs = append(f.secs, s.sec)
		total += s.sec.Len
		pos = j + len(pat)
	}
	f.frame = append(f.frame, enc[pos:]...)
	binary.BigEndian.PutUint32(f.frame, uint32(int64(len(f.frame)-4)+total))
	return f, true
}

// appendBytesLen is the length prefix of a (nullable) bytes field.
func appendBytesLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return kbin.AppendUvarint(dst, uint32(n)+1)
	}
	return kbin.AppendInt32(dst, int32(n))
}

// unsplice puts the sections' bytes into r (the copying path) and
// releases them.
func unsplice(r *kmsg.FetchResponse, sp []splice) error {
	defer closeSplices(sp)
	for _, s := range sp {
		b, err := s.sec.Bytes()
		if err != nil {
			return err
		}
		r.Topics[s.ti].Partitions[s.pi].RecordBatches = b
	}
	return nil
}

// writeSpliced writes f to c, the sections with sendfile, and releases
// them. It returns the bytes sent with sendfile.
func (b *Broker) writeSpliced(c net.Conn, f *splicedFrame) (int64, error) {
	defer f.close()
	tc, ok := tcpConnOf(c)
	if !ok {
		return 0, errors.New("broker: spliced response on a connection that is not TCP")
	}
	c.SetWriteDeadline(time.Now().Add(b.cfg.ConnectionsMaxIdle))
	var sent int64
	prev := 0
	for i, at := range f.at {
		if _, err := c.Write(f.frame[prev:at]); err != nil {
			return sent, err
		}
		n, err := sendSection(tc, f.secs[i])
		sent += n
		b.events.zeroCopyBytes.Add(n)
		if err != nil {
			return sent, err
		}
		b.events.zeroCopySections.Add(1)
		prev = at
	}
	_, err := c.Write(f.frame[prev:])
	return sent, err
}

// sendSection sends sec to c with sendfile(2) at an explicit offset (the
// section's descriptor's file position is shared with its duplicates and
// is never used). A section that reads short (its segment was truncated
// in flight) is an error: the frame cannot be completed, and the caller
// closes the connection.
func sendSection(c *net.TCPConn, sec *kafkalog.Section) (int64, error) {
	wc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	fc, err := sec.File().SyscallConn()
	if err != nil {
		return 0, err
	}
	off, remain := sec.Pos, sec.Len
	var serr error
	cerr := fc.Control(func(in uintptr) {
		werr := wc.Write(func(out uintptr) bool {
			for remain > 0 {
				n, err := syscall.Sendfile(int(out), int(in), &off, int(min(remain, 1<<30)))
				if n > 0 {
					remain -= int64(n)
				}
				switch {
				case errors.Is(err, syscall.EAGAIN):
					return false // wait until the socket is writable
				case errors.Is(err, syscall.EINTR):
				case err != nil:
					serr = err
					return true
				case n == 0:
					serr = kafkalog.ErrSectionShort
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr == nil {
		serr = cerr
	}
	return sec.Len - remain, serr
}

// tcpConnOf finds the TCP connection under c (the connection limiter wraps
// accepted connections); ok is false for TLS and other connections, which
// keep the copying path.
func tcpConnOf(c net.Conn) (*net.TCPConn, bool) {
	switch c := c.(type) {
	case *net.TCPConn:
		return c, true
	case *limitConn:
		return tcpConnOf(c.Conn)
	}
	return nil, false
}

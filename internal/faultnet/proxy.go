package faultnet

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Mode is what a Proxy does with its connections.
type Mode int

const (
	// Open forwards bytes both ways.
	Open Mode = iota
	// Stall forwards nothing, on open connections and on new ones (which
	// are accepted, as the kernel accepts them, and connected to the target
	// only after a heal), as a partition that drops packets.
	Stall
	// Reset closes every connection and closes new ones at once, as a
	// peer that refuses connections.
	Reset
)

func (m Mode) String() string {
	switch m {
	case Open:
		return "open"
	case Stall:
		return "stall"
	case Reset:
		return "reset"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ErrClosed is returned by Set on a closed proxy.
var ErrClosed = errors.New("faultnet: proxy closed")

// Proxy is a TCP proxy from a loopback listener to one target address.
type Proxy struct {
	ln     net.Listener
	target string
	log    *slog.Logger
	mu     struct {
		sync.Mutex
		mode   Mode
		healed chan struct{} // closed when a Stall ends (or the proxy closes)
		links  map[*link]struct{}
		closed bool
	}
	wg sync.WaitGroup
}

type link struct {
	client, server net.Conn
	once           sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		l.client.Close()
		if l.server != nil {
			l.server.Close()
		}
	})
}

// Listen starts a proxy listening on addr (host:port, port 0 for any)
// that forwards to target.
func Listen(addr, target string, log *slog.Logger) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultnet: listen %s for %s: %w", addr, target, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{ln: ln, target: target, log: log}
	p.mu.links = map[*link]struct{}{}
	p.mu.healed = make(chan struct{})
	close(p.mu.healed)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Mode returns the mode in force.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.mode
}

// Set switches the proxy to mode m. Reset closes every open connection.
func (p *Proxy) Set(m Mode) error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	old := p.mu.mode
	p.mu.mode = m
	if m == Stall && old != Stall {
		p.mu.healed = make(chan struct{})
	}
	if m != Stall && old == Stall {
		close(p.mu.healed)
	}
	var doomed []*link
	if m == Reset {
		for l := range p.mu.links {
			doomed = append(doomed, l)
		}
	}
	p.mu.Unlock()
	for _, l := range doomed {
		l.close()
	}
	if old != m {
		p.log.Info("faultnet: proxy mode", "addr", p.Addr(), "target", p.target, "from", old.String(), "to", m.String())
	}
	return nil
}

// waitOpen blocks while the proxy stalls; it returns false if the
// connection must end (Reset, or the proxy closed).
func (p *Proxy) waitOpen() bool {
	for {
		p.mu.Lock()
		mode, healed, closed := p.mu.mode, p.mu.healed, p.mu.closed
		p.mu.Unlock()
		switch {
		case closed || mode == Reset:
			return false
		case mode == Open:
			return true
		}
		<-healed
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		l := &link{client: c}
		p.mu.Lock()
		if p.mu.closed || p.mu.mode == Reset {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(l)
	}
}

func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.mu.links, l)
		p.mu.Unlock()
	}()
	if !p.waitOpen() {
		return
	}
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return // the client sees its connection closed, as a refused one
	}
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		s.Close()
		return
	}
	l.server = s
	p.mu.Unlock()
	done := make(chan bool, 2)
	go func() { done <- p.pipe(s, l.client) }()
	go func() { done <- p.pipe(l.client, s) }()
	if clean := <-done; !clean {
		l.close() // an error ends both directions
	}
	<-done
}

// pipe copies from src to dst, holding every chunk while the proxy
// stalls. At src's end it half-closes dst and reports true, so the other
// direction runs on until it ends too.
func (p *Proxy) pipe(dst, src net.Conn) (clean bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitOpen() {
				return false
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				tc.CloseWrite()
				return true
			}
			return false
		}
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil
	}
	p.mu.closed = true
	if p.mu.mode == Stall {
		close(p.mu.healed)
	}
	var doomed []*link
	for l := range p.mu.links {
		doomed = append(doomed, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range doomed {
		l.close()
	}
	p.wg.Wait()
	return err
}

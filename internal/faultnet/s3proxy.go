package faultnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// StoreMode is the object-store fault an S3Proxy injects.
type StoreMode int32

const (
	// StoreOK forwards every request.
	StoreOK StoreMode = iota
	// StoreSlow delays every request by S3ProxyConfig.Delay.
	StoreSlow
	// StoreSlowDown answers every request 503 SlowDown.
	StoreSlowDown
	// StoreAmbiguousPut forwards every PUT (so the object is stored) but
	// answers a fraction S3ProxyConfig.AmbiguousProb of them 500
	// InternalError.
	StoreAmbiguousPut
)

func (m StoreMode) String() string {
	return [...]string{"ok", "slow", "slowdown", "ambiguous-put"}[m]
}

// S3ProxyConfig configures NewS3Proxy.
type S3ProxyConfig struct {
	// Listen is the address to listen on; default 127.0.0.1:0.
	Listen string
	// Target is the S3 server's base URL (http://127.0.0.1:port). Required.
	Target string
	// Delay is StoreSlow's latency; default 150 ms.
	Delay time.Duration
	// AmbiguousProb is the fraction of PUTs StoreAmbiguousPut answers with
	// an error; default 0.5.
	AmbiguousProb float64
	// Seed seeds the ambiguous-PUT draws.
	Seed   uint64
	Logger *slog.Logger
}

// S3ProxyStats counts what an S3Proxy injected.
type S3ProxyStats struct {
	Requests, Delayed, SlowDowns, AmbiguousPuts, Refused int64
}

// S3Proxy is an HTTP reverse proxy to an S3 server with switchable faults.
type S3Proxy struct {
	cfg   S3ProxyConfig
	ln    net.Listener
	srv   *http.Server
	rp    *httputil.ReverseProxy
	mode  atomic.Int32
	stats struct {
		requests, delayed, slowDowns, ambiguous, refused atomic.Int64
	}
	mu struct {
		sync.Mutex
		rng *rand.Rand
	}
	done chan struct{}
}

type ambiguousKey struct{}

var errAmbiguous = errors.New("faultnet: ambiguous PUT injected")

// NewS3Proxy starts an S3Proxy in mode StoreOK.
func NewS3Proxy(cfg S3ProxyConfig) (*S3Proxy, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Delay <= 0 {
		cfg.Delay = 150 * time.Millisecond
	}
	if cfg.AmbiguousProb <= 0 {
		cfg.AmbiguousProb = 0.5
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	target, err := url.Parse(cfg.Target)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("faultnet: S3 proxy target %q: not a base URL (%v)", cfg.Target, err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("faultnet: S3 proxy listen %s: %w", cfg.Listen, err)
	}
	p := &S3Proxy{cfg: cfg, ln: ln, done: make(chan struct{})}
	p.mu.rng = rand.New(rand.NewPCG(cfg.Seed, 0x5333))
	// The Host header is passed through unchanged (the default of
	// NewSingleHostReverseProxy): the client signed it.
	p.rp = httputil.NewSingleHostReverseProxy(target)
	p.rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	p.rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Context().Value(ambiguousKey{}) != nil && resp.StatusCode/100 == 2 {
			p.stats.ambiguous.Add(1)
			return errAmbiguous
		}
		return nil
	}
	p.rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if errors.Is(err, errAmbiguous) {
			s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
			return
		}
		// The backend refused or broke the connection: so does the proxy,
		// as a client talking to the stopped server would see.
		p.stats.refused.Add(1)
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, herr := hj.Hijack(); herr == nil {
				c.Close()
				return
			}
		}
		s3Error(w, http.StatusBadGateway, "BadGateway", err.Error())
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(p.done)
		p.srv.Serve(ln)
	}()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *S3Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's base URL, to give an S3 client as its endpoint.
func (p *S3Proxy) URL() string { return "http://" + p.Addr() }

// Set switches the fault mode.
func (p *S3Proxy) Set(m StoreMode) {
	if old := StoreMode(p.mode.Swap(int32(m))); old != m {
		p.cfg.Logger.Info("faultnet: S3 proxy mode", "addr", p.Addr(), "from", old.String(), "to", m.String())
	}
}

// Stats returns what was injected so far.
func (p *S3Proxy) Stats() S3ProxyStats {
	return S3ProxyStats{Requests: p.stats.requests.Load(), Delayed: p.stats.delayed.Load(),
		SlowDowns: p.stats.slowDowns.Load(), AmbiguousPuts: p.stats.ambiguous.Load(), Refused: p.stats.refused.Load()}
}

// Injected sums the faults injected (refusals of a stopped backend are
// the backend's, not counted).
func (p *S3Proxy) Injected() int64 {
	s := p.Stats()
	return s.Delayed + s.SlowDowns + s.AmbiguousPuts
}

func (p *S3Proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.stats.requests.Add(1)
	switch StoreMode(p.mode.Load()) {
	case StoreSlow:
		p.stats.delayed.Add(1)
		t := time.NewTimer(p.cfg.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	case StoreSlowDown:
		p.stats.slowDowns.Add(1)
		s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
		return
	case StoreAmbiguousPut:
		if r.Method == http.MethodPut {
			p.mu.Lock()
			hit := p.mu.rng.Float64() < p.cfg.AmbiguousProb
			p.mu.Unlock()
			if hit {
				r = r.WithContext(context.WithValue(r.Context(), ambiguousKey{}, true))
			}
		}
	}
	p.rp.ServeHTTP(w, r)
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
}

// Close stops the proxy.
func (p *S3Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if err != nil {
		err = p.srv.Close()
	}
	<-p.done
	p.rp.Transport.(*http.Transport).CloseIdleConnections()
	return err
}

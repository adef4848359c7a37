package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// SecurityProtocol is a listener's security protocol, as Kafka names it
// in listener.security.protocol.map.
type SecurityProtocol string

// The four security protocols Kafka offers.
const (
	ProtocolPlaintext     SecurityProtocol = "PLAINTEXT"
	ProtocolSSL           SecurityProtocol = "SSL"
	ProtocolSASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	ProtocolSASLSSL       SecurityProtocol = "SASL_SSL"
)

// UsesTLS: SSL and SASL_SSL.
func (p SecurityProtocol) UsesTLS() bool { return p == ProtocolSSL || p == ProtocolSASLSSL }

// UsesSASL: SASL_PLAINTEXT and SASL_SSL.
func (p SecurityProtocol) UsesSASL() bool {
	return p == ProtocolSASLPlaintext || p == ProtocolSASLSSL
}

func parseSecurityProtocol(s string) (SecurityProtocol, error) {
	p := SecurityProtocol(strings.ToUpper(strings.TrimSpace(s)))
	switch p {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		return p, nil
	}
	return "", fmt.Errorf("unknown security protocol %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", s)
}

// ListenerConfig is one entry of listeners.
type ListenerConfig struct {
	// Name is the listener name (INTERNAL, EXTERNAL, PLAINTEXT, ...);
	// clients see, in Metadata, every broker's address on the listener
	// they connected to.
	Name string
	// Addr is the host:port to bind ("127.0.0.1:0" picks a port).
	Addr string
	// Advertised is the host:port registered for this listener; empty
	// means the bound address. A port of 0 means the bound port.
	Advertised string
	// Protocol is the listener's security protocol.
	Protocol SecurityProtocol
	// TLS is the server side of SSL and SASL_SSL listeners (see
	// TLSSettings.ServerConfig). Required for them.
	TLS *tls.Config
	// SASLMechanisms are the mechanisms a SASL listener offers (PLAIN,
	// SCRAM-SHA-256, SCRAM-SHA-512); default SCRAM-SHA-256 and
	// SCRAM-SHA-512.
	SASLMechanisms []string
}

// Endpoint is one listener of a broker as clients reach it.
type Endpoint struct {
	Listener string
	Host     string
	Port     int32
}

// Endpoint returns the broker's address on listener. A broker known only
// by its Host and Port (a static cluster list, before it registered) is
// reachable there on every listener.
func (b BrokerInfo) Endpoint(listener string) (Endpoint, bool) {
	if len(b.Endpoints) == 0 {
		return Endpoint{Listener: listener, Host: b.Host, Port: b.Port}, true
	}
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Addr is host:port.
func (e Endpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))) }

// defaultSASLMechanisms are offered when a SASL listener names none.
// PLAIN sends the password itself and is offered only when asked for.
var defaultSASLMechanisms = []string{mechScramSHA256, mechScramSHA512}

// validateListeners fills the listener defaults and checks names,
// protocols and the inter-broker listener; it runs in Config.Validate.
func (c *Config) validateListeners() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, key, fmt.Sprintf(format, args...))
	}
	if len(c.Listeners) == 0 || c.listenersFromListener {
		// Derived again on every Validate, so that a validated Config
		// copied with another Listener (a restart on the same port)
		// listens there.
		c.listenersFromListener = true
		adv := ""
		if c.AdvertisedHost != "" {
			adv = net.JoinHostPort(c.AdvertisedHost, "0")
		}
		c.Listeners = []ListenerConfig{{Name: string(ProtocolPlaintext), Addr: c.Listener, Advertised: adv, Protocol: ProtocolPlaintext}}
	}
	seen := map[string]bool{}
	ports := map[string]string{}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.Protocol == "" {
			l.Protocol = ProtocolPlaintext
		}
		if _, err := parseSecurityProtocol(string(l.Protocol)); err != nil {
			return bad("listener.security.protocol.map", "listener %s: %v", l.Name, err)
		}
		if l.Name == "" {
			l.Name = string(l.Protocol)
		}
		if seen[l.Name] {
			return bad("listeners", "listener name %s is used twice", l.Name)
		}
		seen[l.Name] = true
		_, port, err := net.SplitHostPort(l.Addr)
		if err != nil {
			return bad("listeners", "listener %s: %q: %v", l.Name, l.Addr, err)
		}
		if port != "0" {
			if other, dup := ports[port]; dup {
				return bad("listeners", "listeners %s and %s both bind port %s", other, l.Name, port)
			}
			ports[port] = l.Name
		}
		if l.Advertised != "" {
			if _, _, err := net.SplitHostPort(l.Advertised); err != nil {
				return bad("advertised.listeners", "listener %s: %q: %v", l.Name, l.Advertised, err)
			}
		}
		if l.Protocol.UsesTLS() && l.TLS == nil {
			return bad("listener.name."+strings.ToLower(l.Name)+".ssl.keystore.location", "listener %s is %s and needs a certificate and key (ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key)", l.Name, l.Protocol)
		}
		if l.Protocol.UsesSASL() {
			if len(l.SASLMechanisms) == 0 {
				l.SASLMechanisms = slices.Clone(defaultSASLMechanisms)
			}
			for _, m := range l.SASLMechanisms {
				if !slices.Contains(supportedSASLMechanisms, m) {
					return bad("sasl.enabled.mechanisms", "listener %s: mechanism %q is not supported (supported: %s)", l.Name, m, strings.Join(supportedSASLMechanisms, ", "))
				}
			}
			if c.SASLCredentials == nil {
				return bad("kwal.sasl.users.file", "listener %s is %s and needs a users file (make one with kwal users add)", l.Name, l.Protocol)
			}
		}
	}
	if c.InterBrokerListenerName == "" {
		switch {
		case len(c.Listeners) == 1:
			c.InterBrokerListenerName = c.Listeners[0].Name
		case seen[string(ProtocolPlaintext)]:
			c.InterBrokerListenerName = string(ProtocolPlaintext)
		default:
			return bad("inter.broker.listener.name", "required with several listeners and none named PLAINTEXT")
		}
	}
	ib, ok := c.listenerConfig(c.InterBrokerListenerName)
	if !ok {
		return bad("inter.broker.listener.name", "%q is not one of the listeners", c.InterBrokerListenerName)
	}
	if ib.Protocol.UsesTLS() && c.InterBrokerTLS == nil {
		return bad("inter.broker.listener.name", "listener %s is %s but no client TLS settings for broker-to-broker connections are given", ib.Name, ib.Protocol)
	}
	if ib.Protocol.UsesSASL() {
		s := c.InterBrokerSASL
		if s == nil || s.Username == "" || s.Password == "" {
			return bad("kwal.inter.broker.sasl.username", "listener %s is %s; set the inter-broker user and its password (%s)", ib.Name, ib.Protocol, EnvInterBrokerSASLPassword)
		}
		if !slices.Contains(ib.SASLMechanisms, s.Mechanism) {
			return bad("sasl.mechanism.inter.broker.protocol", "%q is not enabled on listener %s (%s)", s.Mechanism, ib.Name, strings.Join(ib.SASLMechanisms, ","))
		}
	}
	if c.Authorizer != nil {
		who := c.interBrokerPrincipal(ib)
		if !c.Authorizer.ClusterAllowed(who, OpClusterAction) {
			return bad("super.users", "brokers replicate as %s, which ACLs do not allow ClusterAction; add it to super.users", who)
		}
	}
	return nil
}

// interBrokerPrincipal is who brokers are on the inter-broker listener.
func (c *Config) interBrokerPrincipal(ib ListenerConfig) string {
	switch {
	case ib.Protocol.UsesSASL():
		return "User:" + c.InterBrokerSASL.Username
	case ib.Protocol.UsesTLS() && ib.TLS.ClientAuth != tls.NoClientCert && len(c.InterBrokerTLS.Certificates) > 0:
		if leaf, err := x509.ParseCertificate(c.InterBrokerTLS.Certificates[0].Certificate[0]); err == nil {
			return "User:" + leaf.Subject.String()
		}
	}
	return AnonymousPrincipal
}

func (c *Config) listenerConfig(name string) (ListenerConfig, bool) {
	for _, l := range c.Listeners {
		if l.Name == name {
			return l, true
		}
	}
	return ListenerConfig{}, false
}

// listener is one bound listener of a running broker.
type listener struct {
	cfg        ListenerConfig
	ln         net.Listener
	advertised Endpoint
	// protected: the inter-broker listener of a broker with several
	// (Kafka's protected listener), exempt from max.connections.
	protected bool
}

// listen binds every listener and works out its advertised endpoint.
func listen(cfgs []ListenerConfig) ([]*listener, error) {
	var out []*listener
	closeAll := func() {
		for _, l := range out {
			l.ln.Close()
		}
	}
	for _, lc := range cfgs {
		ln, err := net.Listen("tcp", lc.Addr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("broker: listener %s: listen %s: %w", lc.Name, lc.Addr, err)
		}
		out = append(out, &listener{cfg: lc, ln: ln})
		host, port, _ := net.SplitHostPort(ln.Addr().String())
		if lc.Advertised != "" {
			ah, ap, _ := net.SplitHostPort(lc.Advertised)
			if ah != "" {
				host = ah
			}
			if ap != "0" {
				port = ap
			}
		}
		pn, _ := strconv.Atoi(port)
		out[len(out)-1].advertised = Endpoint{Listener: lc.Name, Host: host, Port: int32(pn)}
	}
	return out, nil
}

// ParseListeners parses listeners (or advertised.listeners):
// "NAME://host:port,...". A bare host:port is a PLAINTEXT listener. An
// empty host binds every interface. It returns name → address in order.
func ParseListeners(v string) ([]ListenerConfig, error) {
	var out []ListenerConfig
	for _, item := range splitList(v) {
		name, addr, ok := strings.Cut(item, "://")
		if !ok {
			name, addr = string(ProtocolPlaintext), item
		}
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("%q: empty listener name", item)
		}
		for _, r := range name {
			if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return nil, fmt.Errorf("%q: illegal character %q in listener name", item, r)
			}
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", item, err)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("%q: bad port %q", item, port)
		}
		for _, l := range out {
			if l.Name == name {
				return nil, fmt.Errorf("listener name %s appears twice", name)
			}
		}
		out = append(out, ListenerConfig{Name: name, Addr: net.JoinHostPort(host, port)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listeners")
	}
	return out, nil
}

// ParseSecurityProtocolMap parses listener.security.protocol.map:
// "NAME:PROTOCOL,...".
func ParseSecurityProtocolMap(v string) (map[string]SecurityProtocol, error) {
	out := map[string]SecurityProtocol{}
	for _, item := range splitList(v) {
		name, proto, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want NAME:PROTOCOL", item)
		}
		p, err := parseSecurityProtocol(proto)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", item, err)
		}
		name = strings.TrimSpace(name)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("listener %s mapped twice", name)
		}
		out[name] = p
	}
	return out, nil
}

// multiListener accepts on every listener as one net.Listener, each
// through a quotaListener under one connQuota, so that one set of
// connection limits holds over all of them and one accept loop serves
// them. Its Addr is the inter-broker listener's.
type multiListener struct {
	lns   []*listener
	q     *connQuota
	addr  net.Addr
	conns chan acceptResult
	done  chan struct{}
	once  sync.Once
}

type acceptResult struct {
	c   net.Conn
	err error
}

func newMultiListener(lns []*listener, interBroker string, q *connQuota) *multiListener {
	m := &multiListener{lns: lns, q: q, addr: lns[0].ln.Addr(), conns: make(chan acceptResult), done: make(chan struct{})}
	for _, l := range lns {
		if l.cfg.Name == interBroker {
			m.addr = l.ln.Addr()
			l.protected = len(lns) > 1
		}
		go m.pump(&quotaListener{Listener: l.ln, q: q, protected: l.protected})
	}
	return m
}

// pump hands one listener's accepts (and errors: EMFILE backs off in the
// accept loop) to Accept until the listener closes.
func (m *multiListener) pump(ln net.Listener) {
	for {
		c, err := ln.Accept()
		select {
		case m.conns <- acceptResult{c, err}:
		case <-m.done:
			if c != nil {
				c.Close()
			}
			return
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case r := <-m.conns:
		return r.c, r.err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *multiListener) Close() error {
	var errs []error
	m.once.Do(func() {
		close(m.done)
		m.q.close()
		for _, l := range m.lns {
			errs = append(errs, l.ln.Close())
		}
	})
	return errors.Join(errs...)
}

func (m *multiListener) Addr() net.Addr { return m.addr }

// listenerOf is the listener c came in on, found by its local port (each
// listener binds its own).
func (b *Broker) listenerOf(c net.Conn) *listener {
	_, port, _ := net.SplitHostPort(c.LocalAddr().String())
	for _, l := range b.listeners {
		if _, p, _ := net.SplitHostPort(l.ln.Addr().String()); p == port {
			return l
		}
	}
	return nil
}

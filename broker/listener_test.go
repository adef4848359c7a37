package broker

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
)

// Every contradiction among the listener settings is refused by
// Validate, naming the key to fix.
func TestValidateListeners(t *testing.T) {
	tlsCfg := &tls.Config{}
	creds := mapCreds{}
	two := func(a, b SecurityProtocol) []ListenerConfig {
		return []ListenerConfig{
			{Name: "A", Addr: "127.0.0.1:0", Protocol: a, TLS: tlsCfg},
			{Name: "B", Addr: "127.0.0.1:0", Protocol: b, TLS: tlsCfg},
		}
	}
	sasl := &SASLClientConfig{Mechanism: mechScramSHA512, Username: "u", Password: "p"}
	cases := []struct {
		name    string
		mod     func(c *Config)
		wantErr string
	}{
		{"one listener is the inter-broker one", func(c *Config) { c.Listeners = two(ProtocolPlaintext, ProtocolPlaintext)[:1] }, ""},
		{"two listeners, no inter-broker name", func(c *Config) { c.Listeners = two(ProtocolPlaintext, ProtocolSSL) }, "inter.broker.listener.name"},
		{"unknown inter-broker name", func(c *Config) {
			c.Listeners, c.InterBrokerListenerName = two(ProtocolPlaintext, ProtocolPlaintext), "C"
		}, "inter.broker.listener.name"},
		{"same name twice", func(c *Config) {
			c.Listeners = two(ProtocolPlaintext, ProtocolPlaintext)
			c.Listeners[1].Name = "A"
		}, "used twice"},
		{"same port twice", func(c *Config) {
			c.Listeners, c.InterBrokerListenerName = two(ProtocolPlaintext, ProtocolPlaintext), "A"
			c.Listeners[0].Addr, c.Listeners[1].Addr = "127.0.0.1:9999", "0.0.0.0:9999"
		}, "both bind port 9999"},
		{"ssl without a certificate", func(c *Config) {
			c.Listeners = two(ProtocolSSL, ProtocolSSL)[:1]
			c.Listeners[0].TLS = nil
			c.InterBrokerTLS = tlsCfg
		}, "ssl.keystore.location"},
		{"ssl inter-broker without client TLS", func(c *Config) { c.Listeners = two(ProtocolSSL, ProtocolSSL)[:1] }, "client TLS"},
		{"sasl without users", func(c *Config) {
			c.Listeners, c.InterBrokerSASL = two(ProtocolSASLPlaintext, ProtocolSASLPlaintext)[:1], sasl
		}, "kwal.sasl.users.file"},
		{"sasl inter-broker without password", func(c *Config) {
			c.Listeners, c.SASLCredentials = two(ProtocolSASLPlaintext, ProtocolSASLPlaintext)[:1], creds
			c.InterBrokerSASL = &SASLClientConfig{Mechanism: mechScramSHA512, Username: "u"}
		}, EnvInterBrokerSASLPassword},
		{"inter-broker mechanism not enabled", func(c *Config) {
			c.Listeners, c.SASLCredentials = two(ProtocolSASLPlaintext, ProtocolSASLPlaintext)[:1], creds
			c.Listeners[0].SASLMechanisms = []string{mechPlain}
			c.InterBrokerSASL = sasl
		}, "sasl.mechanism.inter.broker.protocol"},
		{"unknown mechanism", func(c *Config) {
			c.Listeners, c.SASLCredentials, c.InterBrokerSASL = two(ProtocolSASLPlaintext, ProtocolSASLPlaintext)[:1], creds, sasl
			c.Listeners[0].SASLMechanisms = []string{"GSSAPI"}
		}, "GSSAPI"},
		{"sasl on a non-inter-broker listener needs no client", func(c *Config) {
			c.Listeners, c.SASLCredentials, c.InterBrokerListenerName = two(ProtocolPlaintext, ProtocolSASLSSL), creds, "A"
		}, ""},
		{"bad protocol", func(c *Config) { c.Listeners = []ListenerConfig{{Name: "A", Addr: "127.0.0.1:0", Protocol: "TLS"}} }, "unknown security protocol"},
		{"bad advertised", func(c *Config) {
			c.Listeners = []ListenerConfig{{Name: "A", Addr: "127.0.0.1:0", Advertised: "nohost"}}
		}, "advertised.listeners"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{LogDir: "/tmp/x", Controller: NewMemController(nil, 0)}
			tc.mod(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want ErrConfig naming %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseListeners(t *testing.T) {
	ls, err := ParseListeners("INTERNAL://0.0.0.0:9092, EXTERNAL://:19092,localhost:1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 3 || ls[0].Name != "INTERNAL" || ls[0].Addr != "0.0.0.0:9092" || ls[1].Addr != ":19092" || ls[2].Name != "PLAINTEXT" {
		t.Fatalf("%+v", ls)
	}
	for _, bad := range []string{"", "A://h", "A://h:99999", "A B://h:1", "://h:1", "A://h:1,A://h:2"} {
		if _, err := ParseListeners(bad); err == nil {
			t.Errorf("ParseListeners(%q) accepted", bad)
		}
	}
	m, err := ParseSecurityProtocolMap("A:ssl, B:SASL_SSL")
	if err != nil || m["A"] != ProtocolSSL || m["B"] != ProtocolSASLSSL {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range []string{"A", "A:TLS", "A:SSL,A:PLAINTEXT"} {
		if _, err := ParseSecurityProtocolMap(bad); err == nil {
			t.Errorf("ParseSecurityProtocolMap(%q) accepted", bad)
		}
	}
}

// A validated Config copied with another Listener listens there (the
// single PLAINTEXT listener is derived anew), while explicit Listeners
// stay as given.
func TestListenerRederived(t *testing.T) {
	c := Config{LogDir: "/tmp/x", Controller: NewMemController(nil, 0), Listener: "127.0.0.1:0"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Listener = "127.0.0.1:9999"
	if err := c.Validate(); err != nil || len(c.Listeners) != 1 || c.Listeners[0].Addr != "127.0.0.1:9999" {
		t.Fatalf("%v %+v", err, c.Listeners)
	}
	e := Config{LogDir: "/tmp/x", Controller: NewMemController(nil, 0), Listeners: []ListenerConfig{{Name: "A", Addr: "127.0.0.1:1"}}}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	e.Listener = "127.0.0.1:2"
	if err := e.Validate(); err != nil || e.Listeners[0].Addr != "127.0.0.1:1" {
		t.Fatalf("%v %+v", err, e.Listeners)
	}
}

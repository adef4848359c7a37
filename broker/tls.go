package broker

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// TLSSettings are the ssl.* keys of a listener, or of a client (the
// inter-broker client uses its listener's; the metadata client uses the
// remote.wal.metadata.ssl.* keys). Only PEM is read, as Kafka allows it
// since KIP-651: a keystore is a certificate chain and a private key,
// either in one file (ssl.keystore.location) or given inline
// (ssl.keystore.certificate.chain, ssl.keystore.key); a truststore is one
// or more CA certificates (ssl.truststore.location or
// ssl.truststore.certificates). Encrypted private keys are refused.
type TLSSettings struct {
	KeystoreType             string // ssl.keystore.type: PEM (default)
	KeystoreLocation         string // ssl.keystore.location
	KeystoreCertificateChain string // ssl.keystore.certificate.chain
	KeystoreKey              string // ssl.keystore.key
	KeyPassword              string // ssl.key.password: refused when set
	TruststoreType           string // ssl.truststore.type: PEM (default)
	TruststoreLocation       string // ssl.truststore.location
	TruststoreCertificates   string // ssl.truststore.certificates
	// ClientAuth: ssl.client.auth, none (default), requested or required.
	ClientAuth string
	// NoEndpointIdentification: ssl.endpoint.identification.algorithm set
	// empty. By default (https, as Kafka) a client checks the server's
	// name against its certificate; with this set only the chain.
	NoEndpointIdentification bool
}

// fields maps each ssl.* key (but endpoint identification, see set) to its field.
func (s *TLSSettings) fields() map[string]*string {
	return map[string]*string{
		"ssl.keystore.type":              &s.KeystoreType,
		"ssl.keystore.location":          &s.KeystoreLocation,
		"ssl.keystore.certificate.chain": &s.KeystoreCertificateChain,
		"ssl.keystore.key":               &s.KeystoreKey,
		"ssl.key.password":               &s.KeyPassword,
		"ssl.truststore.type":            &s.TruststoreType,
		"ssl.truststore.location":        &s.TruststoreLocation,
		"ssl.truststore.certificates":    &s.TruststoreCertificates,
		"ssl.client.auth":                &s.ClientAuth,
	}
}

// set applies one ssl.* key; false for a key that is not one.
func (s *TLSSettings) set(key, v string) (bool, error) {
	if key == "ssl.endpoint.identification.algorithm" {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "":
			s.NoEndpointIdentification = true
		case "https":
			s.NoEndpointIdentification = false
		default:
			return true, fmt.Errorf("want https or empty")
		}
		return true, nil
	}
	f, ok := s.fields()[key]
	if ok {
		*f = v
	}
	return ok, nil
}

// tlsKeyNames lists the ssl.* keys TLSSettings reads.
func tlsKeyNames() []string {
	var s TLSSettings
	out := []string{"ssl.endpoint.identification.algorithm"}
	for k := range s.fields() {
		out = append(out, k)
	}
	return out
}

func (s TLSSettings) check() error {
	for key, v := range map[string]string{"ssl.keystore.type": s.KeystoreType, "ssl.truststore.type": s.TruststoreType} {
		if v != "" && !strings.EqualFold(v, "PEM") {
			return fmt.Errorf("%s=%s: only PEM is supported (convert with openssl pkcs12 -nodes, or keytool -importkeystore then openssl)", key, v)
		}
	}
	if s.KeyPassword != "" {
		return errors.New("ssl.key.password: encrypted private keys are not supported; give an unencrypted PKCS#8, PKCS#1 or EC key and protect the file")
	}
	if s.KeystoreLocation != "" && (s.KeystoreCertificateChain != "" || s.KeystoreKey != "") {
		return errors.New("ssl.keystore.location and ssl.keystore.certificate.chain/ssl.keystore.key are exclusive")
	}
	if (s.KeystoreCertificateChain == "") != (s.KeystoreKey == "") {
		return errors.New("ssl.keystore.certificate.chain and ssl.keystore.key go together")
	}
	if s.TruststoreLocation != "" && s.TruststoreCertificates != "" {
		return errors.New("ssl.truststore.location and ssl.truststore.certificates are exclusive")
	}
	switch strings.ToLower(s.ClientAuth) {
	case "", "none", "requested", "required":
	default:
		return fmt.Errorf("ssl.client.auth=%s: want none, requested or required", s.ClientAuth)
	}
	return nil
}

// certificate loads the keystore; ok is false when none is configured.
func (s TLSSettings) certificate() (tls.Certificate, bool, error) {
	chain, key := []byte(s.KeystoreCertificateChain), []byte(s.KeystoreKey)
	if s.KeystoreLocation != "" {
		b, err := os.ReadFile(s.KeystoreLocation)
		if err != nil {
			return tls.Certificate{}, false, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		chain, key = b, b // X509KeyPair picks the blocks it needs
	}
	if len(chain) == 0 {
		return tls.Certificate{}, false, nil
	}
	cert, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return tls.Certificate{}, false, fmt.Errorf("ssl keystore: %w", err)
	}
	return cert, true, nil
}

// pool loads the truststore; nil when none is configured.
func (s TLSSettings) pool() (*x509.CertPool, error) {
	data := []byte(s.TruststoreCertificates)
	if s.TruststoreLocation != "" {
		b, err := os.ReadFile(s.TruststoreLocation)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		data = b
	}
	if len(data) == 0 {
		return nil, nil
	}
	pool := x509.NewCertPool()
	n := 0
	for len(data) > 0 {
		var blk *pem.Block
		blk, data = pem.Decode(data)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("ssl truststore: %w", err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("ssl truststore: no PEM CERTIFICATE block")
	}
	return pool, nil
}

// ServerConfig is the tls.Config of a listener: its certificate, and with
// ssl.client.auth requested or required, the CAs client certificates are
// checked against (the truststore; required without one is an error).
func (s TLSSettings) ServerConfig() (*tls.Config, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	cert, ok, err := s.certificate()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("no keystore: set ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key")
	}
	pool, err := s.pool()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientCAs: pool}
	switch strings.ToLower(s.ClientAuth) {
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if cfg.ClientAuth != tls.NoClientCert && pool == nil {
		return nil, fmt.Errorf("ssl.client.auth=%s needs a truststore to check client certificates", s.ClientAuth)
	}
	return cfg, nil
}

// ClientConfig is the tls.Config of a client: the truststore as root CAs
// (none: the system roots), the keystore as its client certificate if
// given. Without endpoint identification the chain is still verified,
// by hand, only the name is not.
func (s TLSSettings) ClientConfig() (*tls.Config, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	pool, err := s.pool()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	cert, ok, err := s.certificate()
	if err != nil {
		return nil, err
	}
	if ok {
		cfg.Certificates = []tls.Certificate{cert}
	}
	if s.NoEndpointIdentification {
		cfg.InsecureSkipVerify = true // the chain is checked in VerifyConnection
		cfg.VerifyConnection = verifyChainOnly(pool)
	}
	return cfg, nil
}

// verifyChainOnly checks the peer's chain against roots (nil: the
// system's), not its name.
func verifyChainOnly(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tls: no peer certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
		return err
	}
}

// tlsHandshakeTimeout bounds a listener's TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// secureConn does the TLS handshake on TLS listeners and sets up the SASL
// state on SASL listeners. ok false: the connection is to be closed (the
// reason is logged).
func (b *Broker) secureConn(cs *connState, raw net.Conn) (net.Conn, bool) {
	l := cs.listener
	if l == nil {
		return raw, true
	}
	if l.cfg.Protocol.UsesSASL() {
		cs.sasl = &saslState{}
	}
	if !l.cfg.Protocol.UsesTLS() {
		return raw, true
	}
	tc := tls.Server(raw, l.cfg.TLS)
	if err := tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout)); err != nil {
		return nil, false
	}
	if err := tc.Handshake(); err != nil {
		b.logger.Warn("closing connection: TLS handshake failed", "remote", cs.remote, "listener", l.cfg.Name, "err", err)
		return nil, false
	}
	if err := tc.SetDeadline(time.Time{}); err != nil {
		return nil, false
	}
	if peers := tc.ConnectionState().PeerCertificates; len(peers) > 0 {
		// Kafka's default SSL principal: the certificate's subject.
		cs.tlsPrincipal = "User:" + peers[0].Subject.String()
		b.logger.Debug("TLS client certificate", "remote", cs.remote, "listener", l.cfg.Name, "principal", cs.tlsPrincipal)
	}
	return tc, true
}

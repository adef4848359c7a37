package broker

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The PEM forms Kafka allows load, inline or from files; the refusals
// name what to fix.
func TestTLSSettings(t *testing.T) {
	pki := newTestPKI(t, "kwal-settings-ca")
	pemFile := pki.issue(t, "settings")
	both, _ := os.ReadFile(pemFile)
	ca, _ := os.ReadFile(pki.caFile)
	certPEM, keyPEM := splitPEM(t, string(both))

	inline, err := TLSSettings{KeystoreCertificateChain: certPEM, KeystoreKey: keyPEM, TruststoreCertificates: string(ca), ClientAuth: "requested"}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if inline.ClientAuth != tls.VerifyClientCertIfGiven || len(inline.Certificates) != 1 || inline.ClientCAs == nil {
		t.Fatalf("inline server config: %+v", inline)
	}
	if cfg, err := (TLSSettings{KeystoreLocation: pemFile, ClientAuth: "REQUIRED", TruststoreLocation: pki.caFile}).ServerConfig(); err != nil || cfg.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("required: %v", err)
	}
	cl, err := TLSSettings{TruststoreLocation: pki.caFile, NoEndpointIdentification: true}.ClientConfig()
	if err != nil || !cl.InsecureSkipVerify || cl.VerifyConnection == nil || cl.RootCAs == nil {
		t.Fatalf("client without endpoint identification: %+v %v", cl, err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not pem"), 0o600)
	for _, tc := range []struct {
		s       TLSSettings
		server  bool
		wantErr string
	}{
		{TLSSettings{}, true, "no keystore"},
		{TLSSettings{KeystoreLocation: "/nonexistent"}, true, "ssl.keystore.location"},
		{TLSSettings{KeystoreLocation: garbage}, true, "ssl keystore"},
		{TLSSettings{KeystoreType: "PKCS12", KeystoreLocation: pemFile}, true, "only PEM"},
		{TLSSettings{TruststoreType: "JKS"}, false, "only PEM"},
		{TLSSettings{KeystoreLocation: pemFile, KeystoreKey: keyPEM}, true, "exclusive"},
		{TLSSettings{KeystoreCertificateChain: certPEM}, true, "go together"},
		{TLSSettings{TruststoreLocation: pki.caFile, TruststoreCertificates: string(ca)}, false, "exclusive"},
		{TLSSettings{TruststoreLocation: garbage}, false, "no PEM CERTIFICATE"},
		{TLSSettings{KeystoreLocation: pemFile, ClientAuth: "required"}, true, "needs a truststore"},
		{TLSSettings{KeystoreLocation: pemFile, ClientAuth: "maybe"}, true, "ssl.client.auth"},
		{TLSSettings{KeystoreLocation: pemFile, KeyPassword: "x"}, true, "ssl.key.password"},
	} {
		var err error
		if tc.server {
			_, err = tc.s.ServerConfig()
		} else {
			_, err = tc.s.ClientConfig()
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: err %v, want %q", tc.s, err, tc.wantErr)
		}
	}
	var s TLSSettings
	if _, err := s.set("ssl.endpoint.identification.algorithm", "ldap"); err == nil {
		t.Error("endpoint identification ldap accepted")
	}
	if ok, _ := s.set("ssl.endpoint.identification.algorithm", ""); !ok || !s.NoEndpointIdentification {
		t.Error("empty endpoint identification does not disable it")
	}
}

func splitPEM(t *testing.T, both string) (cert, key string) {
	t.Helper()
	i := strings.Index(both, "-----BEGIN PRIVATE KEY-----")
	if i < 0 {
		t.Fatal("no key block")
	}
	return both[:i], both[i:]
}

package broker

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type mapCreds map[userMech]ScramCredential

func (m mapCreds) ScramCredential(mech, user string) (ScramCredential, bool) {
	c, ok := m[userMech{user, mech}]
	return c, ok
}

// RFC 7677 §3: the SCRAM-SHA-256 example exchange, byte for byte.
func TestScramServerRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred, err := NewScramCredential(mechScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newScramServer(mechScramSHA256, mapCreds{{"user", mechScramSHA256}: cred}, []byte("k"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.newNonce = func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }
	out, done, err := s.step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatal(done, err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(out) != want {
		t.Fatalf("server-first %q, want %q", out, want)
	}
	out, done, err = s.step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatal(done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(out) != want {
		t.Fatalf("server-final %q, want %q", out, want)
	}
	if s.authenticatedAs != "user" {
		t.Fatalf("authenticated as %q", s.authenticatedAs)
	}
	// A replayed final message after the end is refused.
	if _, _, err := s.step([]byte("c=biws")); !errors.Is(err, ErrSASLAuthentication) {
		t.Fatalf("step after done: %v", err)
	}
}

// Each way of breaking the exchange is refused with ErrSASLAuthentication
// and never authenticates: a wrong proof, another nonce, another channel
// binding, an unknown user given the right proof for a known one's
// credential, channel binding, tokenauth, an authzid for someone else.
func TestScramServerRefuses(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred, _ := NewScramCredential(mechScramSHA256, "pencil", salt, 4096)
	creds := mapCreds{{"user", mechScramSHA256}: cred}
	const (
		first = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
		nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
		proof = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	)
	cases := []struct{ name, first, final string }{
		{"wrong proof", first, "c=biws,r=" + nonce + ",p=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))},
		{"short proof", first, "c=biws,r=" + nonce + ",p=AAAA"},
		{"other nonce", first, "c=biws,r=rOprNGfwEbeRWgbNEkqOx,p=" + proof},
		{"server nonce cut", first, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k,p=" + proof},
		{"other channel binding", first, "c=eSws,r=" + nonce + ",p=" + proof},
		{"no proof", first, "c=biws,r=" + nonce},
		{"unknown user", "n,,n=mallory,r=rOprNGfwEbeRWgbNEkqO", "c=biws,r=" + nonce + ",p=" + proof},
		{"channel binding", "p=tls-unique,,n=user,r=abc", ""},
		{"tokenauth", "n,,n=user,r=abc,tokenauth=true", ""},
		{"authzid of another", "n,a=admin,n=user,r=abc", ""},
		{"mandatory extension", "n,,m=x,n=user,r=abc", ""},
		{"bad escape", "n,,n=us=er,r=abc", ""},
		{"comma in nonce", "n,,n=user,r=", ""},
		{"empty", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newScramServer(mechScramSHA256, creds, []byte("k"), nil)
			s.newNonce = func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }
			_, done, err := s.step([]byte(tc.first))
			if err == nil {
				if done {
					t.Fatal("done after client-first")
				}
				_, _, err = s.step([]byte(tc.final))
			}
			if !errors.Is(err, ErrSASLAuthentication) {
				t.Fatalf("err %v, want ErrSASLAuthentication", err)
			}
			if s.authenticatedAs != "" {
				t.Fatalf("authenticated as %q", s.authenticatedAs)
			}
			if strings.Contains(err.Error(), "pencil") || strings.Contains(err.Error(), proof) {
				t.Fatalf("error leaks a credential: %v", err)
			}
		})
	}
}

// An unknown user gets a server-first message shaped like a known one's
// (salt, iterations), the same every time, so the exchange does not tell
// who exists.
func TestScramUnknownUserLooksKnown(t *testing.T) {
	creds := mapCreds{}
	first := func() string {
		s, _ := newScramServer(mechScramSHA512, creds, []byte("key"), nil)
		s.newNonce = func() (string, error) { return "n", nil }
		out, _, err := s.step([]byte("n,,n=ghost,r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	a, b := first(), first()
	if a != b || !strings.Contains(a, ",s=") || !strings.HasSuffix(a, ",i=4096") {
		t.Fatalf("server-first for an unknown user: %q then %q", a, b)
	}
}

func TestParsePlain(t *testing.T) {
	for _, tc := range []struct {
		in         string
		user, pass string
		ok         bool
	}{
		{"\x00alice\x00secret", "alice", "secret", true},
		{"alice\x00alice\x00secret", "alice", "secret", true},
		{"bob\x00alice\x00secret", "", "", false},
		{"\x00alice\x00", "", "", false},
		{"\x00\x00secret", "", "", false},
		{"alice\x00secret", "", "", false},
		{"\x00a\x00b\x00c", "", "", false},
	} {
		u, p, err := parsePlain([]byte(tc.in))
		if (err == nil) != tc.ok || u != tc.user || p != tc.pass {
			t.Errorf("parsePlain(%q) = %q, %q, %v", tc.in, u, p, err)
		}
	}
}

// kwal users add writes salted credentials only; they verify the right
// password and no other, for SCRAM and for PLAIN; adding again replaces.
func TestUserFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	if err := AddUser(path, "alice", "s3cret-pw", []string{mechScramSHA256, mechScramSHA512}, 4096); err != nil {
		t.Fatal(err)
	}
	if err := AddUser(path, "bob", "bobs-pw", []string{mechScramSHA512}, 8192); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte("s3cret-pw")) || bytes.Contains(raw, []byte("bobs-pw")) {
		t.Fatalf("users file holds a password:\n%s", raw)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("users file mode %v", fi.Mode())
	}
	f, err := LoadUserFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !checkPlain(f, "alice", "s3cret-pw") || checkPlain(f, "alice", "bobs-pw") || checkPlain(f, "carol", "x") || !checkPlain(f, "bob", "bobs-pw") {
		t.Fatal("PLAIN checks against the stored credentials are wrong")
	}
	c, ok := f.ScramCredential(mechScramSHA512, "bob")
	if !ok || c.Iterations != 8192 {
		t.Fatalf("bob: %+v %v", c, ok)
	}
	if _, ok := f.ScramCredential(mechScramSHA256, "bob"); ok {
		t.Fatal("bob has no SCRAM-SHA-256 credential")
	}
	if err := AddUser(path, "alice", "new-pw", []string{mechScramSHA256}, 4096); err != nil {
		t.Fatal(err)
	}
	f, err = LoadUserFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// SHA-512 (checked first by PLAIN) still holds the old password;
	// SHA-256 holds the new one.
	old, _ := f.ScramCredential(mechScramSHA256, "alice")
	fresh, _ := NewScramCredential(mechScramSHA256, "new-pw", old.Salt, old.Iterations)
	if !bytes.Equal(old.StoredKey, fresh.StoredKey) {
		t.Fatal("SCRAM-SHA-256 credential not replaced")
	}
	if len(f.Users()["alice"]) != 2 {
		t.Fatalf("users: %v", f.Users())
	}
	for _, bad := range []struct{ user, pass string }{{"", "x"}, {"a b", "x"}, {"#a", "x"}, {"a", ""}} {
		if err := AddUser(path, bad.user, bad.pass, []string{mechScramSHA256}, 4096); err == nil {
			t.Errorf("AddUser(%q, %q) accepted", bad.user, bad.pass)
		}
	}
	if err := AddUser(path, "a", "x", []string{mechScramSHA256}, 100); err == nil {
		t.Error("100 iterations accepted")
	}
	for _, bad := range []string{
		"alice SCRAM-SHA-1 salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096\n",
		"alice SCRAM-SHA-256 salt=AA==,stored_key=AA==,server_key=AA==,iterations=1\n",
		"alice SCRAM-SHA-256 salt=AA==,stored_key=AA==\n",
		"alice SCRAM-SHA-256\n",
	} {
		if _, err := ParseUserFile(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseUserFile(%q) accepted", bad)
		}
	}
}

// FuzzSCRAMExchange drives the server side of SCRAM with any two client
// messages: it must not panic, must finish by the second message, and can
// authenticate only with the proof the password gives (which a fuzzer
// does not find; the RFC test above shows the positive case).
func FuzzSCRAMExchange(f *testing.F) {
	f.Add([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), []byte("c=biws,r=rOprNGfwEbeRWgbNEkqOX,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte("y,a=user,n=user,r=a,ext=1"), []byte("c=eSxhPXVzZXIs,r=aX,p="))
	f.Add([]byte("n,,n=us=2Cer,r=a"), []byte(",p="))
	salt := []byte("salt")
	cred, _ := NewScramCredential(mechScramSHA256, "pencil", salt, 4096)
	creds := mapCreds{{"user", mechScramSHA256}: cred}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s, _ := newScramServer(mechScramSHA256, creds, []byte("k"), nil)
		s.newNonce = func() (string, error) { return "X", nil }
		_, done, err := s.step(first)
		if err != nil {
			if !errors.Is(err, ErrSASLAuthentication) || !done {
				t.Fatalf("first: done %v err %v", done, err)
			}
			return
		}
		_, done, err = s.step(final)
		if !done {
			t.Fatal("not done after client-final")
		}
		if err == nil && s.authenticatedAs != "user" {
			t.Fatalf("authenticated as %q", s.authenticatedAs)
		}
	})
}

// FuzzParsePlain: any PLAIN message parses or is refused, never panics,
// and a parsed one round-trips.
func FuzzParsePlain(f *testing.F) {
	f.Add([]byte("\x00alice\x00secret"))
	f.Add([]byte("a\x00a\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		u, p, err := parsePlain(msg)
		if err != nil {
			return
		}
		if u == "" || p == "" || !bytes.HasSuffix(msg, []byte("\x00"+u+"\x00"+p)) {
			t.Fatalf("parsePlain(%q) = %q, %q", msg, u, p)
		}
	})
}

// FuzzSASLConnection feeds up to three arbitrary frames to a fresh
// connection on a SASL listener whose only user's password the fuzzer
// cannot know: nothing panics, the connection never authenticates, no
// request other than ApiVersions, SaslHandshake and SaslAuthenticate is
// ever answered, and nothing is appended.
func FuzzSASLConnection(f *testing.F) {
	hs := func(v int16, mech string) []byte {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Mechanism = mech
		return frameOf(r, v, 1)
	}
	auth := func(v int16, msg string) []byte {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.SASLAuthBytes = []byte(msg)
		return frameOf(r, v, 2)
	}
	produce := seedFrames()[6]
	f.Add(hs(1, mechScramSHA256), auth(2, "n,,n=alice,r=abc"), auth(2, "c=biws,r=abcX,p=AAAA"))
	f.Add(hs(1, mechPlain), auth(0, "\x00alice\x00guess"), produce)
	f.Add(hs(0, mechPlain), []byte("\x00alice\x00guess"), produce)
	f.Add(produce, hs(1, mechScramSHA512), auth(1, "n,,n=alice,r=abc"))
	f.Add(auth(1, "x"), hs(1, "GSSAPI"), produce)
	var key [32]byte
	rand.Read(key[:])
	path := filepath.Join(f.TempDir(), "users")
	if err := AddUser(path, "alice", base64.StdEncoding.EncodeToString(key[:]), []string{mechScramSHA256, mechScramSHA512}, 4096); err != nil {
		f.Fatal(err)
	}
	users, err := LoadUserFile(path)
	if err != nil {
		f.Fatal(err)
	}
	c := startCluster(f, []string{"az1"}, func(cfg *Config) {
		cfg.Logger = quietLogger()
		cfg.DisableAutoCreateTopics = true
		cfg.SASLCredentials = users
		cfg.Listeners = []ListenerConfig{{Name: "S", Addr: "127.0.0.1:0", Protocol: ProtocolSASLPlaintext, SASLMechanisms: supportedSASLMechanisms}}
		cfg.InterBrokerSASL = &SASLClientConfig{Mechanism: mechPlain, Username: "alice", Password: "unused"}
	})
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		f.Fatal(err)
	}
	b := c.brokers[0]
	lg, _ := b.PartitionLog(TopicPartition{Topic: "t"})
	f.Fuzz(func(t *testing.T, f1, f2, f3 []byte) {
		cs := &connState{remote: "fuzz", noWait: true, listener: b.listeners[0], sasl: &saslState{}}
		for _, frame := range [][]byte{f1, f2, f3} {
			raw := cs.sasl.rawTokens
			key := int16(-1)
			if len(frame) >= 2 {
				key = int16(binary.BigEndian.Uint16(frame))
			}
			resp, keep := b.handleFrame(cs, frame)
			allowed := raw || key == apiKeyApiVersions || key == apiKeySASLHandshake || key == apiKeySASLAuthenticate
			if resp != nil && !allowed {
				t.Fatalf("key %d answered before authentication", key)
			}
			if cs.sasl.authenticated() {
				t.Fatal("authenticated without the password")
			}
			if !keep {
				break
			}
		}
		if lg.LogEndOffset() != 0 {
			t.Fatal("a record was appended before authentication")
		}
	})
}

// BenchmarkSASLServerWork is the server's work per login: SCRAM (two
// HMACs and a hash; the PBKDF2 is the client's) against PLAIN (one PBKDF2
// of 4096 iterations on the server), which bounds how fast unauthenticated
// clients can make a broker spend CPU.
func BenchmarkSASLServerWork(b *testing.B) {
	salt := []byte("0123456789abcdef")
	cred, _ := NewScramCredential(mechScramSHA512, "pw", salt, DefaultScramIterations)
	creds := mapCreds{{"u", mechScramSHA512}: cred}
	b.Run("mech=PLAIN", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			checkPlain(creds, "u", "wrong")
		}
	})
	b.Run("mech=SCRAM-SHA-512", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, _ := newScramServer(mechScramSHA512, creds, []byte("k"), nil)
			s.newNonce = func() (string, error) { return "n", nil }
			s.step([]byte("n,,n=u,r=abc"))
			s.step([]byte("c=biws,r=abcn,p=" + base64.StdEncoding.EncodeToString(make([]byte, 64))))
		}
	})
}

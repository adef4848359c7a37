package broker

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
)

// SASL mechanism names.
const (
	mechPlain       = "PLAIN"
	mechScramSHA256 = "SCRAM-SHA-256"
	mechScramSHA512 = "SCRAM-SHA-512"
)

var supportedSASLMechanisms = []string{mechPlain, mechScramSHA256, mechScramSHA512}

// Kafka's bounds on SCRAM iterations (ScramMechanism: 4096 minimum).
const (
	MinScramIterations     = 4096
	MaxScramIterations     = 16384
	DefaultScramIterations = 4096
)

// ErrSASLAuthentication is wrapped by every failed SASL exchange: a bad
// message, an unknown user, a wrong password. Its text never holds a
// credential.
var ErrSASLAuthentication = errors.New("broker: SASL authentication failed")

// ScramCredential is a user's salted SCRAM credential as Kafka stores it
// (RFC 5802): the password itself is not kept.
type ScramCredential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

func scramHash(mech string) (func() hash.Hash, int, bool) {
	switch mech {
	case mechScramSHA256:
		return sha256.New, sha256.Size, true
	case mechScramSHA512:
		return sha512.New, sha512.Size, true
	}
	return nil, 0, false
}

func hmacSum(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// NewScramCredential salts password for mech (SCRAM-SHA-256 or
// SCRAM-SHA-512) with salt and iterations.
func NewScramCredential(mech, password string, salt []byte, iterations int) (ScramCredential, error) {
	h, size, ok := scramHash(mech)
	if !ok {
		return ScramCredential{}, fmt.Errorf("broker: %q is not a SCRAM mechanism", mech)
	}
	if iterations < MinScramIterations || iterations > MaxScramIterations {
		return ScramCredential{}, fmt.Errorf("broker: SCRAM iterations %d outside [%d, %d]", iterations, MinScramIterations, MaxScramIterations)
	}
	if len(salt) == 0 {
		return ScramCredential{}, errors.New("broker: empty SCRAM salt")
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, size)
	if err != nil {
		return ScramCredential{}, err
	}
	clientKey := hmacSum(h, salted, "Client Key")
	sk := h()
	sk.Write(clientKey)
	return ScramCredential{
		Salt: bytes.Clone(salt), Iterations: iterations,
		StoredKey: sk.Sum(nil), ServerKey: hmacSum(h, salted, "Server Key"),
	}, nil
}

// String is Kafka's form of a credential
// (salt=…,stored_key=…,server_key=…,iterations=…, base64).
func (c ScramCredential) String() string {
	e := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("salt=%s,stored_key=%s,server_key=%s,iterations=%d", e(c.Salt), e(c.StoredKey), e(c.ServerKey), c.Iterations)
}

// ParseScramCredential parses String's form.
func ParseScramCredential(s string) (ScramCredential, error) {
	var c ScramCredential
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || seen[k] {
			return ScramCredential{}, fmt.Errorf("broker: SCRAM credential: bad field %q", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "salt":
			c.Salt, err = base64.StdEncoding.DecodeString(v)
		case "stored_key":
			c.StoredKey, err = base64.StdEncoding.DecodeString(v)
		case "server_key":
			c.ServerKey, err = base64.StdEncoding.DecodeString(v)
		case "iterations":
			c.Iterations, err = strconv.Atoi(v)
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			return ScramCredential{}, fmt.Errorf("broker: SCRAM credential field %s: %v", k, err)
		}
	}
	if len(seen) != 4 {
		return ScramCredential{}, errors.New("broker: SCRAM credential: want salt, stored_key, server_key and iterations")
	}
	if c.Iterations < MinScramIterations || c.Iterations > MaxScramIterations || len(c.Salt) == 0 || len(c.StoredKey) == 0 || len(c.ServerKey) != len(c.StoredKey) {
		return ScramCredential{}, errors.New("broker: SCRAM credential out of range")
	}
	return c, nil
}

// CredentialStore finds a user's SCRAM credential for a mechanism.
type CredentialStore interface {
	ScramCredential(mech, user string) (ScramCredential, bool)
}

// scramClientFirst is a parsed client-first-message (RFC 5802 §7).
type scramClientFirst struct {
	gs2Header string // "n,," or "y,,", or with a=authzid
	user      string
	nonce     string
	bare      string // client-first-message-bare
}

// parseScramClientFirst parses "gs2-cbind-flag,[a=authzid],n=user,r=nonce[,ext...]".
// Channel binding ("p=") is refused; an authzid must name the user (as
// Kafka); the extension tokenauth (delegation tokens) is refused, other
// extensions are ignored.
func parseScramClientFirst(msg []byte) (scramClientFirst, error) {
	s := string(msg)
	var cf scramClientFirst
	flag, rest, ok := strings.Cut(s, ",")
	if !ok {
		return cf, errors.New("no gs2 header")
	}
	switch {
	case flag == "n" || flag == "y":
	case strings.HasPrefix(flag, "p="):
		return cf, errors.New("channel binding is not supported")
	default:
		return cf, fmt.Errorf("bad gs2 channel binding flag")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return cf, errors.New("no client-first-message-bare")
	}
	if authz != "" {
		if !strings.HasPrefix(authz, "a=") {
			return cf, errors.New("bad authzid")
		}
	}
	cf.gs2Header = flag + "," + authz + ","
	cf.bare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 {
		return cf, errors.New("short client-first-message")
	}
	if strings.HasPrefix(attrs[0], "m=") {
		return cf, errors.New("mandatory extension not supported")
	}
	u, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return cf, errors.New("no username")
	}
	user, err := decodeSASLName(u)
	if err != nil || user == "" {
		return cf, errors.New("bad username")
	}
	cf.user = user
	if authz != "" {
		az, err := decodeSASLName(authz[2:])
		if err != nil || az != user {
			return cf, errors.New("authzid differs from the username")
		}
	}
	n, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !validNonce(n) {
		return cf, errors.New("bad nonce")
	}
	cf.nonce = n
	for _, ext := range attrs[2:] {
		k, _, _ := strings.Cut(ext, "=")
		if k == "tokenauth" {
			return cf, errors.New("delegation tokens are not supported")
		}
		if k == "" {
			return cf, errors.New("empty extension")
		}
	}
	return cf, nil
}

// decodeSASLName undoes RFC 5802's "=2C" and "=3D" escapes.
func decodeSASLName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("bad escape in saslname")
		}
		i += 2
	}
	return b.String(), nil
}

// validNonce: printable ASCII except ','.
func validNonce(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// scramClientFinal is a parsed client-final-message.
type scramClientFinal struct {
	channelBinding string // base64 of the gs2 header
	nonce          string
	proof          []byte
	withoutProof   string
}

// parseScramClientFinal parses "c=…,r=…[,ext…],p=…".
func parseScramClientFinal(msg []byte) (scramClientFinal, error) {
	s := string(msg)
	var cf scramClientFinal
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return cf, errors.New("no proof")
	}
	cf.withoutProof = s[:i]
	proof, err := base64.StdEncoding.DecodeString(s[i+3:])
	if err != nil {
		return cf, errors.New("bad proof encoding")
	}
	cf.proof = proof
	attrs := strings.Split(cf.withoutProof, ",")
	if len(attrs) < 2 {
		return cf, errors.New("short client-final-message")
	}
	c, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok {
		return cf, errors.New("no channel binding")
	}
	cf.channelBinding = c
	r, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !validNonce(r) {
		return cf, errors.New("bad nonce")
	}
	cf.nonce = r
	return cf, nil
}

// scramServer is one server side of a SCRAM exchange: pure, apart from
// the nonce it reads from rand. step takes each client message in turn.
type scramServer struct {
	mech  string
	h     func() hash.Hash
	creds CredentialStore
	// fakeKey derives a stand-in credential for unknown users, so that an
	// unknown user and a wrong password look alike on the wire.
	fakeKey []byte
	// newNonce returns the server's part of the nonce.
	newNonce func() (string, error)

	state           int // 0: want client-first, 1: want client-final, 2: done
	first           scramClientFirst
	serverFirst     string
	nonce           string
	cred            ScramCredential
	known           bool
	user            string
	authenticatedAs string
}

func newScramServer(mech string, creds CredentialStore, fakeKey []byte, rand io.Reader) (*scramServer, error) {
	h, _, ok := scramHash(mech)
	if !ok {
		return nil, fmt.Errorf("broker: %q is not a SCRAM mechanism", mech)
	}
	newNonce := func() (string, error) {
		var nb [24]byte
		if _, err := io.ReadFull(rand, nb[:]); err != nil {
			return "", err
		}
		return base64.RawStdEncoding.EncodeToString(nb[:]), nil
	}
	return &scramServer{mech: mech, h: h, creds: creds, fakeKey: fakeKey, newNonce: newNonce}, nil
}

// step answers one client message. done with a nil error means the user
// is authenticated (as user()); an error wraps ErrSASLAuthentication and
// says what was wrong without any credential.
func (s *scramServer) step(in []byte) (out []byte, done bool, err error) {
	fail := func(why string) ([]byte, bool, error) {
		s.state = 2
		return nil, true, fmt.Errorf("%w: %s: %s", ErrSASLAuthentication, s.mech, why)
	}
	switch s.state {
	case 0:
		cf, err := parseScramClientFirst(in)
		if err != nil {
			return fail("client-first-message: " + err.Error())
		}
		s.first, s.user = cf, cf.user
		s.cred, s.known = s.creds.ScramCredential(s.mech, cf.user)
		if !s.known {
			s.cred = s.fakeCredential(cf.user)
		}
		suffix, err := s.newNonce()
		if err != nil {
			return fail("nonce: " + err.Error())
		}
		s.nonce = cf.nonce + suffix
		s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
		s.state = 1
		return []byte(s.serverFirst), false, nil
	case 1:
		cf, err := parseScramClientFinal(in)
		if err != nil {
			return fail("client-final-message: " + err.Error())
		}
		if cf.channelBinding != base64.StdEncoding.EncodeToString([]byte(s.first.gs2Header)) {
			return fail("channel binding differs from the gs2 header")
		}
		// Kafka checks that the nonce ends with the one it sent, not that
		// it equals it: librdkafka sends its client nonce in front of the
		// combined one. The server's random part is in either way.
		if !strings.HasSuffix(cf.nonce, s.nonce) {
			return fail("nonce differs")
		}
		authMessage := s.first.bare + "," + s.serverFirst + "," + cf.withoutProof
		sig := hmacSum(s.h, s.cred.StoredKey, authMessage)
		if len(cf.proof) != len(sig) {
			return fail("invalid credentials")
		}
		clientKey := make([]byte, len(sig))
		subtle.XORBytes(clientKey, cf.proof, sig)
		hk := s.h()
		hk.Write(clientKey)
		if subtle.ConstantTimeCompare(hk.Sum(nil), s.cred.StoredKey) != 1 || !s.known {
			return fail("invalid credentials")
		}
		s.state = 2
		s.authenticatedAs = s.user
		return []byte("v=" + base64.StdEncoding.EncodeToString(hmacSum(s.h, s.cred.ServerKey, authMessage))), true, nil
	}
	return fail("exchange already finished")
}

// fakeCredential is a stable, unguessable credential for an unknown user.
func (s *scramServer) fakeCredential(user string) ScramCredential {
	salt := hmacSum(sha256.New, s.fakeKey, "salt/"+user)
	keys := hmacSum(s.h, s.fakeKey, "keys/"+user)
	return ScramCredential{Salt: salt, Iterations: DefaultScramIterations, StoredKey: keys, ServerKey: keys}
}

// parsePlain parses a SASL/PLAIN message (RFC 4616):
// "[authzid] NUL authcid NUL passwd". An authzid must name the user.
func parsePlain(msg []byte) (user, password string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", errors.New("want authzid NUL user NUL password")
	}
	authz, u, p := string(parts[0]), string(parts[1]), string(parts[2])
	if u == "" || p == "" {
		return "", "", errors.New("empty user or password")
	}
	if authz != "" && authz != u {
		return "", "", errors.New("authzid differs from the username")
	}
	return u, p, nil
}

// checkPlain verifies a PLAIN password against the user's stored SCRAM
// credential (SCRAM-SHA-512 if there is one, else SCRAM-SHA-256): the
// users file never holds passwords.
func checkPlain(creds CredentialStore, user, password string) bool {
	found := false
	defer func() {
		if !found {
			// Spend what a known user costs, so timing does not tell
			// who exists.
			NewScramCredential(mechScramSHA512, password, []byte("kwal-unknown-user"), DefaultScramIterations)
		}
	}()
	for _, mech := range []string{mechScramSHA512, mechScramSHA256} {
		c, ok := creds.ScramCredential(mech, user)
		if !ok {
			continue
		}
		found = true
		got, err := NewScramCredential(mech, password, c.Salt, c.Iterations)
		if err != nil {
			return false
		}
		return subtle.ConstantTimeCompare(got.StoredKey, c.StoredKey) == 1
	}
	return false
}

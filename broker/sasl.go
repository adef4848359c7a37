package broker

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SaslHandshake: v0-1. SaslAuthenticate: v0-2 (KIP-152).
//
// On a SASL_PLAINTEXT or SASL_SSL listener a connection may send only
// ApiVersions, then SaslHandshake (choosing a mechanism the listener
// enables), then SaslAuthenticate until the mechanism is done; any other
// request before that closes the connection with a log line, as Kafka
// does. A failed exchange is answered SASL_AUTHENTICATION_FAILED and the
// connection closed. Requests before authentication are bounded by
// saslMaxReceiveSize (Kafka's sasl.server.max.receive.size default).
//
// After SaslHandshake v0 the tokens travel unframed (size, token), as
// KIP-43 had it; librdkafka checks that v0 is served before it uses v1.
//
// Where it differs from Kafka: no re-authentication (KIP-368: SessionLifetimeMillis is 0); no
// GSSAPI or OAUTHBEARER; no delegation tokens; PLAIN is checked against
// the user's stored SCRAM credential rather than a JAAS password list.

const (
	apiKeySASLHandshake    = 17
	apiKeySASLAuthenticate = 36
	saslMaxReceiveSize     = 512 << 10
)

// EnvInterBrokerSASLPassword names the environment variable holding the
// inter-broker SASL password (never a flag or a property).
const EnvInterBrokerSASLPassword = "KWAL_INTER_BROKER_SASL_PASSWORD"

// saslState is one SASL listener connection's progress.
type saslState struct {
	mech      string // chosen by SaslHandshake
	scram     *scramServer
	principal string // set once authenticated
	// rawTokens: after a SaslHandshake v0 the next frames are bare SASL
	// tokens until the mechanism is done.
	rawTokens bool
}

func (s *saslState) authenticated() bool { return s.principal != "" }

// allowedBeforeAuth refuses (and logs) any request other than ApiVersions,
// SaslHandshake and SaslAuthenticate on a SASL connection that has not
// authenticated.
func (b *Broker) allowedBeforeAuth(cs *connState, h requestHeader) bool {
	if cs.sasl == nil || cs.sasl.authenticated() {
		return true
	}
	switch h.key {
	case apiKeyApiVersions, apiKeySASLHandshake, apiKeySASLAuthenticate:
		return true
	}
	b.logger.Warn("closing connection: request before SASL authentication", "remote", cs.remote, "listener", cs.listener.cfg.Name, "key", kmsg.NameForKey(h.key))
	return false
}

func (b *Broker) handleSASLHandshake(cs *connState, req *kmsg.SASLHandshakeRequest) (kmsg.Response, bool) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if cs.sasl == nil || cs.sasl.mech != "" {
		// As Kafka: after authentication (a connection on a listener
		// without SASL counts as authenticated) the broker answers
		// ILLEGAL_SASL_STATE and keeps the connection; in the middle of
		// an exchange it closes it.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		b.logger.Warn("SaslHandshake on a connection not expecting one", "remote", cs.remote)
		return resp, cs.sasl == nil || cs.sasl.authenticated()
	}
	mechs := cs.listener.cfg.SASLMechanisms
	resp.SupportedMechanisms = slices.Clone(mechs)
	if !slices.Contains(mechs, req.Mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		b.logger.Warn("closing connection: SASL mechanism not enabled", "remote", cs.remote, "listener", cs.listener.cfg.Name, "mechanism", req.Mechanism, "enabled", mechs)
		return resp, false
	}
	cs.sasl.mech = req.Mechanism
	cs.sasl.rawTokens = req.Version == 0
	if req.Mechanism != mechPlain {
		s, err := newScramServer(req.Mechanism, b.cfg.SASLCredentials, b.saslFakeKey, rand.Reader)
		if err != nil {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return resp, false
		}
		cs.sasl.scram = s
	}
	return resp, true
}

func (b *Broker) handleSASLAuthenticate(cs *connState, req *kmsg.SASLAuthenticateRequest) (kmsg.Response, bool) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	st := cs.sasl
	if st == nil || st.authenticated() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate after authentication (or on a listener without SASL)"
		resp.ErrorMessage = &msg
		b.logger.Warn(msg, "remote", cs.remote)
		return resp, true
	}
	if st.mech == "" || st.rawTokens {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake v1 first"
		resp.ErrorMessage = &msg
		b.logger.Warn("closing connection: "+msg, "remote", cs.remote)
		return resp, false
	}
	out, err := b.saslStep(cs, req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + st.mech
		resp.ErrorMessage = &msg
		return resp, false
	}
	resp.SASLAuthBytes = out
	return resp, true
}

// saslStep feeds one client token to the connection's mechanism and
// returns the server's token. A failure is logged (the error names what
// was wrong, never a password or proof) and wraps ErrSASLAuthentication.
func (b *Broker) saslStep(cs *connState, in []byte) ([]byte, error) {
	st := cs.sasl
	var (
		out  []byte
		done bool
		user string
		err  error
	)
	if st.mech == mechPlain {
		var password string
		done = true
		if user, password, err = parsePlain(in); err != nil {
			err = fmt.Errorf("%w: PLAIN: %v", ErrSASLAuthentication, err)
		} else if !checkPlain(b.cfg.SASLCredentials, user, password) {
			err = fmt.Errorf("%w: PLAIN: invalid credentials", ErrSASLAuthentication)
		}
	} else {
		out, done, err = st.scram.step(in)
		user = st.scram.user
	}
	if err != nil {
		b.logger.Warn("closing connection: SASL authentication failed", "remote", cs.remote, "listener", cs.listener.cfg.Name, "mechanism", st.mech, "user", user, "err", err)
		return nil, err
	}
	if done {
		st.principal = user
		st.rawTokens = false
		b.logger.Debug("SASL authenticated", "remote", cs.remote, "listener", cs.listener.cfg.Name, "mechanism", st.mech, "user", user)
	}
	return out, nil
}

// saslRawToken serves one token after a SaslHandshake v0: the frame is
// the token itself and the answer is a size-prefixed token, no Kafka
// header (KIP-43). A failure closes the connection, as Kafka does.
func (b *Broker) saslRawToken(cs *connState, token []byte) ([]byte, bool) {
	out, err := b.saslStep(cs, token)
	if err != nil {
		return nil, false
	}
	cs.out = binary.BigEndian.AppendUint32(cs.out[:0], uint32(len(out)))
	cs.out = append(cs.out, out...)
	return cs.out, true
}

// SASLClientConfig is how kwal authenticates as a client: broker to
// broker (kwal.inter.broker.sasl.username, sasl.mechanism.inter.broker.protocol
// and KWAL_INTER_BROKER_SASL_PASSWORD) and to the metadata Kafka
// (remote.wal.metadata.sasl.*).
type SASLClientConfig struct {
	Mechanism string // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	Username  string
	Password  string
}

// SASL is the franz-go mechanism for c.
func (c *SASLClientConfig) SASL() (sasl.Mechanism, error) {
	switch c.Mechanism {
	case mechPlain:
		return plain.Auth{User: c.Username, Pass: c.Password}.AsMechanism(), nil
	case mechScramSHA256:
		return scram.Auth{User: c.Username, Pass: c.Password}.AsSha256Mechanism(), nil
	case mechScramSHA512:
		return scram.Auth{User: c.Username, Pass: c.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%w: SASL mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", ErrConfig, c.Mechanism)
}

// authenticate runs SaslHandshake v1 and SaslAuthenticate v1 on the wire
// client with mech.
func (c *wireClient) authenticate(mech sasl.Mechanism, deadline time.Time) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	r, err := c.roundTrip(hs, deadline)
	if err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if err := kerr.ErrorForCode(r.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake %s: %w", mech.Name(), err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	session, msg, err := mech.Authenticate(ctx, "")
	if err != nil {
		return err
	}
	for {
		ar := kmsg.NewPtrSASLAuthenticateRequest()
		ar.Version, ar.SASLAuthBytes = 1, msg
		r, err := c.roundTrip(ar, deadline)
		if err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("SaslAuthenticate %s: %w", mech.Name(), err)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		msg = next
	}
}

var errNoEndpoint = errors.New("broker: no address on the inter-broker listener")

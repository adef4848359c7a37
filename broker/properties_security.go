package broker

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Security keys of server.properties. Kafka's names where Kafka has them:
//
//	listeners=INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092
//	advertised.listeners=INTERNAL://kwal-1:9092,EXTERNAL://localhost:19092
//	listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:SSL
//	inter.broker.listener.name=INTERNAL
//	ssl.keystore.type=PEM                 (the only type read)
//	ssl.keystore.location=/etc/kwal/broker.pem   (certificate chain and key)
//	ssl.keystore.certificate.chain=… / ssl.keystore.key=…   (inline PEM)
//	ssl.truststore.type=PEM, ssl.truststore.location / ssl.truststore.certificates
//	ssl.client.auth=none|requested|required
//	ssl.endpoint.identification.algorithm=https|   (inter-broker client)
//	sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
//	sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
//	listener.name.<name>.<ssl.* or sasl.enabled.mechanisms>   (per listener,
//	                                      name in lower case, overrides)
//
// kwal's own, where Kafka uses JAAS (which kwal does not read) or an
// authorizer class:
//
//	kwal.sasl.users.file=/etc/kwal/users      (kwal users add writes it)
//	kwal.inter.broker.sasl.username=broker    (password: KWAL_INTER_BROKER_SASL_PASSWORD)
//	kwal.acl.file=/etc/kwal/acls              (see acl.go), with Kafka's
//	super.users=User:broker;User:admin and allow.everyone.if.no.acl.found
//
// The client of the metadata Kafka (remote.wal.metadata.bootstrap.servers):
//
//	remote.wal.metadata.security.protocol=PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL
//	remote.wal.metadata.ssl.<keystore/truststore keys as above>
//	remote.wal.metadata.ssl.endpoint.identification.algorithm=https|
//	remote.wal.metadata.sasl.mechanism=SCRAM-SHA-512
//	remote.wal.metadata.sasl.username=kwal    (password: KWAL_METADATA_SASL_PASSWORD)
//
// Passwords are read from the environment only, never from a property
// or a flag.

// EnvMetadataSASLPassword names the environment variable holding the
// metadata client's SASL password.
const EnvMetadataSASLPassword = "KWAL_METADATA_SASL_PASSWORD"

const metadataPrefix = "remote.wal.metadata."

var plainSecurityKeys = []string{
	"listeners", "advertised.listeners", "listener.security.protocol.map", "inter.broker.listener.name",
	"sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol",
	"kwal.sasl.users.file", "kwal.inter.broker.sasl.username",
	"kwal.acl.file", "super.users", "allow.everyone.if.no.acl.found",
	metadataPrefix + "security.protocol", metadataPrefix + "sasl.mechanism", metadataPrefix + "sasl.username",
}

// securityKeys lists the fixed security keys (not the listener.name.*
// forms), sorted.
func securityKeys() []string {
	out := slices.Clone(plainSecurityKeys)
	for _, k := range tlsKeyNames() {
		if k != "ssl.client.auth" { // server side only
			out = append(out, metadataPrefix+k)
		}
		out = append(out, k)
	}
	out = append(out, "listener.name.<name>.sasl.enabled.mechanisms", "listener.name.<name>.ssl.<any ssl.* key>")
	sort.Strings(out)
	return out
}

func isSecurityKey(key string) bool {
	if slices.Contains(plainSecurityKeys, key) {
		return true
	}
	k := strings.TrimPrefix(key, metadataPrefix)
	if rest, ok := strings.CutPrefix(key, "listener.name."); ok {
		_, k, ok = strings.Cut(rest, ".")
		if !ok {
			return false
		}
		if k == "sasl.enabled.mechanisms" {
			return true
		}
	}
	return slices.Contains(tlsKeyNames(), k)
}

// securityProps are the security keys of one file, by key.
type securityProps map[string]Property

func (s securityProps) get(key string) (string, bool) {
	p, ok := s[key]
	return strings.TrimSpace(p.Value), ok
}

// errKey is a refusal naming the key, its line and value.
func (s securityProps) errKey(key string, err error) error {
	if p, ok := s[key]; ok {
		return fmt.Errorf("%w: line %d: %s=%q: %v", ErrConfig, p.Line, key, p.Value, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrConfig, key, err)
}

// tlsSettings reads the ssl.* keys under prefix, with listener overrides
// (listener.name.<name>.ssl.*) taking precedence when listenerName is set.
func (s securityProps) tlsSettings(prefix, listenerName string) (TLSSettings, error) {
	var t TLSSettings
	for _, k := range tlsKeyNames() {
		key := prefix + k
		v, ok := s.get(key)
		if listenerName != "" {
			lk := "listener.name." + strings.ToLower(listenerName) + "." + k
			if lv, lok := s.get(lk); lok {
				key, v, ok = lk, lv, true
			}
		}
		if !ok {
			continue
		}
		if _, err := t.set(k, v); err != nil {
			return TLSSettings{}, s.errKey(key, err)
		}
	}
	return t, nil
}

// apply builds the listeners, the inter-broker client and the metadata
// client from the security keys.
func (s securityProps) apply(sc *ServerConfig, getenv func(string) string) error {
	b := &sc.Broker
	v, ok := s.get("listeners")
	if !ok {
		v = DefaultListener
	}
	ls, err := ParseListeners(v)
	if err != nil {
		return s.errKey("listeners", err)
	}
	protos := map[string]SecurityProtocol{}
	if pm, ok := s.get("listener.security.protocol.map"); ok {
		if protos, err = ParseSecurityProtocolMap(pm); err != nil {
			return s.errKey("listener.security.protocol.map", err)
		}
	}
	if av, ok := s.get("advertised.listeners"); ok {
		adv, err := ParseListeners(av)
		if err != nil {
			return s.errKey("advertised.listeners", err)
		}
		for _, a := range adv {
			i := slices.IndexFunc(ls, func(l ListenerConfig) bool { return l.Name == a.Name })
			if i < 0 {
				return s.errKey("advertised.listeners", fmt.Errorf("listener %s is not in listeners", a.Name))
			}
			ls[i].Advertised = a.Addr
		}
	}
	var users CredentialStore
	if path, ok := s.get("kwal.sasl.users.file"); ok {
		f, err := LoadUserFile(path)
		if err != nil {
			return s.errKey("kwal.sasl.users.file", err)
		}
		users = f
	}
	mechs := func(name string) ([]string, error) {
		key := "listener.name." + strings.ToLower(name) + ".sasl.enabled.mechanisms"
		v, ok := s.get(key)
		if !ok {
			key = "sasl.enabled.mechanisms"
			if v, ok = s.get(key); !ok {
				return nil, nil
			}
		}
		out := splitList(strings.ToUpper(v))
		for _, m := range out {
			if !slices.Contains(supportedSASLMechanisms, m) {
				return nil, s.errKey(key, fmt.Errorf("mechanism %s is not supported (supported: %s)", m, strings.Join(supportedSASLMechanisms, ", ")))
			}
		}
		return out, nil
	}
	for i := range ls {
		l := &ls[i]
		p, ok := protos[l.Name]
		switch {
		case ok:
			l.Protocol = p
		case len(protos) > 0:
			return s.errKey("listener.security.protocol.map", fmt.Errorf("listener %s is not mapped", l.Name))
		default:
			// Without a map, Kafka's default maps each protocol name to itself.
			if l.Protocol, err = parseSecurityProtocol(l.Name); err != nil {
				return s.errKey("listener.security.protocol.map", fmt.Errorf("listener %s: not a protocol name, and no map is given", l.Name))
			}
		}
		if l.Protocol.UsesTLS() {
			ts, err := s.tlsSettings("", l.Name)
			if err != nil {
				return err
			}
			if l.TLS, err = ts.ServerConfig(); err != nil {
				return fmt.Errorf("%w: listener %s (%s): %v", ErrConfig, l.Name, l.Protocol, err)
			}
		}
		if l.Protocol.UsesSASL() {
			if l.SASLMechanisms, err = mechs(l.Name); err != nil {
				return err
			}
		}
	}
	b.Listeners = ls
	b.SASLCredentials = users
	if path, ok := s.get("kwal.acl.file"); ok {
		var supers []string
		if v, ok := s.get("super.users"); ok {
			for _, u := range strings.Split(v, ";") {
				if u = strings.TrimSpace(u); u != "" {
					supers = append(supers, u)
				}
			}
		}
		allow := false
		if v, ok := s.get("allow.everyone.if.no.acl.found"); ok {
			if allow, err = strconv.ParseBool(v); err != nil {
				return s.errKey("allow.everyone.if.no.acl.found", err)
			}
		}
		if b.Authorizer, err = LoadACLs(path, supers, allow); err != nil {
			return s.errKey("kwal.acl.file", err)
		}
	} else if _, ok := s.get("super.users"); ok {
		return s.errKey("super.users", fmt.Errorf("without kwal.acl.file nothing is checked"))
	}
	b.InterBrokerListenerName, _ = s.get("inter.broker.listener.name")
	ib := b.InterBrokerListenerName
	if ib == "" && len(ls) == 1 {
		ib = ls[0].Name
	} else if ib == "" {
		ib = string(ProtocolPlaintext)
	}
	if lc, ok := (&Config{Listeners: ls}).listenerConfig(ib); ok {
		if lc.Protocol.UsesTLS() {
			ts, err := s.tlsSettings("", lc.Name)
			if err != nil {
				return err
			}
			if b.InterBrokerTLS, err = ts.ClientConfig(); err != nil {
				return fmt.Errorf("%w: inter-broker client on listener %s: %v", ErrConfig, lc.Name, err)
			}
		}
		if lc.Protocol.UsesSASL() {
			mech, ok := s.get("sasl.mechanism.inter.broker.protocol")
			if !ok {
				mech = mechScramSHA512
				if len(lc.SASLMechanisms) > 0 && !slices.Contains(lc.SASLMechanisms, mech) {
					mech = lc.SASLMechanisms[0]
				}
			}
			user, _ := s.get("kwal.inter.broker.sasl.username")
			b.InterBrokerSASL = &SASLClientConfig{Mechanism: strings.ToUpper(mech), Username: user, Password: getenv(EnvInterBrokerSASLPassword)}
		}
	}
	return s.applyMetadataClient(&b.RemoteWAL, getenv)
}

func (s securityProps) applyMetadataClient(r *RemoteWALConfig, getenv func(string) string) error {
	key := metadataPrefix + "security.protocol"
	v, ok := s.get(key)
	if !ok {
		v = string(ProtocolPlaintext)
	}
	p, err := parseSecurityProtocol(v)
	if err != nil {
		return s.errKey(key, err)
	}
	ts, err := s.tlsSettings(metadataPrefix, "")
	if err != nil {
		return err
	}
	if p.UsesTLS() {
		if r.MetadataTLS, err = ts.ClientConfig(); err != nil {
			return fmt.Errorf("%w: metadata client (%s): %v", ErrConfig, key, err)
		}
	} else if ts != (TLSSettings{}) {
		return s.errKey(key, fmt.Errorf("%s ssl settings are given but the protocol is %s", metadataPrefix, p))
	}
	mech, mok := s.get(metadataPrefix + "sasl.mechanism")
	user, uok := s.get(metadataPrefix + "sasl.username")
	if !p.UsesSASL() {
		if mok || uok {
			return s.errKey(key, fmt.Errorf("%ssasl.* settings are given but the protocol is %s", metadataPrefix, p))
		}
		return nil
	}
	if !mok {
		mech = mechScramSHA512
	}
	pass := getenv(EnvMetadataSASLPassword)
	if user == "" || pass == "" {
		return s.errKey(metadataPrefix+"sasl.username", fmt.Errorf("protocol %s needs a user and %s in the environment", p, EnvMetadataSASLPassword))
	}
	c := &SASLClientConfig{Mechanism: strings.ToUpper(mech), Username: user, Password: pass}
	if _, err := c.SASL(); err != nil {
		return s.errKey(metadataPrefix+"sasl.mechanism", err)
	}
	r.MetadataSASL = c
	return nil
}

// securityKeyNote is the default and a note of a security key, for
// kwal broker --keys.
func securityKeyNote(key string) ([2]string, bool) {
	notes := map[string][2]string{
		"listeners":                                    {DefaultListener, "NAME://host:port,...; each name mapped in listener.security.protocol.map (or a protocol name)"},
		"advertised.listeners":                         {"(the bound addresses)", "NAME://host:port per listener, as clients reach it"},
		"listener.security.protocol.map":               {"(each name is its protocol)", "NAME:PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL,..."},
		"inter.broker.listener.name":                   {"(the only listener, else PLAINTEXT)", "the listener brokers dial each other on"},
		"sasl.enabled.mechanisms":                      {"SCRAM-SHA-256,SCRAM-SHA-512", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"},
		"sasl.mechanism.inter.broker.protocol":         {mechScramSHA512, "how brokers authenticate to each other"},
		"kwal.sasl.users.file":                         {"(none)", "salted SCRAM credentials, written by kwal users add; required by SASL listeners"},
		"kwal.inter.broker.sasl.username":              {"(none)", "the user brokers authenticate as; password in " + EnvInterBrokerSASLPassword},
		"kwal.acl.file":                                {"(none: no ACLs)", "allow rules PRINCIPAL OPERATIONS RESOURCE (README)"},
		"super.users":                                  {"(none)", "User:a;User:b, allowed everything; needs kwal.acl.file"},
		"allow.everyone.if.no.acl.found":               {"false", "true allows topics and groups no rule names"},
		metadataPrefix + "security.protocol":           {"PLAINTEXT", "the metadata Kafka client's protocol"},
		metadataPrefix + "sasl.mechanism":              {mechScramSHA512, "the metadata Kafka client's SASL mechanism"},
		metadataPrefix + "sasl.username":               {"(none)", "the metadata Kafka user; password in " + EnvMetadataSASLPassword},
		"listener.name.<name>.sasl.enabled.mechanisms": {"(sasl.enabled.mechanisms)", "per listener, name in lower case"},
		"listener.name.<name>.ssl.<any ssl.* key>":     {"(the ssl.* key)", "per listener, name in lower case"},
	}
	if n, ok := notes[key]; ok {
		return n, true
	}
	k := strings.TrimPrefix(key, metadataPrefix)
	if !slices.Contains(tlsKeyNames(), k) {
		return [2]string{}, false
	}
	def := "(none)"
	switch k {
	case "ssl.keystore.type", "ssl.truststore.type":
		def = "PEM"
	case "ssl.client.auth":
		def = "none"
	case "ssl.endpoint.identification.algorithm":
		def = "https"
	}
	who := "listeners (and the inter-broker client)"
	if k != key {
		who = "the metadata Kafka client"
	}
	return [2]string{def, "TLS of " + who + "; PEM only (README)"}, true
}

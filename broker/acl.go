package broker

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// ACLs (optional): kwal.acl.file names a file of rules
//
//	# principal   operations         resource
//	User:alice    Read,Write         topic:orders
//	User:bob      Read               topic:logs-*     (a trailing * is a prefix)
//	User:*        Describe           topic:*
//	User:ops      DescribeConfigs    cluster
//	User:alice    Read               group:alice-app  (consumer groups; also group:PREFIX*)
//
// with Kafka's operation names (Read, Write, Create, Describe,
// DescribeConfigs, IdempotentWrite, ClusterAction, All) and Kafka's
// implications (Read and Write imply Describe; Delete exists for groups).
// Rules only allow; there
// are no deny rules. super.users (Kafka's key, "User:a;User:b") may do
// anything, and must include the principal brokers replicate as.
// allow.everyone.if.no.acl.found (Kafka's key, default false) allows a
// topic no rule names. Principals are User:<SASL user> on SASL listeners,
// User:<certificate subject> for TLS client certificates, else
// User:ANONYMOUS. Without kwal.acl.file nothing is checked.

// ACL operations, as Kafka names them.
const (
	OpRead            = "Read"
	OpWrite           = "Write"
	OpCreate          = "Create"
	OpDescribe        = "Describe"
	OpDelete          = "Delete"
	OpDescribeConfigs = "DescribeConfigs"
	OpIdempotentWrite = "IdempotentWrite"
	OpClusterAction   = "ClusterAction"
	OpAll             = "All"
)

var aclOps = []string{OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpDescribeConfigs, OpIdempotentWrite, OpClusterAction, OpAll}

// AnonymousPrincipal is the principal of a connection that proved no
// identity.
const AnonymousPrincipal = "User:ANONYMOUS"

type aclRule struct {
	principal string // "User:x" or "User:*"
	ops       []string
	cluster   bool   // the cluster resource
	group     bool   // name is a consumer group's, not a topic's
	topic     string // name, or prefix when prefix is set; "" with prefix: every one
	prefix    bool
}

// Authorizer decides what a principal may do. Make it with ParseACLs;
// it is read-only afterwards and safe for concurrent use.
type Authorizer struct {
	rules       []aclRule
	superUsers  []string
	allowIfNone bool
}

// ParseACLs reads the kwal.acl.file format. superUsers are
// super.users entries; allowIfNone is allow.everyone.if.no.acl.found.
func ParseACLs(r io.Reader, superUsers []string, allowIfNone bool) (*Authorizer, error) {
	a := &Authorizer{superUsers: superUsers, allowIfNone: allowIfNone}
	for _, s := range superUsers {
		if !strings.HasPrefix(s, "User:") || s == "User:" {
			return nil, fmt.Errorf("super.users: %q is not User:<name>", s)
		}
	}
	err := scanFields(r, 3, "acl", "PRINCIPAL OPERATIONS RESOURCE", func(line int, f []string) error {
		rule := aclRule{principal: f[0]}
		if !strings.HasPrefix(rule.principal, "User:") || rule.principal == "User:" {
			return fmt.Errorf("acl line %d: principal %q is not User:<name> or User:*", line, f[0])
		}
		for _, op := range strings.Split(f[1], ",") {
			i := slices.IndexFunc(aclOps, func(o string) bool { return strings.EqualFold(o, op) })
			if i < 0 {
				return fmt.Errorf("acl line %d: operation %q (want one of %s)", line, op, strings.Join(aclOps, ", "))
			}
			rule.ops = append(rule.ops, aclOps[i])
		}
		switch res := f[2]; {
		case res == "cluster":
			rule.cluster = true
		case strings.HasPrefix(res, "topic:") && len(res) > len("topic:"),
			strings.HasPrefix(res, "group:") && len(res) > len("group:"):
			kind, name, _ := strings.Cut(res, ":")
			rule.group, rule.topic = kind == "group", name
			if strings.HasSuffix(rule.topic, "*") {
				rule.topic, rule.prefix = strings.TrimSuffix(rule.topic, "*"), true
			}
			if strings.Contains(rule.topic, "*") {
				return fmt.Errorf("acl line %d: %q: '*' only at the end", line, res)
			}
		default:
			return fmt.Errorf("acl line %d: resource %q (want topic:NAME, topic:PREFIX*, group:NAME, group:PREFIX* or cluster)", line, res)
		}
		a.rules = append(a.rules, rule)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// LoadACLs reads an ACL file.
func LoadACLs(path string, superUsers []string, allowIfNone bool) (*Authorizer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := ParseACLs(f, superUsers, allowIfNone)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool {
	return slices.Contains(a.superUsers, principal)
}

func (r aclRule) matches(group bool, name string) bool {
	if r.cluster || r.group != group {
		return false
	}
	topic := name
	if r.prefix {
		return strings.HasPrefix(topic, r.topic)
	}
	return r.topic == topic
}

func (r aclRule) grants(principal, op string) bool {
	if r.principal != principal && r.principal != "User:*" {
		return false
	}
	for _, o := range r.ops {
		if o == op || o == OpAll || (op == OpDescribe && (o == OpRead || o == OpWrite || o == OpDelete)) {
			return true
		}
	}
	return false
}

// TopicAllowed reports whether principal may do op on topic.
func (a *Authorizer) TopicAllowed(principal, op, topic string) bool {
	return a.allowed(principal, op, false, topic)
}

// GroupAllowed reports whether principal may do op on consumer group.
func (a *Authorizer) GroupAllowed(principal, op, group string) bool {
	return a.allowed(principal, op, true, group)
}

func (a *Authorizer) allowed(principal, op string, group bool, name string) bool {
	if a.IsSuperUser(principal) {
		return true
	}
	named := false
	for _, r := range a.rules {
		if !r.matches(group, name) {
			continue
		}
		named = true
		if r.grants(principal, op) {
			return true
		}
	}
	return !named && a.allowIfNone
}

// ClusterAllowed reports whether principal may do op on the cluster.
// IdempotentWrite is also granted by Write on any topic (KIP-679).
func (a *Authorizer) ClusterAllowed(principal, op string) bool {
	if a.IsSuperUser(principal) {
		return true
	}
	for _, r := range a.rules {
		if r.cluster && r.grants(principal, op) {
			return true
		}
		if op == OpIdempotentWrite && !r.cluster && r.grants(principal, OpWrite) {
			return true
		}
	}
	return false
}

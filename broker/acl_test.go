package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseACLs(t *testing.T) {
	a, err := ParseACLs(strings.NewReader(`
# comment
User:alice  Read,Write      topic:orders
User:bob    read            topic:logs-*
User:*      Describe        topic:public
User:ops    DescribeConfigs cluster
User:carol  All             topic:c
User:dan    Read            group:app-*
User:dan    Delete          group:old
`), []string{"User:admin"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who, op, topic string
		ok             bool
	}{
		{"User:alice", OpWrite, "orders", true},
		{"User:alice", OpDescribe, "orders", true}, // Write implies Describe
		{"User:alice", OpCreate, "orders", false},
		{"User:alice", OpWrite, "orders2", false},
		{"User:bob", OpRead, "logs-a", true},
		{"User:bob", OpRead, "logs", false},
		{"User:bob", OpWrite, "logs-a", false},
		{"User:eve", OpDescribe, "public", true},
		{"User:eve", OpRead, "public", false},
		{"User:carol", OpCreate, "c", true},
		{"User:admin", OpWrite, "anything", true},
		{"User:eve", OpRead, "unnamed", false},
		{"User:dan", OpRead, "app-", false}, // a group rule says nothing of topics
	} {
		if got := a.TopicAllowed(tc.who, tc.op, tc.topic); got != tc.ok {
			t.Errorf("%s %s %s = %v, want %v", tc.who, tc.op, tc.topic, got, tc.ok)
		}
	}
	if !a.ClusterAllowed("User:ops", OpDescribeConfigs) || a.ClusterAllowed("User:ops", OpClusterAction) || a.ClusterAllowed("User:bob", OpDescribeConfigs) {
		t.Error("cluster rules wrong")
	}
	if !a.ClusterAllowed("User:alice", OpIdempotentWrite) || a.ClusterAllowed("User:bob", OpIdempotentWrite) {
		t.Error("IdempotentWrite must follow Write on any topic")
	}
	if !a.GroupAllowed("User:dan", OpRead, "app-1") || !a.GroupAllowed("User:dan", OpDescribe, "old") ||
		a.GroupAllowed("User:dan", OpRead, "old") || a.GroupAllowed("User:alice", OpRead, "orders") {
		t.Error("group rules wrong")
	}
	open, _ := ParseACLs(strings.NewReader("User:alice Read topic:named\n"), nil, true)
	if !open.TopicAllowed("User:eve", OpWrite, "other") || open.TopicAllowed("User:eve", OpRead, "named") {
		t.Error("allow.everyone.if.no.acl.found: only topics no rule names are open")
	}
	for _, bad := range []string{
		"alice Read topic:x", "User: Read topic:x", "User:a Fly topic:x", "User:a Read txn:x", "User:a Read group:",
		"User:a Read topic:", "User:a Read topic:a*b", "User:a Read",
	} {
		if _, err := ParseACLs(strings.NewReader(bad), nil, false); err == nil {
			t.Errorf("ParseACLs(%q) accepted", bad)
		}
	}
	if _, err := ParseACLs(strings.NewReader(""), []string{"admin"}, false); err == nil {
		t.Error("super user without User: accepted")
	}
}

// ACLs on a SASL listener: alice may create, write and read alice-*; bob
// may only read alice-shared; brokers replicate as a super user. Each
// refusal is Kafka's error code, and nothing refused is written.
func TestACLsEndToEnd(t *testing.T) {
	path, _ := testUsers(t)
	const bobPW = "bobs-pw-123"
	if err := AddUser(path, "bob", bobPW, []string{mechScramSHA256}, 4096); err != nil {
		t.Fatal(err)
	}
	users, err := LoadUserFile(path)
	if err != nil {
		t.Fatal(err)
	}
	acls, err := ParseACLs(strings.NewReader(`
User:alice Read,Write,Create topic:alice-*
User:alice Read              group:alice-app
User:bob   Read              topic:alice-shared
`), []string{"User:" + brokerUser}, false)
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, []string{"az1", "az2"}, func(cfg *Config) {
		cfg.Listeners = []ListenerConfig{{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Protocol: ProtocolSASLPlaintext}}
		cfg.SASLCredentials = users
		cfg.InterBrokerSASL = &SASLClientConfig{Mechanism: mechScramSHA512, Username: brokerUser, Password: brokerPassword}
		cfg.Authorizer = acls
	})
	as := func(user, pass string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.SASL(clientSASL(mechScramSHA256, user, pass))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	// alice: her topic works end to end, idempotent producer included
	// (RF 2: replication runs as the super user).
	produceConsume(t, c.seeds(), "alice-shared", kgo.SASL(clientSASL(mechScramSHA256, testUser, testPassword)))
	alice := as(testUser, testPassword)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cr := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "bob-topic", 1, 1
	cr.Topics = append(cr.Topics, ct)
	resp, err := cr.RequestWith(ctx, alice)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice creates bob-topic: %v %+v", err, resp)
	}
	if _, ok := c.ctrl.Topic("bob-topic"); ok {
		t.Fatal("bob-topic was created")
	}
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "secret", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}

	// bob reads alice-shared, may not write it, sees only it.
	bob := as("bob", bobPW, kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	err = bob.ProduceSync(ctx, &kgo.Record{Topic: "alice-shared", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob writes alice-shared: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	idem := as("bob", bobPW, kgo.RecordRetries(0))
	if err := idem.ProduceSync(ctx, &kgo.Record{Topic: "alice-shared", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("bob's idempotent produce got through")
	}
	for _, b := range c.brokers {
		if lg, ok := b.PartitionLog(TopicPartition{Topic: "alice-shared"}); ok && lg.LogEndOffset() != 20 {
			t.Fatalf("broker %d: alice-shared log end %d, want alice's 20", b.cfg.BrokerID, lg.LogEndOffset())
		}
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, mt := range md.Topics {
		seen = append(seen, *mt.Topic)
	}
	sort.Strings(seen)
	if strings.Join(seen, ",") != "alice-shared" {
		t.Fatalf("bob's all-topics Metadata lists %v", seen)
	}
	named := kmsg.NewPtrMetadataRequest()
	for _, n := range []string{"secret", "nonexistent"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		named.Topics = append(named.Topics, rt)
	}
	named.AllowAutoTopicCreation = true
	md, err = named.RequestWith(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, mt := range md.Topics {
		codes[*mt.Topic] = mt.ErrorCode
	}
	if codes["secret"] != kerr.TopicAuthorizationFailed.Code || codes["nonexistent"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob's named Metadata: %v", codes)
	}
	if _, ok := c.ctrl.Topic("nonexistent"); ok {
		t.Fatal("bob's Metadata auto-created a topic")
	}
	cons := as("bob", bobPW, kgo.ConsumeTopics("alice-shared"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if fs.NumRecords() == 0 {
		t.Fatalf("bob read nothing from alice-shared: %v", fs.Errors())
	}
	fr := kmsg.NewPtrFetchRequest()
	fr.ReplicaID, fr.MaxBytes = -1, 1<<20
	frt := kmsg.NewFetchRequestTopic()
	secret, _ := c.ctrl.Topic("secret")
	frt.Topic, frt.TopicID = "secret", secret.ID // kgo sends v13+: by id
	frp := kmsg.NewFetchRequestTopicPartition()
	frp.PartitionMaxBytes = 1 << 20
	frt.Partitions = append(frt.Partitions, frp)
	fr.Topics = append(fr.Topics, frt)
	fresp, err := fr.RequestWith(ctx, bob)
	if err != nil || len(fresp.Topics) != 1 || fresp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob fetches secret: %v %+v", err, fresp)
	}
	// Metadata v12 by id is authorized by the name the id resolves to.
	mreq := kmsg.NewPtrMetadataRequest()
	mrt := kmsg.NewMetadataRequestTopic()
	mrt.TopicID = secret.ID
	mreq.Topics = append(mreq.Topics, mrt)
	mresp, err := mreq.RequestWith(ctx, bob)
	if err != nil || len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || mresp.Topics[0].Topic != nil {
		t.Fatalf("bob's Metadata of secret by id: %v %+v", err, mresp)
	}
	// A replica fetch needs ClusterAction.
	fr.ReplicaID, fr.ReplicaState.ID = 1, 1 // v15+ carry it in ReplicaState
	fresp, err = fr.RequestWith(ctx, bob)
	if err != nil || fresp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob's replica fetch: %v %+v", err, fresp)
	}
	// Consumer groups: alice's group works; bob may not use one.
	grp := as(testUser, testPassword, kgo.ConsumerGroup("alice-app"), kgo.ConsumeTopics("alice-shared"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	gfs := grp.PollFetches(ctx)
	if gfs.NumRecords() == 0 {
		t.Fatalf("alice's group consumer read nothing: %v", gfs.Errors())
	}
	if err := grp.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits in her group: %v", err)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"bob-app", "alice-app"}
	fcr, err := fc.RequestWith(ctx, bob)
	if err != nil || len(fcr.Coordinators) != 2 {
		t.Fatalf("bob's FindCoordinator: %v %+v", err, fcr)
	}
	for _, co := range fcr.Coordinators {
		if co.ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("bob finds the coordinator of %s: code %d", co.Key, co.ErrorCode)
		}
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "alice-app", "consumer", 10000, 10000
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name = "range"
	jg.Protocols = append(jg.Protocols, jp)
	// Straight to a broker, past the coordinator lookup.
	raw, err := bob.Broker(1).Request(ctx, jg)
	if err != nil || raw.(*kmsg.JoinGroupResponse).ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob joins alice-app: %v %+v", err, raw)
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	dc.Resources = append(dc.Resources, dr)
	dresp, err := dc.RequestWith(ctx, bob)
	if err != nil || len(dresp.Resources) != 1 || dresp.Resources[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob describes broker configs: %v %+v", err, dresp)
	}
}

// Brokers must be allowed to replicate: ACLs that do not let the
// inter-broker principal do ClusterAction are refused at start.
func TestACLsNeedTheBrokerPrincipal(t *testing.T) {
	acls, _ := ParseACLs(strings.NewReader(""), []string{"User:admin"}, false)
	cfg := Config{LogDir: t.TempDir(), Controller: NewMemController(nil, 0), Authorizer: acls}
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "super.users") || !strings.Contains(err.Error(), AnonymousPrincipal) {
		t.Fatalf("err %v", err)
	}
}

// FuzzAuthorizedFrames: with ACLs that grant an anonymous client
// nothing, no frame panics or appends a record, and every response the
// ACL layer completes still encodes to a well-formed frame.
func FuzzAuthorizedFrames(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	acls, err := ParseACLs(strings.NewReader("User:someone Read,Write topic:t\n"), []string{"User:broker"}, false)
	if err != nil {
		f.Fatal(err)
	}
	c := startCluster(f, []string{"az1"}, func(cfg *Config) {
		cfg.Logger = quietLogger()
		cfg.DisableAutoCreateTopics = true
	})
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		f.Fatal(err)
	}
	b := c.brokers[0]
	// Set after start: Validate would (rightly) refuse ACLs that do not
	// let this plaintext broker's anonymous principal replicate.
	b.cfg.Authorizer = acls
	lg, _ := b.PartitionLog(TopicPartition{Topic: "t"})
	f.Fuzz(func(t *testing.T, frame []byte) {
		cs := &connState{remote: "fuzz", noWait: true, listener: b.listeners[0]}
		resp, _ := b.handleFrame(cs, frame)
		if resp != nil && int(binary.BigEndian.Uint32(resp)) != len(resp)-4 {
			t.Fatalf("response frame size %d for %d bytes", binary.BigEndian.Uint32(resp), len(resp)-4)
		}
		if lg.LogEndOffset() != 0 {
			t.Fatal("an anonymous client appended a record")
		}
	})
}

package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/group"
	"github.com/kwal/kwal/internal/changefeed"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func groupTweak(cfg *Config) {
	cfg.Groups.OffsetsTopicPartitions = 5
	cfg.Groups.InitialRebalanceDelay = -1
}

// produceValues produces records value(from..from+n-1), record i to
// partition i%6, with acks=all (cl must use the manual partitioner).
func produceValues(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 6), Value: value(i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// Two franz-go consumers share a group: every record is consumed, the
// partitions are split between them, offsets are committed, and a third
// consumer of the same group starting later resumes after the commits.
func TestGroupConsumersSplitAndResume(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, groupTweak)
	admin := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, admin, "g1", 6, 3, nil)
	const n = 600

	var (
		mu   sync.Mutex
		seen = map[string]int{}
		by   = map[int]map[int32]bool{}
		read changefeed.Feed // signalled after each record is counted
	)
	consume := func(id int, stop <-chan struct{}, done chan<- struct{}) *kgo.Client {
		cl := newClient(t, c, kgo.ConsumerGroup("grp"), kgo.ConsumeTopics("g1"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.FetchMaxWait(200*time.Millisecond))
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				fs := cl.PollFetches(ctx)
				cancel()
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)]++
					if by[id] == nil {
						by[id] = map[int32]bool{}
					}
					by[id][r.Partition] = true
					mu.Unlock()
					read.Signal()
				})
				if fs.NumRecords() > 0 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					if err := cl.CommitUncommittedOffsets(ctx); err != nil {
						t.Logf("consumer %d commit: %v", id, err)
					}
					cancel()
				}
			}
		}()
		return cl
	}
	stop := make(chan struct{})
	d1, d2 := make(chan struct{}), make(chan struct{})
	c1 := consume(1, stop, d1)
	c2 := consume(2, stop, d2)
	// The group settles with both members owning partitions.
	waitFor(t, "a stable group of two with three partitions each", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dg, err := kadm.NewClient(admin).DescribeGroups(ctx, "grp")
		if err != nil {
			return false
		}
		g := dg["grp"]
		if g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		for _, m := range g.Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok || len(ca.Topics) != 1 || len(ca.Topics[0].Partitions) != 3 {
				return false
			}
		}
		return true
	}, c.sources()...)
	produceValues(t, admin, "g1", 0, n)
	waitFor(t, "both consumers to read every record", 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n && len(by) == 2
	}, &read)
	close(stop)
	<-d1
	<-d2
	c1.Close() // leaves the group
	c2.Close()
	// No rebalance happened while the records flowed: each was read once,
	// and no partition was read by both members.
	for v, k := range seen {
		if k != 1 {
			t.Errorf("%s read %d times", v, k)
		}
	}
	for p := range by[1] {
		if by[2][p] {
			t.Errorf("partition %d read by both members", p)
		}
	}

	// Commits are visible through OffsetFetch: every partition at its end.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(t, "committed offsets at the log end", 30*time.Second, func() bool {
		offs, err := kadm.NewClient(admin).FetchOffsets(ctx, "grp")
		if err != nil {
			return false
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum == n
	}, c.sources()...)

	// A later member resumes after the commits: only new records arrive.
	produceValues(t, admin, "g1", n, 60)
	late := newClient(t, c, kgo.ConsumerGroup("grp"), kgo.ConsumeTopics("g1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	for len(got) < 60 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		fs := late.PollFetches(ctx)
		cancel()
		if err := fs.Err0(); err != nil {
			t.Fatalf("late consumer: %v (%d records)", err, len(got))
		}
		fs.EachRecord(func(r *kgo.Record) {
			var i int
			fmt.Sscanf(string(r.Value), "record-%d", &i)
			if i < n {
				t.Fatalf("late consumer read %s, committed before it joined", r.Value)
			}
			got[string(r.Value)] = true
		})
	}
}

// The wire answers the coordinator gives outside a happy path.
func TestGroupWireErrors(t *testing.T) {
	c := startCluster(t, []string{"az1"}, groupTweak)
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Transactions: a clean, non-retriable error.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType = 1
	fc.CoordinatorKeys = []string{"txn"}
	fr, err := fc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := fr.Coordinators[0].ErrorCode; got != kerr.InvalidRequest.Code {
		t.Fatalf("transaction coordinator: error %d, want INVALID_REQUEST", got)
	}
	// A group key: this broker, with __consumer_offsets created (RF capped
	// to the one broker), internal in Metadata.
	fc = kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"a", "b"}
	if fr, err = fc.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for _, co := range fr.Coordinators {
		if co.ErrorCode != 0 || co.NodeID != 1 {
			t.Fatalf("coordinator of %q: %+v", co.Key, co)
		}
	}
	ts, ok := c.ctrl.Topic(OffsetsTopic)
	if !ok || len(ts.Partitions) != 5 || len(ts.Partitions[0].Replicas) != 1 || ts.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("__consumer_offsets: %+v", ts)
	}
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	name := OffsetsTopic
	mt.Topic = &name
	md.Topics = append(md.Topics, mt)
	mr, err := md.RequestWith(ctx, cl)
	if err != nil || len(mr.Topics) != 1 || !mr.Topics[0].IsInternal {
		t.Fatalf("metadata of __consumer_offsets: %v %+v", err, mr)
	}

	// JoinGroup v4+: MEMBER_ID_REQUIRED first; a bad session timeout.
	join := func(member string, session int32) *kmsg.JoinGroupResponse {
		jg := kmsg.NewPtrJoinGroupRequest()
		jg.Group, jg.MemberID, jg.ProtocolType = "wire", member, "consumer"
		jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = session, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0}
		jg.Protocols = append(jg.Protocols, p)
		r, err := jg.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := join("", 1000); r.ErrorCode != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("session 1s: error %d", r.ErrorCode)
	}
	if d, _ := c.broker(1).groups.coord.Describe("wire"); d.State != group.Dead {
		t.Fatalf("a refused first join left a group behind: %+v", d)
	}
	r := join("", 10000)
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		t.Fatalf("first join: %+v", r)
	}
	r = join(r.MemberID, 10000)
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != r.MemberID {
		t.Fatalf("second join: %+v", r)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "wire", r.MemberID, 7
	hr, err := hb.RequestWith(ctx, cl)
	if err != nil || hr.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat of generation 7: %v %+v", err, hr)
	}
	// A commit with the wrong generation; then DeleteGroups of a non-empty group.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.MemberID, oc.Generation = "wire", r.MemberID, 9
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = OffsetsTopic
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Offset = 1
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	or, err := oc.RequestWith(ctx, cl)
	if err != nil || or.Topics[0].Partitions[0].ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("commit of generation 9: %v %+v", err, or)
	}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"wire", "nosuch"}
	dr, err := dg.RequestWith(ctx, cl)
	if err != nil || dr.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code || dr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete groups: %v %+v", err, dr)
	}
	// NOT_COORDINATOR: a coordinator that does not lead the partition.
	b := c.broker(1)
	p := group.PartitionFor("wire", 5)
	b.groups.coord.Resigned(p)
	if got := b.groups.coord.Heartbeat("wire", r.MemberID, "", 1); got != kerr.NotCoordinator {
		t.Fatalf("heartbeat after resigning: %v", got)
	}
}

// The coordinator moves with leadership of the group's __consumer_offsets
// partition: after the controller elects another replica, the new leader
// loads the group and its offsets from its replicated log, answers for
// the group, and the old one answers NOT_COORDINATOR.
func TestCoordinatorMovesWithLeadership(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, groupTweak)
	admin := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, admin, "mv", 6, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(admin)
	fc := adm.FindGroupCoordinators(ctx, "mover")
	if err := fc["mover"].Err; err != nil {
		t.Fatal(err)
	}
	old := fc["mover"].NodeID
	offsets := kadm.Offsets{}
	for p := range int32(6) {
		offsets.Add(kadm.Offset{Topic: "mv", Partition: p, At: int64(10 + p), LeaderEpoch: -1})
	}
	if resp, err := adm.CommitOffsets(ctx, "mover", offsets); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	tp := TopicPartition{Topic: OffsetsTopic, Partition: group.PartitionFor("mover", 5)}
	ts, _ := c.ctrl.Topic(OffsetsTopic)
	var next int32 = -1
	for _, r := range ts.Partitions[tp.Partition].Replicas {
		if r != old {
			next = r
			break
		}
	}
	// The new leader must have the commit in its log before it leads
	// (acks=all answered once the ISR had it).
	if _, err := c.ctrl.ElectLeader(tp, next); err != nil {
		t.Fatal(err)
	}
	if got := c.broker(old).groups.coord.Heartbeat("mover", "m", "", 0); got != kerr.NotCoordinator {
		t.Fatalf("old coordinator after the move: %v", got)
	}
	waitFor(t, "FindCoordinator to name the new leader", 10*time.Second, func() bool {
		fc := adm.FindGroupCoordinators(ctx, "mover")
		return fc["mover"].Err == nil && fc["mover"].NodeID == next
	}, c.sources()...)
	var fetched kadm.OffsetResponses
	waitFor(t, "the new coordinator to load", 10*time.Second, func() bool {
		var err error
		fetched, err = adm.FetchOffsets(ctx, "mover")
		return err == nil && fetched.Error() == nil
	}, c.sources()...)
	for p := range int32(6) {
		if o, ok := fetched.Lookup("mv", p); !ok || o.At != int64(10+p) {
			t.Fatalf("offset of mv-%d on the new coordinator: %+v (ok %v)", p, o, ok)
		}
	}
}

// ListGroups, OffsetDelete and DeleteGroups as admin tools use them.
func TestGroupAdminAPIs(t *testing.T) {
	c := startCluster(t, []string{"az1"}, groupTweak)
	cl := newClient(t, c)
	createTopic(t, cl, "a1", 2, 1, nil)
	createTopic(t, cl, "a2", 2, 1, nil)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"a1", 0}, {"a1", 1}, {"a2", 0}} {
		offs.Add(kadm.Offset{Topic: tp.topic, Partition: tp.p, At: 5, LeaderEpoch: -1})
	}
	if r, err := adm.CommitOffsets(ctx, "adm", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := lg["adm"]; !ok || g.State != "Empty" {
		t.Fatalf("ListGroups: %+v", lg)
	}
	ds := kadm.TopicsSet{}
	ds.Add("a1", 0, 1)
	dr, err := adm.DeleteOffsets(ctx, "adm", ds)
	if err != nil || dr.Error() != nil {
		t.Fatalf("OffsetDelete: %v %v", err, dr.Error())
	}
	got, err := adm.FetchOffsets(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Lookup("a1", 0); ok {
		t.Fatalf("a1-0 still committed after OffsetDelete: %+v", got)
	}
	if o, ok := got.Lookup("a2", 0); !ok || o.At != 5 {
		t.Fatalf("a2-0 lost by an OffsetDelete of a1: %+v", got)
	}

	// A member subscribed to a2: its offsets stay.
	m := newClient(t, c, kgo.ConsumerGroup("adm"), kgo.ConsumeTopics("a2"))
	waitFor(t, "the member to join", 20*time.Second, func() bool {
		m.PollFetches(ctxTimeout(100 * time.Millisecond))
		dg, err := adm.DescribeGroups(ctx, "adm")
		return err == nil && dg["adm"].State == "Stable"
	}, c.sources()...)
	ds = kadm.TopicsSet{}
	ds.Add("a2", 0)
	dr, err = adm.DeleteOffsets(ctx, "adm", ds)
	if err != nil {
		t.Fatal(err)
	}
	if e := dr["a2"][0]; !errors.Is(e, kerr.GroupSubscribedToTopic) {
		t.Fatalf("OffsetDelete of a subscribed topic: %v", e)
	}
	if r, err := adm.DeleteGroups(ctx, "adm"); err != nil || !errors.Is(r["adm"].Err, kerr.NonEmptyGroup) {
		t.Fatalf("DeleteGroups of a live group: %v %+v", err, r)
	}
	m.Close() // leaves
	waitFor(t, "the group to empty", 20*time.Second, func() bool {
		dg, err := adm.DescribeGroups(ctx, "adm")
		return err == nil && dg["adm"].State == "Empty"
	}, c.sources()...)
	if r, err := adm.DeleteGroups(ctx, "adm"); err != nil || r["adm"].Err != nil {
		t.Fatalf("DeleteGroups: %v %+v", err, r)
	}
	got, err = adm.FetchOffsets(ctx, "adm")
	if err != nil || len(got) != 0 {
		t.Fatalf("offsets of a deleted group: %v %+v", err, got)
	}
}

func ctxTimeout(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	time.AfterFunc(d, cancel)
	return ctx
}

// __consumer_offsets made with another partition count than this broker's
// offsets.topic.num.partitions: groups map onto the topic's partitions,
// so FindCoordinator and the coordinator agree.
func TestOffsetsTopicPartitionCountFromTheTopic(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, groupTweak) // 5 configured
	ts, err := c.ctrl.CreateTopic(TopicSpec{Name: OffsetsTopic, Partitions: 7, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": "compact"}})
	if err != nil {
		t.Fatal(err)
	}
	if ts.Partitions[4].Leader == ts.Partitions[5].Leader {
		t.Fatal("partitions 4 and 5 must be led by different brokers")
	}
	cl := newClient(t, c, kgo.ConsumerGroup("grp-7"), kgo.ConsumeTopics("s7"))
	createTopic(t, cl, "s7", 1, 1, nil)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// "grp-7" maps to partition 4 of 5 and to 5 of 7.
	if group.PartitionFor("grp-7", 5) == group.PartitionFor("grp-7", 7) {
		t.Fatal("pick a group id that maps differently")
	}
	waitFor(t, "the consumer to join", 20*time.Second, func() bool {
		cl.PollFetches(ctxTimeout(100 * time.Millisecond))
		dg, err := adm.DescribeGroups(ctx, "grp-7")
		return err == nil && dg["grp-7"].State == "Stable"
	}, c.sources()...)
}

// The coordinator loads from a compacted __consumer_offsets: after the
// log cleaner kept only the latest commit of each partition (on every
// replica), a new leader finds the latest offsets.
func TestCoordinatorLoadsCompactedOffsets(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2", "az1"}, groupTweak)
	// Small segments, so that the cleaner has closed segments to clean.
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: OffsetsTopic, Partitions: 5, ReplicationFactor: 3,
		Configs: map[string]string{"cleanup.policy": "compact", "segment.bytes": "2048"}}); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c)
	createTopic(t, cl, "cmp", 3, 1, nil)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const commits = 200
	for i := range commits {
		offs := kadm.Offsets{}
		for p := range int32(3) {
			offs.Add(kadm.Offset{Topic: "cmp", Partition: p, At: int64(i*10) + int64(p), LeaderEpoch: -1})
		}
		if r, err := adm.CommitOffsets(ctx, "compacted", offs); err != nil || r.Error() != nil {
			t.Fatalf("commit %d: %v %v", i, err, r.Error())
		}
	}
	tp := TopicPartition{Topic: OffsetsTopic, Partition: group.PartitionFor("compacted", 5)}
	ts, _ := c.ctrl.Topic(OffsetsTopic)
	ps := ts.Partitions[tp.Partition]
	var in, out int64
	for _, b := range c.brokers {
		waitFor(t, fmt.Sprintf("broker %d to replicate every commit", b.cfg.BrokerID), 10*time.Second, func() bool {
			l, ok := b.PartitionLog(tp)
			return ok && l.HighWatermark() >= commits*3
		}, c.sources()...)
		for _, r := range b.CleanLogs() {
			if r.Partition == tp {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				in, out = in+r.Stats.RecordsIn, out+r.Stats.RecordsOut
			}
		}
	}
	if in == 0 || out >= in {
		t.Fatalf("the cleaner did not compact __consumer_offsets: %d records in, %d out", in, out)
	}
	t.Logf("cleaner: %d records in, %d out over three replicas", in, out)
	var next int32 = -1
	for _, r := range ps.Replicas {
		if r != ps.Leader {
			next = r
			break
		}
	}
	if _, err := c.ctrl.ElectLeader(tp, next); err != nil {
		t.Fatal(err)
	}
	var fetched kadm.OffsetResponses
	waitFor(t, "the new coordinator to load", 10*time.Second, func() bool {
		var err error
		fetched, err = adm.FetchOffsets(ctx, "compacted")
		return err == nil && fetched.Error() == nil
	}, c.sources()...)
	for p := range int32(3) {
		if o, ok := fetched.Lookup("cmp", p); !ok || o.At != int64((commits-1)*10)+int64(p) {
			t.Fatalf("cmp-%d after compaction and a leader change: %+v (ok %v)", p, o, ok)
		}
	}
}

// A member that stops heartbeating is removed by the coordinator's timer
// loop after its session timeout (no request arrives to notice). The
// broker runs on a manual clock: the session lapses when the test moves
// it, not before.
func TestSessionTimeoutOnTheTimerLoop(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := startCluster(t, []string{"az1"}, func(cfg *Config) {
		groupTweak(cfg)
		cfg.Groups.MinSessionTimeout = 100 * time.Millisecond
		cfg.Clock = clk
	})
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "lapse", "consumer", 300, 1000
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = "range", []byte{1}
	jg.Protocols = append(jg.Protocols, jp)
	jr, err := jg.RequestWith(ctx, cl)
	if err == nil && jr.ErrorCode == kerr.MemberIDRequired.Code {
		jg.MemberID = jr.MemberID
		jr, err = jg.RequestWith(ctx, cl)
	}
	if err != nil || jr.ErrorCode != 0 {
		t.Fatalf("join: %v %+v", err, jr)
	}
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.MemberID, sg.Generation = "lapse", jr.MemberID, jr.Generation
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = jr.MemberID, []byte("a")
	sg.GroupAssignment = append(sg.GroupAssignment, sa)
	if sr, err := sg.RequestWith(ctx, cl); err != nil || sr.ErrorCode != 0 || string(sr.MemberAssignment) != "a" {
		t.Fatalf("sync: %v %+v", err, sr)
	}
	coord := c.broker(1).groups.coord
	if d, _ := coord.Describe("lapse"); d.State != group.Stable {
		t.Fatalf("after sync: %s", d.State)
	}
	// 1 ms before the session ends nothing is due: the loop's own pass,
	// run here so that the check does not race it.
	clk.Advance(299 * time.Millisecond)
	coord.ExpireDue()
	if d, _ := coord.Describe("lapse"); d.State != group.Stable {
		t.Fatalf("%s after 299 ms, before its 300 ms session", d.State)
	}
	clk.Advance(2 * time.Millisecond)
	waitFor(t, "the session to lapse", 10*time.Second, func() bool {
		d, _ := coord.Describe("lapse")
		return d.State == group.Empty
	}, c.sources()...)
}

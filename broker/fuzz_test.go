package broker

import (
	"encoding/binary"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameOf encodes req as a request frame body (without the size prefix).
func frameOf(req kmsg.Request, version int16, corr int32) []byte {
	req.SetVersion(version)
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "fuzz"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func seedFrames() [][]byte {
	var out [][]byte
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "fuzz", "1"
	out = append(out, frameOf(av, 3, 1), frameOf(av, 0, 1), frameOf(av, 9, 1))
	md := kmsg.NewPtrMetadataRequest()
	out = append(out, frameOf(md, 9, 2), frameOf(md, 1, 2))
	mt := kmsg.NewMetadataRequestTopic()
	name := "t"
	mt.Topic = &name
	md.Topics = append(md.Topics, mt)
	out = append(out, frameOf(md, 9, 2))
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 10
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic = "t"
	prp := kmsg.NewProduceRequestTopicPartition()
	prp.Records = kafkalogtest.MakeBatch(0, 0, [][]byte{[]byte("v")}, 1)
	prt.Partitions = append(prt.Partitions, prp)
	pr.Topics = append(pr.Topics, prt)
	out = append(out, frameOf(pr, 9, 3), frameOf(pr, 3, 3))
	pr.Acks = 0
	out = append(out, frameOf(pr, 7, 3))
	fr := kmsg.NewPtrFetchRequest()
	fr.ReplicaID, fr.MaxWaitMillis, fr.MinBytes, fr.MaxBytes, fr.Rack = -1, 10, 1, 1<<20, "az2"
	frt := kmsg.NewFetchRequestTopic()
	frt.Topic = "t"
	frp := kmsg.NewFetchRequestTopicPartition()
	frp.PartitionMaxBytes = 1 << 20
	frt.Partitions = append(frt.Partitions, frp)
	fr.Topics = append(fr.Topics, frt)
	out = append(out, frameOf(fr, 12, 4), frameOf(fr, 4, 4))
	fr.ReplicaID = 2
	out = append(out, frameOf(fr, 12, 4))
	lo := kmsg.NewPtrListOffsetsRequest()
	lot := kmsg.NewListOffsetsRequestTopic()
	lot.Topic = "t"
	lop := kmsg.NewListOffsetsRequestTopicPartition()
	lop.Timestamp = -3
	lot.Partitions = append(lot.Partitions, lop)
	lo.Topics = append(lo.Topics, lot)
	out = append(out, frameOf(lo, 7, 5), frameOf(lo, 1, 5))
	out = append(out, frameOf(kmsg.NewPtrInitProducerIDRequest(), 4, 6))
	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "new", 2, 1
	ct.Topics = append(ct.Topics, ctt)
	out = append(out, frameOf(ct, 5, 7), frameOf(ct, 2, 7))
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dcr := kmsg.NewDescribeConfigsRequestResource()
	dcr.ResourceType, dcr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	dc.Resources = append(dc.Resources, dcr)
	out = append(out, frameOf(dc, 4, 8), frameOf(dc, 0, 8))
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oet := kmsg.NewOffsetForLeaderEpochRequestTopic()
	oet.Topic = "t"
	oet.Partitions = append(oet.Partitions, kmsg.NewOffsetForLeaderEpochRequestTopicPartition())
	oe.Topics = append(oe.Topics, oet)
	out = append(out, frameOf(oe, 4, 9), frameOf(oe, 2, 9))
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g"}
	out = append(out, frameOf(fc, 4, 11), frameOf(fc, 0, 11))
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis = "g", "consumer", 10000
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name = "range"
	jg.Protocols = append(jg.Protocols, jp)
	out = append(out, frameOf(jg, 9, 12), frameOf(jg, 0, 12))
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.MemberID = "g", "m"
	out = append(out, frameOf(sg, 5, 13))
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = "g", "m"
	out = append(out, frameOf(hb, 4, 14))
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g", -1
	oct := kmsg.NewOffsetCommitRequestTopic()
	oct.Topic = "t"
	oct.Partitions = append(oct.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	oc.Topics = append(oc.Topics, oct)
	out = append(out, frameOf(oc, 9, 15), frameOf(oc, 0, 15))
	of := kmsg.NewPtrOffsetFetchRequest()
	ofg := kmsg.NewOffsetFetchRequestGroup()
	ofg.Group = "g"
	of.Groups = append(of.Groups, ofg)
	out = append(out, frameOf(of, 9, 16))
	of.Group = "g"
	out = append(out, frameOf(of, 1, 17))
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Group = "g"
	lg.Members = append(lg.Members, kmsg.NewLeaveGroupRequestMember())
	out = append(out, frameOf(lg, 5, 18))
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g"}
	out = append(out, frameOf(dg, 5, 19), frameOf(kmsg.NewPtrListGroupsRequest(), 5, 20))
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	out = append(out, frameOf(del, 2, 21), frameOf(od, 0, 22))
	// Topic administration.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "t", 2
	cp.Topics = append(cp.Topics, cpt)
	cp.ValidateOnly = true
	out = append(out, frameOf(cp, 3, 31), frameOf(cp, 0, 31))
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iacr := kmsg.NewIncrementalAlterConfigsRequestResource()
	iacr.ResourceType, iacr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	iacc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	seg := "1048576"
	iacc.Name, iacc.Value = "segment.bytes", &seg
	iacr.Configs = append(iacr.Configs, iacc)
	iac.Resources = append(iac.Resources, iacr)
	out = append(out, frameOf(iac, 1, 32), frameOf(iac, 0, 32))
	ac := kmsg.NewPtrAlterConfigsRequest()
	acr := kmsg.NewAlterConfigsRequestResource()
	acr.ResourceType, acr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	acc := kmsg.NewAlterConfigsRequestResourceConfig()
	acc.Name, acc.Value = "retention.ms", &seg
	acr.Configs = append(acr.Configs, acc)
	ac.Resources = append(ac.Resources, acr)
	ac.ValidateOnly = true
	out = append(out, frameOf(ac, 2, 33), frameOf(ac, 0, 33))
	dcl := kmsg.NewPtrDescribeClusterRequest()
	dcl.EndpointType = 1
	out = append(out, frameOf(dcl, 1, 34), frameOf(dcl, 0, 34))
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"nope"}
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	nope := "nope"
	dtt.Topic = &nope
	dt.Topics = append(dt.Topics, dtt)
	out = append(out, frameOf(dt, 6, 35), frameOf(dt, 0, 35))
	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "t"
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drp.Offset = -1
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics = append(dr.Topics, drt)
	out = append(out, frameOf(dr, 2, 36), frameOf(dr, 0, 36))
	out = append(out, frameOf(kmsg.NewPtrDescribeACLsRequest(), 1, 23)) // a key kwal does not serve
	out = append(out, []byte{0, 99, 0, 0, 0, 0, 0, 1, 0xff, 0xff})      // unknown key
	return out
}

// FuzzHandleFrame feeds arbitrary request frames to a broker: it must
// never panic (handleFrame turns a panic into a closed connection, which
// this target reports as a failure) and must answer or close.
func FuzzHandleFrame(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	c := startCluster(f, []string{"az1", "az2"}, func(cfg *Config) {
		cfg.Logger = quietLogger()
		cfg.MaxTopicPartitions = 2 // each partition is a directory of files
		cfg.DisableAutoCreateTopics = true
	})
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 2}); err != nil {
		f.Fatal(err)
	}
	b := c.brokers[0]
	f.Fuzz(func(t *testing.T, frame []byte) {
		cs := &connState{remote: "fuzz", noWait: true}
		panicked := true
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic escaped handleFrame: %v", r)
				}
			}()
			resp, _ := b.handleFrame(cs, frame)
			if resp != nil && int(binary.BigEndian.Uint32(resp)) != len(resp)-4 {
				t.Fatalf("response frame size %d for %d bytes", binary.BigEndian.Uint32(resp), len(resp)-4)
			}
			panicked = false
		}()
		if panicked {
			t.Fatal("handler panicked")
		}
	})
}

// Every seed frame of a supported key decodes and is answered.
func TestSeedFramesAnswered(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2"}, func(cfg *Config) { cfg.Logger = quietLogger() })
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	b := c.brokers[0]
	for i, frame := range seedFrames() {
		key := int16(binary.BigEndian.Uint16(frame))
		version := int16(binary.BigEndian.Uint16(frame[2:]))
		cs := &connState{remote: "test", noWait: true}
		resp, keep := b.handleFrame(cs, frame)
		isAcks0 := key == apiKeyProduce && version == 7
		switch {
		case key == 99:
			if keep || resp != nil {
				t.Errorf("seed %d: unknown key kept the connection", i)
			}
		case key == 29:
			// Known to kmsg, not served: the connection is closed, as
			// Kafka closes it for a key or version it has not enabled.
			if keep || resp != nil {
				t.Errorf("seed %d: a key kwal does not serve kept the connection", i)
			}
		case isAcks0:
			if resp != nil {
				t.Errorf("seed %d: acks=0 produce answered", i)
			}
		case resp == nil:
			t.Errorf("seed %d: key %d v%d not answered", i, key, version)
		case int32(binary.BigEndian.Uint32(resp[4:])) != int32(binary.BigEndian.Uint32(frame[4:])):
			t.Errorf("seed %d: correlation id not echoed", i)
		}
	}
}

// FuzzParsePartitionMetadata: a partition.metadata file is outside bytes
// (a disk, an operator); parsing never panics, and what it accepts names a
// topic id that formats back to itself.
func FuzzParsePartitionMetadata(f *testing.F) {
	f.Add([]byte("version: 0\ntopic_id: " + newTopicID().String() + "\n"))
	f.Add([]byte("topic_id: zz\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := parsePartitionMetadata(data)
		if err != nil {
			return
		}
		if back, err := parseTopicID(id.String()); err != nil || back != id {
			t.Fatalf("id %s does not round-trip: %v %v", id, back, err)
		}
	})
}

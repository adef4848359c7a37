package broker

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every advertised key and version has a handler and decodes: a request
// at each version gets an answer of that version.
func TestAdvertisedVersionsAreServed(t *testing.T) {
	for _, r := range apiRanges {
		req := kmsg.RequestForKey(r.key)
		if req == nil {
			t.Fatalf("key %d advertised but unknown to kmsg", r.key)
		}
		if r.max > req.MaxVersion() {
			t.Fatalf("%s advertised up to v%d, kmsg encodes v%d", kmsg.NameForKey(r.key), r.max, req.MaxVersion())
		}
	}
	c := startCluster(t, []string{"az1"}, groupTweak)
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "v", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	wc, err := dialWire(func(n, a string, d time.Duration) (net.Conn, error) { return net.DialTimeout(n, a, d) }, c.seeds()[0], "versions", 5*time.Second, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.close()
	for _, r := range apiRanges {
		if r.key == apiKeyProduce || r.key == apiKeyFetch || r.key == apiKeyJoinGroup || r.key == apiKeySyncGroup {
			continue // these need bodies (below) or wait; their paths have tests of their own
		}
		for v := r.min; v <= r.max; v++ {
			req := kmsg.RequestForKey(r.key)
			req.SetVersion(v)
			resp, err := wc.roundTrip(req, time.Now().Add(10*time.Second))
			if err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(r.key), v, err)
			}
			if resp.GetVersion() != v {
				t.Fatalf("%s v%d answered at v%d", kmsg.NameForKey(r.key), v, resp.GetVersion())
			}
		}
	}
}

// Metadata v0 asks for every topic with an empty list (v1+: null); it
// used to get none.
func TestMetadataV0ListsEveryTopic(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	for _, n := range []string{"m1", "m2"} {
		if _, err := c.ctrl.CreateTopic(TopicSpec{Name: n, Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	wc, err := dialWire(func(n, a string, d time.Duration) (net.Conn, error) { return net.DialTimeout(n, a, d) }, c.seeds()[0], "v0", 5*time.Second, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.close()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 0
	resp, err := wc.roundTrip(req, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(resp.(*kmsg.MetadataResponse).Topics); got != 2 {
		t.Fatalf("Metadata v0 with no topics listed %d topics, want 2", got)
	}
}

// kafka39 is every key kwal serves with the range a Kafka 3.9 broker
// advertises (validVersions in clients/src/main/resources/common/message
// at tag 3.9.0), written out independently of apiRanges.
var kafka39 = map[int16][2]int16{
	0: {0, 11}, 1: {0, 17}, 2: {0, 9}, 3: {0, 12}, 8: {0, 9}, 9: {0, 9}, 10: {0, 6}, 11: {0, 9},
	12: {0, 4}, 13: {0, 5}, 14: {0, 5}, 15: {0, 5}, 16: {0, 5}, 18: {0, 4}, 19: {0, 7}, 20: {0, 6},
	21: {0, 2}, 22: {0, 5}, 23: {0, 4}, 32: {0, 4}, 33: {0, 2}, 37: {0, 3}, 42: {0, 2}, 44: {0, 1},
	47: {0, 0}, 60: {0, 1}, 17: {0, 1}, 36: {0, 2},
}

// The ranges on the wire are Kafka 3.9's, key by key, and nothing else is
// advertised.
func TestApiVersionsAreKafka39(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	wc := dialTest(t, c)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		resp, err := wc.roundTrip(req, time.Now().Add(5*time.Second))
		if err != nil {
			t.Fatalf("ApiVersions v%d: %v", v, err)
		}
		r := resp.(*kmsg.ApiVersionsResponse)
		if r.ErrorCode != 0 || len(r.ApiKeys) != len(kafka39) {
			t.Fatalf("ApiVersions v%d: error %d, %d keys, want %d", v, r.ErrorCode, len(r.ApiKeys), len(kafka39))
		}
		for _, k := range r.ApiKeys {
			want, ok := kafka39[k.ApiKey]
			if !ok || k.MinVersion != want[0] || k.MaxVersion != want[1] {
				t.Errorf("ApiVersions v%d: %s %d-%d, Kafka 3.9 has %v", v, kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, want)
			}
		}
	}
}

func dialTest(t *testing.T, c *testCluster) *wireClient {
	t.Helper()
	wc, err := dialWire(func(n, a string, d time.Duration) (net.Conn, error) { return net.DialTimeout(n, a, d) }, c.seeds()[0], "test", 5*time.Second, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wc.close)
	return wc
}

// A version outside a key's range closes the connection, as Kafka's
// SocketServer does; ApiVersions above v4 is answered at v0 with
// UNSUPPORTED_VERSION and the ranges (KIP-511).
func TestUnsupportedVersionClosesConnection(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	for _, tc := range []struct{ key, version int16 }{{apiKeyProduce, 12}, {apiKeyFetch, 18}, {apiKeyMetadata, 13}, {apiKeyDescribeGroups, 6}, {apiKeyDeleteGroups, 3}} {
		wc := dialTest(t, c)
		req := kmsg.RequestForKey(tc.key)
		req.SetVersion(tc.version)
		if resp, err := wc.roundTrip(req, time.Now().Add(5*time.Second)); err == nil {
			t.Fatalf("%s v%d answered (%T) instead of closing", kmsg.NameForKey(tc.key), tc.version, resp)
		}
	}
	wc := dialTest(t, c)
	// ApiVersions v5, as a newer client sends it: header v2, a v4 body.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 4
	frame := []byte{0, 0, 0, 0, 0, 18, 0, 5, 0, 0, 0, 7, 0, 1, 'x', 0}
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if err := wc.conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := wc.conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(wc.conn, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(wc.conn, body); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != len(kafka39) {
		t.Fatalf("ApiVersions v5: error %d with %d keys, want UNSUPPORTED_VERSION and the ranges", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// legacyMessage is one magic 0/1 message (kmsg's encoding, crc filled).
func legacyMessage(magic int8, attrs int8, ts int64, key, value []byte) []byte {
	var b []byte
	if magic == 0 {
		m := kmsg.MessageV0{Magic: 0, Attributes: attrs, Key: key, Value: value}
		b = m.AppendTo(nil)
	} else {
		m := kmsg.MessageV1{Magic: 1, Attributes: attrs, Timestamp: ts, Key: key, Value: value}
		b = m.AppendTo(nil)
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[16:]))
	return b
}

func produceAt(t *testing.T, wc *wireClient, v int16, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = v, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := wc.roundTrip(req, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func fetchAt(t *testing.T, wc *wireClient, v int16, topic string, id TopicID, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.MaxWaitMillis = v, 1<<20, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := wc.roundTrip(req, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch v%d: %d topics", v, len(fr.Topics))
	}
	if v >= 13 && TopicID(fr.Topics[0].TopicID) != id {
		t.Fatalf("Fetch v%d answered topic id %x, asked %x", v, fr.Topics[0].TopicID, id)
	}
	return fr.Topics[0].Partitions[0]
}

// Produce v0-2 up-convert legacy message sets (compressed ones too) and
// take v2 batches as they are; v3+ refuse a message set; Fetch v0-3
// down-convert what is stored to magic 0 (v0-1) or 1 (v2-3), and every
// version from v0 to v17 reads back the same records.
func TestOldProduceAndFetchVersions(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "old", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	ts, _ := c.ctrl.Topic("old")
	wc := dialTest(t, c)
	type rec struct {
		key, value string
		ts         int64
	}
	var want []rec
	// v0: one magic 0 message; v1: a gzip wrapper of two magic 1 messages;
	// v2: a v2 batch; v2: a magic 1 message.
	if p := produceAt(t, wc, 0, "old", legacyMessage(0, 0, 0, []byte("k0"), []byte("v0"))); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("Produce v0 of a magic 0 message: error %d at %d", p.ErrorCode, p.BaseOffset)
	}
	want = append(want, rec{"k0", "v0", -1})
	inner := append(legacyMessage(1, 0, 1111, []byte("k1"), []byte("v1")), legacyMessage(1, 0, 1112, nil, []byte("v2"))...)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(inner)
	zw.Close()
	if p := produceAt(t, wc, 1, "old", legacyMessage(1, 1, 1112, nil, gz.Bytes())); p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("Produce v1 of a gzip magic 1 wrapper: error %d at %d", p.ErrorCode, p.BaseOffset)
	}
	want = append(want, rec{"k1", "v1", 1111}, rec{"", "v2", 1112})
	if p := produceAt(t, wc, 2, "old", kafkalogtest.MakeBatch(0, 0, [][]byte{[]byte("v3")}, 1113)); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("Produce v2 of a v2 batch: error %d at %d", p.ErrorCode, p.BaseOffset)
	}
	want = append(want, rec{"", "v3", 1113})
	if p := produceAt(t, wc, 2, "old", legacyMessage(1, 0, 1114, []byte("k4"), []byte("v4"))); p.ErrorCode != 0 || p.BaseOffset != 4 {
		t.Fatalf("Produce v2 of a magic 1 message: error %d at %d", p.ErrorCode, p.BaseOffset)
	}
	want = append(want, rec{"k4", "v4", 1114})
	if p := produceAt(t, wc, 3, "old", legacyMessage(1, 0, 1, nil, []byte("x"))); p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("Produce v3 of a message set: error %d, want INVALID_RECORD", p.ErrorCode)
	}
	bad := legacyMessage(1, 0, 1, nil, []byte("x"))
	bad[len(bad)-1] ^= 1
	if p := produceAt(t, wc, 2, "old", bad); p.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("Produce v2 of a message with a bad crc: error %d, want CORRUPT_MESSAGE", p.ErrorCode)
	}

	for v := int16(0); v <= 17; v++ {
		p := fetchAt(t, wc, v, "old", ts.ID, 0)
		if p.ErrorCode != 0 || p.HighWatermark != int64(len(want)) {
			t.Fatalf("Fetch v%d: error %d, high watermark %d", v, p.ErrorCode, p.HighWatermark)
		}
		var got []rec
		if v < 4 {
			magic := int8(1)
			if v < 2 {
				magic = 0
			}
			for rest := p.RecordBatches; len(rest) > 0; {
				size := int(binary.BigEndian.Uint32(rest[8:])) + 12
				m := rest[:size]
				if m[16] != byte(magic) || binary.BigEndian.Uint32(m[12:]) != crc32.ChecksumIEEE(m[16:]) {
					t.Fatalf("Fetch v%d: magic %d (want %d) or bad crc", v, m[16], magic)
				}
				var m1 kmsg.MessageV1
				if magic == 0 {
					var m0 kmsg.MessageV0
					if err := m0.ReadFrom(m); err != nil {
						t.Fatal(err)
					}
					m1 = kmsg.MessageV1{Offset: m0.Offset, Key: m0.Key, Value: m0.Value, Timestamp: -1}
				} else if err := m1.ReadFrom(m); err != nil {
					t.Fatal(err)
				}
				if m1.Offset != int64(len(got)) {
					t.Fatalf("Fetch v%d: message %d at offset %d", v, len(got), m1.Offset)
				}
				got = append(got, rec{string(m1.Key), string(m1.Value), m1.Timestamp})
				rest = rest[size:]
			}
		} else {
			err := kafkalog.SplitBatches(p.RecordBatches, func(h kafkalog.BatchHeader, batch []byte) error {
				if h.Magic != 2 {
					t.Fatalf("Fetch v%d: magic %d", v, h.Magic)
				}
				return kafkalog.EachRecord(batch, func(r kafkalog.Record) {
					got = append(got, rec{string(r.Key), string(r.Value), r.Timestamp})
				})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("Fetch v%d: %d records, want %d", v, len(got), len(want))
		}
		for i := range want {
			w := want[i]
			if v < 2 {
				w.ts = -1
			}
			if got[i] != w {
				t.Fatalf("Fetch v%d record %d: %+v, want %+v", v, i, got[i], w)
			}
		}
	}
}

// Topic ids: created with the topic, answered by Metadata v10+ and
// CreateTopics v7, asked for by Metadata v12 and Fetch v13+; after a
// delete and recreate the old id gets UNKNOWN_TOPIC_ID and the new one
// reads the new topic.
func TestTopicIDs(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	wc := dialTest(t, c)
	create := func() TopicID {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = 7, 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "ids", 1, 1
		req.Topics = append(req.Topics, rt)
		resp, err := wc.roundTrip(req, time.Now().Add(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		st := resp.(*kmsg.CreateTopicsResponse).Topics[0]
		if st.ErrorCode != 0 || TopicID(st.TopicID).IsZero() {
			t.Fatalf("CreateTopics v7: error %d, topic id %x", st.ErrorCode, st.TopicID)
		}
		ts, _ := c.ctrl.Topic("ids")
		if ts.ID != TopicID(st.TopicID) {
			t.Fatalf("CreateTopics answered id %x, the controller has %s", st.TopicID, ts.ID)
		}
		return ts.ID
	}
	metadata := func(v int16, name *string, id TopicID) kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic, rt.TopicID = name, id
		req.Topics = append(req.Topics, rt)
		resp, err := wc.roundTrip(req, time.Now().Add(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.MetadataResponse).Topics[0]
	}
	name := "ids"
	old := create()
	for v := int16(10); v <= 12; v++ {
		if mt := metadata(v, &name, TopicID{}); mt.ErrorCode != 0 || TopicID(mt.TopicID) != old {
			t.Fatalf("Metadata v%d by name: error %d, id %x, want %s", v, mt.ErrorCode, mt.TopicID, old)
		}
	}
	if mt := metadata(12, nil, old); mt.ErrorCode != 0 || mt.Topic == nil || *mt.Topic != "ids" {
		t.Fatalf("Metadata v12 by id: %+v", mt)
	}
	if mt := metadata(11, nil, old); mt.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("Metadata v11 by id: error %d, want INVALID_REQUEST", mt.ErrorCode)
	}
	if p := produceAt(t, wc, 11, "ids", kafkalogtest.MakeBatch(0, 0, [][]byte{[]byte("first")}, 1)); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	if p := fetchAt(t, wc, 13, "", old, 0); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("Fetch v13 by id: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}

	if _, err := c.ctrl.DeleteTopic("ids", TopicID{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted partition to leave the broker", 10*time.Second, func() bool {
		return c.brokers[0].partition(TopicPartition{Topic: "ids"}) == nil
	}, c.sources()...)
	recreated := create()
	if recreated == old {
		t.Fatal("a recreated topic kept its id")
	}
	for _, v := range []int16{13, 17} {
		if p := fetchAt(t, wc, v, "", old, 0); p.ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("Fetch v%d of the deleted topic's id: error %d, want UNKNOWN_TOPIC_ID", v, p.ErrorCode)
		}
	}
	if mt := metadata(12, nil, old); mt.ErrorCode != kerr.UnknownTopicID.Code || mt.Topic != nil {
		t.Fatalf("Metadata v12 of the deleted id: %+v", mt)
	}
	waitFor(t, "the recreated partition", 10*time.Second, func() bool {
		p := c.brokers[0].partition(TopicPartition{Topic: "ids"})
		return p != nil && p.topicID == recreated
	}, c.sources()...)
	if p := fetchAt(t, wc, 17, "", recreated, 0); p.ErrorCode != 0 || p.HighWatermark != 0 {
		t.Fatalf("Fetch v17 of the recreated topic: error %d, high watermark %d", p.ErrorCode, p.HighWatermark)
	}
}

// ListOffsets v0 answers offset lists; v8-9's earliest-local (-4) is the
// log start and latest-tiered (-5) is -1 (no KIP-405 tiered storage).
func TestListOffsetsOldAndNewTimestamps(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "lo", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	wc := dialTest(t, c)
	for i := range 3 {
		if p := produceAt(t, wc, 9, "lo", kafkalogtest.MakeBatch(0, 0, [][]byte{[]byte("x")}, int64(1000+i))); p.ErrorCode != 0 {
			t.Fatalf("produce: %d", p.ErrorCode)
		}
	}
	list := func(v int16, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = v, -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.MaxNumOffsets, rp.CurrentLeaderEpoch = ts, 1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := wc.roundTrip(req, time.Now().Add(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		ts   int64
		want []int64
	}{{-1, []int64{3}}, {-2, []int64{0}}, {1001, []int64{1}}, {5000, []int64{}}} {
		p := list(0, tc.ts)
		if p.ErrorCode != 0 || !slices.Equal(p.OldStyleOffsets, tc.want) {
			t.Errorf("ListOffsets v0 at %d: error %d offsets %v, want %v", tc.ts, p.ErrorCode, p.OldStyleOffsets, tc.want)
		}
	}
	if p := list(8, -4); p.ErrorCode != 0 || p.Offset != 0 {
		t.Errorf("ListOffsets v8 earliest-local: error %d offset %d, want 0", p.ErrorCode, p.Offset)
	}
	if p := list(9, -5); p.ErrorCode != 0 || p.Offset != -1 || p.LeaderEpoch != -1 {
		t.Errorf("ListOffsets v9 latest-tiered: error %d offset %d epoch %d, want -1 -1", p.ErrorCode, p.Offset, p.LeaderEpoch)
	}
}

// The internal topics are never auto-created by a Metadata request: a
// client asking early must not give them default configs.
func TestInternalTopicsNotAutoCreated(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	wc := dialTest(t, c)
	for _, name := range []string{RemoteWALMetadataTopic, OffsetsTopic} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = 12, true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		resp, err := wc.roundTrip(req, time.Now().Add(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if mt := resp.(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("Metadata of %s with auto-creation: error %d, want UNKNOWN_TOPIC_OR_PARTITION", name, mt.ErrorCode)
		}
		if _, ok := c.ctrl.Topic(name); ok {
			t.Errorf("%s was auto-created", name)
		}
	}
}

package broker

import (
	"net"
	"testing"
	"time"

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

// Produce v0-2 (advertised for librdkafka's codec detection) append
// RecordBatch v2 and refuse v0/v1 message sets with a typed error.
func TestProduceOldVersions(t *testing.T) {
	c := startCluster(t, []string{"az1"}, nil)
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "old", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	wc, err := dialWire(func(n, a string, d time.Duration) (net.Conn, error) { return net.DialTimeout(n, a, d) }, c.seeds()[0], "old", 5*time.Second, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.close()
	produce := func(v int16, records []byte) kmsg.ProduceResponseTopicPartition {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = v, 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "old"
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
	for v := int16(0); v <= 2; v++ {
		p := produce(v, kafkalogtest.MakeBatch(0, 0, [][]byte{[]byte("x")}, 1))
		if p.ErrorCode != 0 || p.BaseOffset != int64(v) {
			t.Fatalf("Produce v%d of a v2 batch: error %d at %d", v, p.ErrorCode, p.BaseOffset)
		}
	}
	// A message set v1: offset, size, crc, magic 1, attributes, timestamp, key, value.
	msg := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 22, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0}
	if p := produce(2, msg); p.ErrorCode != kerr.UnsupportedForMessageFormat.Code {
		t.Fatalf("Produce v2 of a v1 message set: error %d, want UNSUPPORTED_FOR_MESSAGE_FORMAT", p.ErrorCode)
	}
}

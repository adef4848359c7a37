package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawFetch sends req on a fresh connection and returns the whole response
// frame, size prefix included: the bytes a client receives.
func rawFetch(t *testing.T, addr string, req *kmsg.FetchRequest, corr int32) []byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return rawFetchOn(t, c, req, corr)
}

// rawFetchOn is rawFetch on a connection already made (TLS, say); it
// closes c.
func rawFetchOn(t *testing.T, c net.Conn, req *kmsg.FetchRequest, corr int32) []byte {
	t.Helper()
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	body := []byte{0, 0, 0, 0}
	body = binary.BigEndian.AppendUint16(body, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(req.GetVersion()))
	body = binary.BigEndian.AppendUint32(body, uint32(corr))
	body = binary.BigEndian.AppendUint16(body, 4)
	body = append(body, "test"...)
	if req.IsFlexible() {
		body = append(body, 0)
	}
	body = req.AppendTo(body)
	binary.BigEndian.PutUint32(body, uint32(len(body)-4))
	if _, err := c.Write(body); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
	copy(frame, size[:])
	if _, err := io.ReadFull(c, frame[4:]); err != nil {
		t.Fatal(err)
	}
	return frame
}

type fetchCase struct {
	version          int16
	offsets          [2]int64 // per partition
	partMax, respMax int32
}

func (fc fetchCase) request(topic string) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(fc.version)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, fc.respMax
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p, off := range fc.offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), off, fc.partMax
		rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// TestFetchZeroCopyByteIdentical: the sendfile path and the copying path
// put the same bytes on the wire, for flexible and non-flexible versions,
// fetch offsets inside batches, partition and response limits smaller
// than a batch, several segments, and an empty partition; the zero-copy
// path is really taken (its counters move) and the copying one is not.
func TestFetchZeroCopyByteIdentical(t *testing.T) {
	c := startCluster(t, []string{"a"}, func(cfg *Config) { cfg.SegmentBytes = 64 << 10 })
	cl := newClient(t, c, kgo.ProducerLinger(0), kgo.MaxBufferedRecords(50), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const topic = "zc"
	createTopic(t, cl, topic, 2, 1, map[string]string{"segment.bytes": "65536"})
	const n = 400
	produceZC(t, cl, topic, n)
	b := c.brokers[0]
	p := b.partition(TopicPartition{Topic: topic, Partition: 0})
	if segs := len(p.log.Segments()); segs < 3 {
		t.Fatalf("want several segments, got %d", segs)
	}
	leo := p.log.LogEndOffset()
	var cases []fetchCase
	for _, v := range []int16{4, 11, 12} {
		for _, off := range []int64{0, 1, 57, leo / 2, leo - 1, leo} {
			for _, lim := range [][2]int32{{1 << 20, 50 << 20}, {1, 50 << 20}, {3000, 5000}, {64 << 10, 1}} {
				cases = append(cases, fetchCase{version: v, offsets: [2]int64{off, 0}, partMax: lim[0], respMax: lim[1]})
			}
		}
	}
	run := func() [][]byte {
		var out [][]byte
		for i, fc := range cases {
			out = append(out, rawFetch(t, c.brokers[0].Addr(), fc.request(topic), int32(i)))
		}
		return out
	}
	zc := run()
	b = c.brokers[0]
	sections, sent := b.events.zeroCopySections.Load(), b.events.zeroCopyBytes.Load()
	if sections == 0 || sent == 0 {
		t.Fatalf("zero-copy path not taken: %d sections, %d bytes", sections, sent)
	}
	// A franz-go consumer on the zero-copy path reads every record intact.
	consumeEvery(t, c, topic, n)
	if b.events.zeroCopyBytes.Load() == sent {
		t.Fatal("the franz-go consumer's fetches did not use the zero-copy path")
	}

	c.stopBroker(t, 0)
	c.brokers[0].cfg.ZeroCopyFetchDisabled = true
	c.startBroker(t, 0)
	cp := run()
	if got := c.brokers[0].events.zeroCopyBytes.Load(); got != 0 {
		t.Fatalf("copying path sent %d bytes with sendfile", got)
	}
	for i := range cases {
		if !bytes.Equal(zc[i], cp[i]) {
			t.Errorf("case %+v: zero-copy response (%d bytes) differs from the copying one (%d bytes)", cases[i], len(zc[i]), len(cp[i]))
		}
	}
	// The responses carry records (the comparison is not of empty answers).
	var withRecords int
	for i, fc := range cases {
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(fc.version)
		body := cp[i][8:]
		if resp.IsFlexible() {
			body = body[1:]
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("case %d: decode: %v", i, err)
		}
		if len(resp.Topics[0].Partitions[0].RecordBatches) > 0 {
			withRecords++
		}
	}
	if withRecords < len(cases)/2 {
		t.Fatalf("only %d of %d responses carry records", withRecords, len(cases))
	}
	consumeEvery(t, c, topic, n)
}

// produceZC writes n records to partition 0 of topic, ten a batch:
// batches of a few KiB, many per 64 KiB segment (consumeEvery checks them).
func produceZC(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n; i += 10 {
		var rs []*kgo.Record
		for j := i; j < i+10; j++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Value: bytes.Repeat([]byte{byte(j)}, 100+(j*37)%1500)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFetchSendfileOnlyWithoutTLS: on a broker with PLAINTEXT, SSL and
// SASL_PLAINTEXT listeners, fetches of a topic spread over several
// segments take the sendfile path on PLAINTEXT and SASL_PLAINTEXT (the
// stream is not wrapped) and the copying path on SSL, where every byte
// must be encrypted; the bytes a client decrypts are the same as on
// PLAINTEXT. Before connState.sendfile a TLS connection was sent a frame
// prepared for sendfile, which it cannot take, and was closed: the TLS
// consumer below never got a record.
func TestFetchSendfileOnlyWithoutTLS(t *testing.T) {
	pki := newTestPKI(t, "kwal-zc-ca")
	_, users := testUsers(t)
	c := startCluster(t, []string{"a"}, func(cfg *Config) {
		cfg.SegmentBytes = 64 << 10
		srv, err := TLSSettings{KeystoreLocation: pki.issue(t, "zc-broker")}.ServerConfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listeners = []ListenerConfig{
			{Name: "PLAIN", Addr: "127.0.0.1:0", Protocol: ProtocolPlaintext},
			{Name: "SSL", Addr: "127.0.0.1:0", Protocol: ProtocolSSL, TLS: srv},
			{Name: "SASL", Addr: "127.0.0.1:0", Protocol: ProtocolSASLPlaintext, SASLMechanisms: []string{mechScramSHA256}},
		}
		cfg.InterBrokerListenerName = "PLAIN"
		cfg.SASLCredentials = users
	})
	const topic, n = "zc-tls", 400
	cl := newClient(t, c, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(t, cl, topic, 2, 1, map[string]string{"segment.bytes": "65536"})
	produceZC(t, cl, topic, n)
	b := c.brokers[0]
	if segs := len(b.partition(TopicPartition{Topic: topic, Partition: 0}).log.Segments()); segs < 3 {
		t.Fatalf("want several segments, got %d", segs)
	}
	sslAddr := listenerSeeds(t, c, "SSL")[0]
	clientTLS := &tls.Config{RootCAs: pki.pool}
	cases := []fetchCase{
		{version: 4, offsets: [2]int64{0, 0}, partMax: 1 << 20, respMax: 50 << 20},
		{version: 11, offsets: [2]int64{57, 0}, partMax: 3000, respMax: 5000},
		{version: 12, offsets: [2]int64{200, 0}, partMax: 64 << 10, respMax: 1},
		{version: 12, offsets: [2]int64{0, 0}, partMax: 1 << 20, respMax: 50 << 20},
	}
	zeroCopied := func() int64 { return b.events.zeroCopyBytes.Load() }
	for i, fc := range cases {
		before := zeroCopied()
		plain := rawFetch(t, b.Addr(), fc.request(topic), int32(i))
		if zeroCopied() == before {
			t.Fatalf("case %+v: the PLAINTEXT fetch did not use sendfile", fc)
		}
		before = zeroCopied()
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", sslAddr, clientTLS.Clone())
		if err != nil {
			t.Fatal(err)
		}
		over := rawFetchOn(t, conn, fc.request(topic), int32(i))
		if got := zeroCopied() - before; got != 0 {
			t.Fatalf("case %+v: %d bytes went with sendfile on a TLS connection", fc, got)
		}
		if !bytes.Equal(plain, over) {
			t.Errorf("case %+v: the TLS response (%d bytes) differs from the PLAINTEXT one (%d bytes)", fc, len(over), len(plain))
		}
		if len(plain) < 1000 {
			t.Errorf("case %+v: a response of %d bytes carries no records", fc, len(plain))
		}
	}
	before := zeroCopied()
	consumeEvery(t, c, topic, n, kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(clientTLS))
	if got := zeroCopied() - before; got != 0 {
		t.Fatalf("the TLS consumer's fetches sent %d bytes with sendfile", got)
	}
	consumeEvery(t, c, topic, n, kgo.SeedBrokers(listenerSeeds(t, c, "SASL")...), kgo.SASL(clientSASL(mechScramSHA256, testUser, testPassword)))
	if zeroCopied() == before {
		t.Fatal("the SASL_PLAINTEXT consumer's fetches did not use sendfile")
	}
}

// consumeEvery consumes topic from the start with franz-go and checks
// every record of partition 0 (as produced above).
func consumeEvery(t *testing.T, c *testCluster, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	cl := newClient(t, c, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(100 << 10)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			i := int(r.Offset)
			want := bytes.Repeat([]byte{byte(i)}, 100+(i*37)%1500)
			if !bytes.Equal(r.Value, want) {
				t.Errorf("offset %d: value of %d bytes differs", r.Offset, len(r.Value))
			}
			got++
		})
	}
	if got != n {
		t.Fatal(fmt.Sprintf("consumed %d of %d", got, n))
	}
}

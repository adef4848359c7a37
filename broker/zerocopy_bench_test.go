package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkFetchZeroCopy: one consumer connection fetching 1 MiB of 1 KiB
// records a request from a one-broker, RF 1 log over loopback, with the
// sendfile path and with the copying path (same run). The client reads
// each response into one reused buffer. CPU is the whole process's
// (broker and client together), so compare ns/op and MB/s between the
// two sub-benchmarks, not against another broker.
func BenchmarkFetchZeroCopy(b *testing.B) {
	for _, mode := range []struct {
		name     string
		disabled bool
	}{{"sendfile", false}, {"copy", true}} {
		b.Run(mode.name, func(b *testing.B) {
			c := startCluster(b, []string{"a"}, func(cfg *Config) {
				cfg.ZeroCopyFetchDisabled = mode.disabled
				cfg.Logger = quietLogger()
			})
			cl := newClient(b, c, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
			const topic = "zcb"
			createTopic(b, cl, topic, 1, 1, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			v := bytes.Repeat([]byte("x"), 1024)
			for range 8 {
				rs := make([]*kgo.Record, 1024)
				for i := range rs {
					rs[i] = &kgo.Record{Topic: topic, Value: v}
				}
				if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
			conn, err := net.Dial("tcp", c.brokers[0].Addr())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			req := fetchCase{version: 12, offsets: [2]int64{0, 0}, partMax: 1 << 20, respMax: 1 << 20}.request(topic)
			req.Topics[0].Partitions = req.Topics[0].Partitions[:1]
			body := []byte{0, 0, 0, 0}
			body = binary.BigEndian.AppendUint16(body, uint16(req.Key()))
			body = binary.BigEndian.AppendUint16(body, uint16(req.GetVersion()))
			body = binary.BigEndian.AppendUint32(body, 1)
			body = binary.BigEndian.AppendUint16(body, 4)
			body = append(body, "test"...)
			body = append(body, 0)
			body = req.AppendTo(body)
			binary.BigEndian.PutUint32(body, uint32(len(body)-4))
			buf := make([]byte, 2<<20)
			fetch := func() int {
				if _, err := conn.Write(body); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, buf[:4]); err != nil {
					b.Fatal(err)
				}
				n := int(binary.BigEndian.Uint32(buf[:4]))
				if _, err := io.ReadFull(conn, buf[:n]); err != nil {
					b.Fatal(err)
				}
				return n
			}
			n := fetch()
			if n < 1<<19 {
				b.Fatalf("response of %d bytes", n)
			}
			b.SetBytes(int64(n))
			b.ResetTimer()
			for b.Loop() {
				fetch()
			}
			b.StopTimer()
			b.ReportMetric(float64(c.brokers[0].events.zeroCopyBytes.Load())/float64(b.N)/float64(n), "sendfile-share")
		})
	}
}

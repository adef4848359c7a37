package broker

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog"
)

// kcat (librdkafka) produces with acks=all and idempotence, then consumes
// from the beginning of the partition without a group.
func TestKcatProduceConsume(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("SKIPPED: kcat is not installed (apt-get install -y kcat); the librdkafka interop test did not run")
	}
	// The wall clock: kcat (librdkafka, another process, with its own
	// timers) ends `-e` only on an empty answer to its fetch long poll,
	// and nothing would move a manual clock to give it one.
	c := startCluster(t, []string{"az1", "az2", "az1"}, onRealClock)
	if _, err := c.ctrl.CreateTopic(TopicSpec{Name: "kcat", Partitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	bootstrap := strings.Join(c.seeds(), ",")
	var in bytes.Buffer
	const n = 50
	for i := range n {
		fmt.Fprintf(&in, "%s\n", value(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := exec.CommandContext(ctx, kcat, "-P", "-b", bootstrap, "-t", "kcat", "-p", "0",
		"-X", "enable.idempotence=true", "-X", "acks=all")
	prod.Stdin = &in
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	cons := exec.CommandContext(ctx, kcat, "-C", "-b", bootstrap, "-t", "kcat", "-p", "0", "-o", "beginning", "-e", "-q",
		"-X", "client.rack=az2")
	out, err := cons.Output()
	if err != nil {
		t.Fatalf("kcat consume: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("kcat consumed %d records, want %d: %q", len(lines), n, out)
	}
	for i, l := range lines {
		if l != string(value(i)) {
			t.Fatalf("record %d: %q", i, l)
		}
	}
}

// librdkafka reads codec support from the API versions a broker
// advertises (LZ4 needs FindCoordinator v0, ZSTD Produce v7): with kwal's
// ranges kcat sends gzip, snappy, lz4 and zstd batches compressed, and
// reads them back.
func TestKcatCompressionNegotiated(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("SKIPPED: kcat is not installed (apt-get install -y kcat); the librdkafka codec test did not run")
	}
	c := startCluster(t, []string{"az1"}, onRealClock) // kcat's long polls: see TestKcatProduceConsume
	bootstrap := strings.Join(c.seeds(), ",")
	for codec, id := range map[string]int8{"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4} {
		t.Run(codec, func(t *testing.T) {
			topic := "kcat-" + codec
			if _, err := c.ctrl.CreateTopic(TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 1}); err != nil {
				t.Fatal(err)
			}
			var in bytes.Buffer
			const n = 200
			for i := range n {
				fmt.Fprintf(&in, "%s %s\n", value(i), strings.Repeat("z", 100))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			prod := exec.CommandContext(ctx, kcat, "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-z", codec)
			prod.Stdin = &in
			if out, err := prod.CombinedOutput(); err != nil || bytes.Contains(out, []byte("does not support")) {
				t.Fatalf("kcat -P -z %s: %v\n%s", codec, err, out)
			}
			l, _ := c.broker(1).PartitionLog(TopicPartition{Topic: topic, Partition: 0})
			data, err := l.Read(0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			h, err := kafkalog.ParseBatchHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			if h.Compression() != id {
				t.Fatalf("kcat -z %s stored a batch with codec %d, want %d", codec, h.Compression(), id)
			}
			out, err := exec.CommandContext(ctx, kcat, "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q").Output()
			if err != nil {
				t.Fatalf("kcat -C: %v", err)
			}
			if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != n {
				t.Fatalf("read back %d records, want %d", len(lines), n)
			}
		})
	}
}

package broker

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// kcat (librdkafka) produces with acks=all and idempotence, then consumes
// from the beginning of the partition without a group.
func TestKcatProduceConsume(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("SKIPPED: kcat is not installed (apt-get install -y kcat); the librdkafka interop test did not run")
	}
	c := startCluster(t, []string{"az1", "az2", "az1"}, nil)
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

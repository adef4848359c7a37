package rwnode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/wiretest"
)

// An S3 endpoint that refuses connections, or accepts and never answers,
// fails the start within remote.wal.storage.check.timeout.ms, naming the
// key and the URL and not the credentials.
func TestUnreachableStoreFailsFast(t *testing.T) {
	// Credentials from the environment (storeurl refuses them in URLs);
	// the error must not repeat them.
	t.Setenv("KWAL_S3_ACCESS_KEY", "AK")
	t.Setenv("KWAL_S3_SECRET_KEY", "SECRET")
	for _, ep := range []string{wiretest.RefusingAddr(t), wiretest.SilentAddr(t)} {
		url := "s3://bucket/p?endpoint=http://" + ep + "&region=us-east-1&path_style=true&max_attempts=1"
		cfg := broker.Config{LogDir: t.TempDir(), Controller: broker.NewMemController(nil, 1), Logger: quietLogger()}
		cfg.RemoteWAL.StorageURL = url
		cfg.RemoteWAL.StorageCheckTimeout = 500 * time.Millisecond
		start := time.Now()
		_, err := OpenRemoteWALParts(context.Background(), &cfg, nil)
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s: store accepted", ep)
		}
		msg := err.Error()
		if !strings.Contains(msg, "remote.wal.storage.url") || !strings.Contains(msg, ep) || strings.Contains(msg, "SECRET") {
			t.Fatalf("%s: error %q", ep, msg)
		}
		// The bound is 500 ms; allow a loaded machine ten times that.
		if took > 5*time.Second {
			t.Fatalf("%s: took %v", ep, took)
		}
	}
}

package integration

import (
	"context"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/kwal/kwal/objstore/s3store"
)

func testLogger(t *testing.T) *slog.Logger {
	lvl := slog.LevelWarn
	if os.Getenv("KWAL_TEST_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: lvl}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// stores returns the backends a test runs on: mem always, and s3 against
// versitygw when scripts/test-env.sh provides it (skipped loudly otherwise).
func stores() []struct {
	name string
	open func(t *testing.T) objstore.Store
} {
	return []struct {
		name string
		open func(t *testing.T) objstore.Store
	}{
		{"mem", func(t *testing.T) objstore.Store { return mem.New() }},
		{"s3-versitygw", func(t *testing.T) objstore.Store {
			env := objstoretest.S3Env(t)
			s, err := s3store.New(context.Background(), s3store.Config{
				Bucket: env.Bucket, Prefix: "it-" + objstoretest.RandomPrefix(), Endpoint: env.Endpoint,
				Region: "us-east-1", PathStyle: true, AccessKey: env.AccessKey, SecretKey: env.SecretKey, CreateBucket: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
}

func mustBatch(t *testing.T) []byte {
	t.Helper()
	return kafkalogtest.MakeBatchN(0, 3, 1, 100, time.Now().UnixMilli())
}

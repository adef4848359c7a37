package miniostore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/miniostore"
	"github.com/kwal/kwal/objstore/objstoretest"
)

func envStore(t testing.TB) *miniostore.Store {
	e := objstoretest.S3Env(t)
	u, err := url.Parse(e.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	s, err := miniostore.New(context.Background(), miniostore.Config{
		Endpoint: u.Host, Secure: u.Scheme == "https", Bucket: e.Bucket, Prefix: objstoretest.RandomPrefix(),
		AccessKey: e.AccessKey, SecretKey: e.SecretKey, CreateBucket: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAcceptance(t *testing.T) {
	objstoretest.S3Env(t)
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return envStore(t) })
}

func BenchmarkLatency(b *testing.B) {
	objstoretest.BenchLatency(b, envStore(b))
}

// TestRetriesSlowDown: a server that answers 503 SlowDown twice and then
// accepts the PUT sees three requests, and the Put succeeds.
func TestRetriesSlowDown(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>injected</Message></Error>`)
			return
		}
		if r.Method == http.MethodPut && r.Header.Get("If-None-Match") == "*" {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusPreconditionFailed)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>exists</Message></Error>`)
			return
		}
		w.Header().Set("ETag", `"e"`)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	s, err := miniostore.New(context.Background(), miniostore.Config{Endpoint: u.Host, Bucket: "bkt", AccessKey: "k", SecretKey: "s", MaxRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), "k", []byte("x"), objstore.PutOptions{}); err != nil {
		t.Fatalf("Put after two SlowDowns: %v", err)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("server saw %d requests, want 3", got)
	}
	err = s.Put(context.Background(), "k", []byte("x"), objstore.PutOptions{IfNoneMatch: true})
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("412: %v, want ErrExists", err)
	}
}

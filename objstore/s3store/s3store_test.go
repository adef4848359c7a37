package s3store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/kwal/kwal/objstore/s3store"
)

func envStore(t testing.TB, directory bool) *s3store.Store {
	e := objstoretest.S3Env(t)
	s, err := s3store.New(context.Background(), s3store.Config{
		Bucket: e.Bucket, Prefix: objstoretest.RandomPrefix(), Endpoint: e.Endpoint,
		PathStyle: true, AccessKey: e.AccessKey, SecretKey: e.SecretKey,
		DirectoryBucket: directory, CreateBucket: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAcceptance(t *testing.T) {
	objstoretest.S3Env(t)
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return envStore(t, false) })
}

// TestAcceptanceDirectoryBucketListing runs the suite with the S3 Express
// listing mode forced on, against a general-purpose server.
func TestAcceptanceDirectoryBucketListing(t *testing.T) {
	objstoretest.S3Env(t)
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return envStore(t, true) })
}

func BenchmarkLatency(b *testing.B) {
	objstoretest.BenchLatency(b, envStore(b, false))
}

// fakeS3 answers the first `failures` requests with an S3 error, then
// serves a tiny in-memory bucket (enough for the requests the tests make).
type fakeS3 struct {
	mu struct {
		sync.Mutex
		requests int
		failures int
		failCode int
		failName string
		objects  map[string][]byte
	}
}

func newFake(failures, code int, name string) (*fakeS3, *httptest.Server) {
	f := &fakeS3{}
	f.mu.failures, f.mu.failCode, f.mu.failName = failures, code, name
	f.mu.objects = map[string][]byte{}
	srv := httptest.NewServer(f)
	return f, srv
}

func (f *fakeS3) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.requests
}

func writeErr(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.requests++
	if f.mu.failures > 0 {
		f.mu.failures--
		writeErr(w, f.mu.failCode, f.mu.failName)
		return
	}
	key := r.URL.Path
	switch r.Method {
	case http.MethodPut:
		if _, ok := f.mu.objects[key]; ok && r.Header.Get("If-None-Match") == "*" {
			writeErr(w, http.StatusPreconditionFailed, "PreconditionFailed")
			return
		}
		f.mu.objects[key] = body
		w.Header().Set("ETag", `"e"`)
	case http.MethodGet, http.MethodHead:
		obj, ok := f.mu.objects[key]
		if !ok {
			if r.Method == http.MethodHead {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			writeErr(w, http.StatusNotFound, "NoSuchKey")
			return
		}
		if r.Header.Get("Range") != "" {
			var a, b int
			if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err != nil || a >= len(obj) {
				writeErr(w, http.StatusRequestedRangeNotSatisfiable, "InvalidRange")
				return
			}
			b = min(b, len(obj)-1)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, len(obj)))
			w.Header().Set("Content-Length", fmt.Sprint(b-a+1))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(obj[a : b+1])
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(obj)))
		w.Header().Set("Last-Modified", time.Unix(0, 0).UTC().Format(http.TimeFormat))
		if r.Method == http.MethodGet {
			w.Write(obj)
		}
	default:
		writeErr(w, http.StatusNotImplemented, "NotImplemented")
	}
}

func fakeStore(t *testing.T, srv *httptest.Server, attempts int) *s3store.Store {
	t.Helper()
	t.Cleanup(srv.Close)
	s, err := s3store.New(context.Background(), s3store.Config{
		Bucket: "b", Endpoint: srv.URL, PathStyle: true, AccessKey: "k", SecretKey: "s",
		MaxAttempts: attempts, MaxBackoff: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRetriesSlowDownAndInternalError(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{{503, "SlowDown"}, {500, "InternalError"}} {
		t.Run(tc.code, func(t *testing.T) {
			f, srv := newFake(2, tc.status, tc.code)
			s := fakeStore(t, srv, 3)
			ctx := context.Background()
			if err := s.Put(ctx, "k", []byte("hello"), objstore.PutOptions{IfNoneMatch: true}); err != nil {
				t.Fatalf("Put after two %d answers: %v", tc.status, err)
			}
			if got := f.requests(); got != 3 {
				t.Fatalf("server saw %d requests, want 3 (two failures and a success)", got)
			}
			got, err := s.GetRange(ctx, "k", 1, 3)
			if err != nil || string(got) != "ell" {
				t.Fatalf("GetRange = %q, %v", got, err)
			}
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	f, srv := newFake(10, 503, "SlowDown")
	s := fakeStore(t, srv, 3)
	err := s.Put(context.Background(), "k", []byte("x"), objstore.PutOptions{})
	if err == nil {
		t.Fatal("Put succeeded although every attempt was refused")
	}
	if f.requests() != 3 {
		t.Fatalf("server saw %d requests, want MaxAttempts=3", f.requests())
	}
	for _, s := range []error{objstore.ErrExists, objstore.ErrNotFound, objstore.ErrInvalidRange} {
		if errors.Is(err, s) {
			t.Fatalf("503 mapped to %v", s)
		}
	}
}

func TestErrorMapping(t *testing.T) {
	_, srv := newFake(0, 0, "")
	s := fakeStore(t, srv, 1)
	ctx := context.Background()
	if err := s.Put(ctx, "k", []byte("abc"), objstore.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", []byte("abc"), objstore.PutOptions{IfNoneMatch: true}); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("412: %v, want ErrExists", err)
	}
	if _, err := s.GetRange(ctx, "missing", 0, 1); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("404 NoSuchKey: %v, want ErrNotFound", err)
	}
	if _, err := s.Head(ctx, "missing"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("HEAD 404: %v, want ErrNotFound", err)
	}
	if _, err := s.GetRange(ctx, "k", 3, 1); !errors.Is(err, objstore.ErrInvalidRange) {
		t.Errorf("416: %v, want ErrInvalidRange", err)
	}
}

func TestConditionalRequestConflictIsExists(t *testing.T) {
	_, srv := newFake(1, http.StatusConflict, "ConditionalRequestConflict")
	s := fakeStore(t, srv, 1)
	err := s.Put(context.Background(), "k", []byte("x"), objstore.PutOptions{IfNoneMatch: true})
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("409 ConditionalRequestConflict: %v, want ErrExists", err)
	}
}

func TestConfigValidate(t *testing.T) {
	c := s3store.Config{Bucket: "kwal--use1-az4--x-s3", Prefix: "p"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !c.DirectoryBucket || c.Prefix != "p/" || c.Region != "us-east-1" || c.MaxAttempts != 5 {
		t.Fatalf("Validate filled %+v", c)
	}
	for _, bad := range []s3store.Config{{}, {Bucket: "b", AccessKey: "k"}, {Bucket: "b", Prefix: "/x"}, {Bucket: "b", MaxAttempts: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", bad)
		}
	}
}

package storeurl_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fsstore"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/miniostore"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/kwal/kwal/objstore/s3store"
	"github.com/kwal/kwal/objstore/storeurl"
)

func noEnv(string) string { return "" }

func keysEnv(k string) string {
	return map[string]string{"KWAL_S3_ACCESS_KEY": "a", "KWAL_S3_SECRET_KEY": "b"}[k]
}

// Credentials in the URL are refused, whatever else the URL holds.
func TestOpenRefusesCredentialsInURL(t *testing.T) {
	for _, u := range []string{
		"s3://bkt/p?endpoint=http://127.0.0.1:1&access_key=a&secret_key=b",
		"s3://bkt?secret_key=b", "minio://127.0.0.1:1/bkt?access_key=a&secret_key=b",
	} {
		_, err := storeurl.Open(context.Background(), u, storeurl.WithGetenv(keysEnv))
		if !errors.Is(err, storeurl.ErrCredentialsInURL) {
			t.Errorf("Open(%q): %v, want ErrCredentialsInURL", u, err)
		}
		if err != nil && (strings.Contains(err.Error(), "=a") || strings.Contains(err.Error(), "=b")) {
			t.Errorf("error repeats the credentials: %v", err)
		}
	}
}

func TestOpenSchemes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct {
		url  string
		want any
	}{
		{"mem://", (*mem.Store)(nil)},
		{"mem://?arena=1048576&gets=pooled", (*mem.Store)(nil)},
		{"mem://?arena=0&gets=lent", (*mem.Store)(nil)},
		{"file://" + dir, (*fsstore.Store)(nil)},
		{"s3://bkt/some/prefix?endpoint=http://127.0.0.1:1&path_style=true", (*s3store.Store)(nil)},
		{"s3://kwal--use1-az4--x-s3/p?region=us-east-1", (*s3store.Store)(nil)},
		{"minio://127.0.0.1:1/bkt/prefix?secure=false", (*miniostore.Store)(nil)},
	} {
		s, err := storeurl.Open(ctx, tc.url, storeurl.WithGetenv(keysEnv))
		if err != nil {
			t.Errorf("Open(%q): %v", tc.url, err)
			continue
		}
		switch tc.want.(type) {
		case *mem.Store:
			_, ok := s.(*mem.Store)
			if !ok {
				t.Errorf("Open(%q) = %T", tc.url, s)
			}
		case *fsstore.Store:
			if fs, ok := s.(*fsstore.Store); !ok || fs.Root() != dir {
				t.Errorf("Open(%q) = %T", tc.url, s)
			}
		case *s3store.Store:
			if _, ok := s.(*s3store.Store); !ok {
				t.Errorf("Open(%q) = %T", tc.url, s)
			}
		case *miniostore.Store:
			if _, ok := s.(*miniostore.Store); !ok {
				t.Errorf("Open(%q) = %T", tc.url, s)
			}
		}
	}
}

func TestOpenRejects(t *testing.T) {
	for _, u := range []string{
		"gcs://bucket", "mem://?x=1", "mem://?arena=-1", "mem://?arena=1GiB", "mem://?arena=99999999999999",
		"mem://?gets=copy", "s3://bkt?bogus=1", "s3://bkt?path_style=maybe",
		"s3:///prefix", "minio://host:1/", "file://",
	} {
		if _, err := storeurl.Open(context.Background(), u, storeurl.WithGetenv(noEnv)); err == nil {
			t.Errorf("Open(%q) succeeded", u)
		}
	}
}

// The s3 and minio URLs reach the test server and behave as stores; the
// credentials come from the KWAL_S3_* environment.
func TestOpenAgainstServer(t *testing.T) {
	e := objstoretest.S3Env(t)
	ep, err := url.Parse(e.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, raw := range []string{
		"s3://" + e.Bucket + "/" + objstoretest.RandomPrefix() + "?path_style=true&endpoint=" + url.QueryEscape(e.Endpoint),
		"minio://" + ep.Host + "/" + e.Bucket + "/" + objstoretest.RandomPrefix() + "?secure=false",
	} {
		s, err := storeurl.Open(ctx, raw)
		if err != nil {
			t.Fatalf("Open(%q): %v", raw, err)
		}
		if err := s.Put(ctx, "k", []byte("v"), objstore.PutOptions{IfNoneMatch: true}); err != nil {
			t.Fatalf("%s: Put: %v", raw, err)
		}
		p, err := s.List(ctx, objstore.ListOptions{})
		if err != nil || len(p.Objects) != 1 || p.Objects[0].Key != "k" {
			t.Fatalf("%s: List = %+v, %v (prefix must be stripped)", raw, p, err)
		}
	}
}

// mem's parameters reach the store: the arena is there, and pooled GETs
// hand out copies.
func TestOpenMemParameters(t *testing.T) {
	ctx := context.Background()
	s, err := storeurl.Open(ctx, "mem://?arena=1048576&gets=pooled")
	if err != nil {
		t.Fatal(err)
	}
	m := s.(*mem.Store)
	if st := m.ArenaStats(); st.Bytes < 1<<20 {
		t.Fatalf("arena of %d bytes, want at least 1 MiB", st.Bytes)
	}
	if err := m.Put(ctx, "k", []byte("abc"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	b1, _ := m.GetRangeBody(ctx, "k", 0, -1)
	b2, _ := m.GetRangeBody(ctx, "k", 0, -1)
	if &b1.Bytes()[0] == &b2.Bytes()[0] {
		t.Fatal("two GETs share one buffer: not pooled copies")
	}
	if st := m.ArenaStats(); st.Used != 3 {
		t.Fatalf("arena used %d, want 3", st.Used)
	}
}

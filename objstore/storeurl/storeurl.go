package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/fsstore"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/miniostore"
	"github.com/kwal/kwal/objstore/s3store"
)

type options struct {
	clock      clock.Clock
	getenv     func(string) string
	httpClient *http.Client
}

// Option configures Open.
type Option func(*options)

// WithClock sets the clock of stores that stamp times themselves (mem).
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithGetenv replaces os.Getenv for reading KWAL_S3_* credentials.
func WithGetenv(f func(string) string) Option { return func(o *options) { o.getenv = f } }

// WithHTTPClient sets the HTTP client of the s3 and minio backends.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// Open returns the store rawURL names.
func Open(ctx context.Context, rawURL string, opts ...Option) (objstore.Store, error) {
	o := options{clock: clock.Real{}, getenv: os.Getenv}
	for _, f := range opts {
		f(&o)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("storeurl: %w", err)
	}
	q := u.Query()
	switch u.Scheme {
	case "mem":
		return openMem(q, o)
	case "file":
		if err := known(q); err != nil {
			return nil, err
		}
		dir := u.Path
		if u.Host != "" && u.Host != "localhost" {
			dir = filepath.Join(u.Host, u.Path) // file://relative/dir
		}
		if dir == "" {
			return nil, fmt.Errorf("storeurl: %q: no directory", rawURL)
		}
		return fsstore.New(dir)
	case "s3":
		return openS3(ctx, u, q, o)
	case "minio":
		return openMinio(ctx, u, q, o)
	}
	return nil, fmt.Errorf("storeurl: %q: unknown scheme %q (want mem, file, s3 or minio)", rawURL, u.Scheme)
}

// maxArenaBytes bounds mem's arena parameter: it is allocated and faulted
// in at once.
const maxArenaBytes = 64 << 30

// openMem opens a mem store; arena and gets=pooled make it stand in for a
// remote store in a benchmark (mem.WithArena, mem.WithPooledGets).
func openMem(q url.Values, o options) (objstore.Store, error) {
	if err := known(q, "arena", "gets"); err != nil {
		return nil, err
	}
	opts := []mem.Option{mem.WithClock(o.clock)}
	if v := q.Get("arena"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > maxArenaBytes {
			return nil, fmt.Errorf("storeurl: parameter arena=%q: want bytes from 0 to %d", v, int64(maxArenaBytes))
		}
		if n > 0 {
			opts = append(opts, mem.WithArena(n))
		}
	}
	switch v := q.Get("gets"); v {
	case "", "lent":
	case "pooled":
		opts = append(opts, mem.WithPooledGets())
	default:
		return nil, fmt.Errorf("storeurl: parameter gets=%q: want lent (a view of the stored object) or pooled (a copy into a pooled buffer)", v)
	}
	s := mem.New(opts...)
	if want, _ := strconv.ParseInt(q.Get("arena"), 10, 64); want > 0 && s.ArenaStats().Bytes < want {
		return nil, fmt.Errorf("storeurl: mem arena of %d bytes could not be mapped; ask for less (arena=) or free memory", want)
	}
	return s, nil
}

func known(q url.Values, allowed ...string) error {
	for k := range q {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("storeurl: unknown parameter %q (allowed: %s)", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

func boolParam(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("storeurl: parameter %s=%q: %w", name, v, err)
	}
	return b, nil
}

func intParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("storeurl: parameter %s=%q: %w", name, v, err)
	}
	return n, nil
}

// ErrCredentialsInURL is returned for a URL carrying access_key or
// secret_key: a URL ends up on command lines, in config files, process
// lists and logs. Credentials come from the environment instead.
var ErrCredentialsInURL = errors.New("storeurl: credentials in the URL are refused; set KWAL_S3_ACCESS_KEY and KWAL_S3_SECRET_KEY, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile or instance role) for s3")

func creds(q url.Values, o options) (string, string, error) {
	if q.Has("access_key") || q.Has("secret_key") {
		return "", "", ErrCredentialsInURL
	}
	return o.getenv("KWAL_S3_ACCESS_KEY"), o.getenv("KWAL_S3_SECRET_KEY"), nil
}

func openS3(ctx context.Context, u *url.URL, q url.Values, o options) (objstore.Store, error) {
	ak, sk, err := creds(q, o)
	if err != nil {
		return nil, err
	}
	if err := known(q, "endpoint", "region", "path_style", "directory_bucket", "max_attempts", "create_bucket"); err != nil {
		return nil, err
	}
	cfg := s3store.Config{
		Bucket:     u.Host,
		Prefix:     strings.TrimPrefix(u.Path, "/"),
		Endpoint:   q.Get("endpoint"),
		Region:     q.Get("region"),
		HTTPClient: o.httpClient,
	}
	cfg.AccessKey, cfg.SecretKey = ak, sk
	if cfg.PathStyle, err = boolParam(q, "path_style"); err != nil {
		return nil, err
	}
	if cfg.DirectoryBucket, err = boolParam(q, "directory_bucket"); err != nil {
		return nil, err
	}
	if cfg.CreateBucket, err = boolParam(q, "create_bucket"); err != nil {
		return nil, err
	}
	if cfg.MaxAttempts, err = intParam(q, "max_attempts"); err != nil {
		return nil, err
	}
	return s3store.New(ctx, cfg)
}

func openMinio(ctx context.Context, u *url.URL, q url.Values, o options) (objstore.Store, error) {
	ak, sk, err := creds(q, o)
	if err != nil {
		return nil, err
	}
	if err := known(q, "secure", "region", "max_retries", "create_bucket"); err != nil {
		return nil, err
	}
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	cfg := miniostore.Config{Endpoint: u.Host, Bucket: bucket, Prefix: prefix, Region: q.Get("region")}
	if o.httpClient != nil {
		cfg.Transport = o.httpClient.Transport
	}
	cfg.AccessKey, cfg.SecretKey = ak, sk
	if cfg.Secure, err = boolParam(q, "secure"); err != nil {
		return nil, err
	}
	if cfg.CreateBucket, err = boolParam(q, "create_bucket"); err != nil {
		return nil, err
	}
	if cfg.MaxRetries, err = intParam(q, "max_retries"); err != nil {
		return nil, err
	}
	return miniostore.New(ctx, cfg)
}

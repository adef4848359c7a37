package miniostore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/kwal/kwal/objstore"
)

// Config describes one bucket and prefix on a server.
type Config struct {
	// Endpoint is host:port, without scheme.
	Endpoint string
	Secure   bool
	Bucket   string
	// Prefix is prepended to every key; "a/b" is normalised to "a/b/".
	Prefix string
	// Region defaults to us-east-1 (set, so minio-go skips the bucket
	// location lookup).
	Region string
	// AccessKey and SecretKey are static credentials; empty means the
	// AWS_* and then MINIO_* environment variables.
	AccessKey, SecretKey string
	// MaxRetries is minio-go's attempt count per request (default 5).
	MaxRetries int
	// CreateBucket creates the bucket on New if it does not exist.
	CreateBucket bool
	// Transport replaces minio-go's default HTTP transport.
	Transport http.RoundTripper
}

// Validate fills defaults and rejects a config that cannot work.
func (c *Config) Validate() error {
	if c.Endpoint == "" || strings.Contains(c.Endpoint, "://") {
		return fmt.Errorf("miniostore: endpoint %q must be host:port", c.Endpoint)
	}
	if c.Bucket == "" {
		return errors.New("miniostore: empty bucket")
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return errors.New("miniostore: access key and secret key must be given together")
	}
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	if strings.HasPrefix(c.Prefix, "/") {
		return fmt.Errorf("miniostore: prefix %q starts with /", c.Prefix)
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 5
	}
	if c.MaxRetries < 1 {
		return fmt.Errorf("miniostore: MaxRetries %d < 1", c.MaxRetries)
	}
	return nil
}

// Store is a bucket (and prefix) reached through minio-go.
type Store struct {
	cfg    Config
	client *minio.Client
	core   minio.Core
	pool   objstore.BufferPool // GetRangeBody's buffers
}

var (
	_ objstore.Store      = (*Store)(nil)
	_ objstore.BodyGetter = (*Store)(nil)
)

// New builds the client. It makes no request unless cfg.CreateBucket is set.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{&credentials.EnvAWS{}, &credentials.EnvMinio{}})
	if cfg.AccessKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        creds,
		Secure:       cfg.Secure,
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   cfg.MaxRetries,
		Transport:    cfg.Transport,
	})
	if err != nil {
		return nil, fmt.Errorf("miniostore: %w", err)
	}
	s := &Store{cfg: cfg, client: client, core: minio.Core{Client: client}}
	if cfg.CreateBucket {
		ok, err := client.BucketExists(ctx, cfg.Bucket)
		if err == nil && !ok {
			err = client.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: cfg.Region})
			if minio.ToErrorResponse(err).Code == "BucketAlreadyOwnedByYou" {
				err = nil
			}
		}
		if err != nil {
			return nil, fmt.Errorf("miniostore: create bucket %q: %w", cfg.Bucket, err)
		}
	}
	return s, nil
}

func (s *Store) key(key string) string { return s.cfg.Prefix + key }

// Put implements objstore.Store: ErrExists when a create-only put finds the
// key.
func (s *Store) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	if key == "" {
		return fmt.Errorf("miniostore: put: empty key: %w", objstore.ErrInvalidKey)
	}
	// net/http may still read a request body after RoundTrip returns (an
	// early 412 or 503 answer), and the caller may reuse body once Put
	// returns (objstore.Store's contract): send a private copy.
	body = bytes.Clone(body)
	var po minio.PutObjectOptions
	po.DisableMultipart = true
	if opts.IfNoneMatch {
		po.SetMatchETagExcept("*")
	}
	_, err := s.client.PutObject(ctx, s.cfg.Bucket, s.key(key), bytes.NewReader(body), int64(len(body)), po)
	if err != nil {
		return fmt.Errorf("miniostore: put %q: %w", key, mapError(err))
	}
	return nil
}

// GetRange implements objstore.Store: ErrNotFound for a missing key,
// ErrInvalidRange for off at or past the end of a non-empty object.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	b, err := s.get(ctx, key, off, length, objstore.ReadBodyOwned)
	if err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// GetRangeBody implements objstore.BodyGetter: GetRange, with the body
// read into a pooled buffer that Release hands back for the next GET.
func (s *Store) GetRangeBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	return s.get(ctx, key, off, length, func(r io.Reader, size int64) (*objstore.Body, error) {
		return objstore.ReadBodyPooled(r, size, &s.pool)
	})
}

// get is GetRange with the body read by read.
func (s *Store) get(ctx context.Context, key string, off, length int64, read func(io.Reader, int64) (*objstore.Body, error)) (*objstore.Body, error) {
	if key == "" {
		return nil, fmt.Errorf("miniostore: get: empty key: %w", objstore.ErrInvalidKey)
	}
	if length == 0 && off >= 0 {
		return s.emptyBody(ctx, key, off, length)
	}
	var gopts minio.GetObjectOptions
	var err error
	switch {
	case off < 0:
		err = gopts.SetRange(0, off) // bytes=-n
	case length < 0 && off == 0:
	case length < 0:
		err = gopts.SetRange(off, 0) // bytes=off-
	default:
		err = gopts.SetRange(off, off+length-1)
	}
	if err != nil {
		return nil, fmt.Errorf("miniostore: get %q [off=%d len=%d]: %w", key, off, length, err)
	}
	rc, info, _, err := s.core.GetObject(ctx, s.cfg.Bucket, s.key(key), gopts)
	if err != nil {
		err = mapError(err)
		if errors.Is(err, objstore.ErrInvalidRange) && off <= 0 {
			return s.emptyBody(ctx, key, off, length)
		}
		return nil, fmt.Errorf("miniostore: get %q [off=%d len=%d]: %w", key, off, length, err)
	}
	defer rc.Close()
	b, err := read(rc, info.Size)
	if err != nil {
		return nil, fmt.Errorf("miniostore: get %q: read body: %w", key, err)
	}
	return b, nil
}

func (s *Store) emptyBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	b, err := s.emptyRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return objstore.NewBody(b, nil), nil
}

func (s *Store) emptyRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	info, err := s.Head(ctx, key)
	if err != nil {
		return nil, err
	}
	start, end, err := objstore.ResolveRange(info.Size, off, length)
	if err != nil {
		return nil, fmt.Errorf("miniostore: get %q [off=%d len=%d]: %w", key, off, length, err)
	}
	if start != end {
		return nil, fmt.Errorf("miniostore: get %q: object is %d bytes but the range request was refused: %w", key, info.Size, objstore.ErrInvalidRange)
	}
	return []byte{}, nil
}

// Head implements objstore.Store: ErrNotFound for a missing key.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if key == "" {
		return objstore.ObjectInfo{}, fmt.Errorf("miniostore: head: empty key: %w", objstore.ErrInvalidKey)
	}
	info, err := s.client.StatObject(ctx, s.cfg.Bucket, s.key(key), minio.StatObjectOptions{})
	if err != nil {
		return objstore.ObjectInfo{}, fmt.Errorf("miniostore: head %q: %w", key, mapError(err))
	}
	return objstore.ObjectInfo{Key: key, Size: info.Size, LastModified: info.LastModified}, nil
}

// Delete implements objstore.Store; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if key == "" {
		return fmt.Errorf("miniostore: delete: empty key: %w", objstore.ErrInvalidKey)
	}
	if err := s.client.RemoveObject(ctx, s.cfg.Bucket, s.key(key), minio.RemoveObjectOptions{}); err != nil {
		if err = mapError(err); errors.Is(err, objstore.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("miniostore: delete %q: %w", key, err)
	}
	return nil
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	if err := ctx.Err(); err != nil {
		return objstore.Page{}, fmt.Errorf("miniostore: list %q: %w", opts.Prefix, err)
	}
	limit := opts.LimitOrDefault()
	// Cancelling lctx stops minio-go's listing goroutine once the page is full.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lo := minio.ListObjectsOptions{
		Prefix:    s.key(opts.Prefix),
		Recursive: true,
		MaxKeys:   min(limit+1, objstore.DefaultListLimit),
	}
	if opts.StartAfter != "" {
		lo.StartAfter = s.key(opts.StartAfter)
	}
	var p objstore.Page
	for o := range s.client.ListObjects(lctx, s.cfg.Bucket, lo) {
		if o.Err != nil {
			if err := ctx.Err(); err != nil {
				return objstore.Page{}, fmt.Errorf("miniostore: list %q: %w", opts.Prefix, err)
			}
			return objstore.Page{}, fmt.Errorf("miniostore: list %q after %q: %w", opts.Prefix, opts.StartAfter, mapError(o.Err))
		}
		if len(p.Objects) == limit {
			p.Truncated = true
			cancel()
			break
		}
		p.Objects = append(p.Objects, objstore.ObjectInfo{
			Key: strings.TrimPrefix(o.Key, s.cfg.Prefix), Size: o.Size, LastModified: o.LastModified,
		})
	}
	if err := ctx.Err(); err != nil {
		return objstore.Page{}, fmt.Errorf("miniostore: list %q: %w", opts.Prefix, err)
	}
	return p, nil
}

func mapError(err error) error {
	r := minio.ToErrorResponse(err)
	var sentinel error
	switch {
	case r.Code == "NoSuchKey" || r.Code == "NotFound" || r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket":
		sentinel = objstore.ErrNotFound
	case r.Code == "PreconditionFailed" || r.Code == "ConditionalRequestConflict" || r.StatusCode == http.StatusPreconditionFailed:
		sentinel = objstore.ErrExists
	case r.Code == "InvalidRange" || r.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		sentinel = objstore.ErrInvalidRange
	default:
		return err
	}
	return fmt.Errorf("%w (%w)", sentinel, err)
}

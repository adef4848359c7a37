package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/kwal/kwal/objstore"
)

// Config describes one bucket and prefix.
type Config struct {
	Bucket string
	// Prefix is prepended to every key; "a/b" is normalised to "a/b/".
	Prefix string
	// Endpoint is the base URL of an S3-compatible server
	// (http://127.0.0.1:9000); empty means AWS.
	Endpoint string
	// Region defaults to us-east-1.
	Region string
	// PathStyle addresses buckets as http://host/bucket/key, which most
	// S3-compatible servers need.
	PathStyle bool
	// AccessKey and SecretKey are static credentials; empty means the
	// SDK's default chain (AWS_* environment, shared config, instance role).
	AccessKey, SecretKey, SessionToken string
	// MaxAttempts is the number of attempts per request, retries included
	// (default 5).
	MaxAttempts int
	// MaxBackoff caps the jittered exponential backoff (default 2s).
	MaxBackoff time.Duration
	// DirectoryBucket forces the S3 Express listing mode; it is on
	// automatically for bucket names ending in "--x-s3".
	DirectoryBucket bool
	// CreateBucket creates the bucket on New if it does not exist.
	CreateBucket bool
	// HTTPClient replaces the SDK's default HTTP client.
	HTTPClient *http.Client
}

// Validate fills defaults and rejects a config that cannot work.
func (c *Config) Validate() error {
	if c.Bucket == "" {
		return errors.New("s3store: empty bucket")
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return errors.New("s3store: access key and secret key must be given together")
	}
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	if strings.HasPrefix(c.Prefix, "/") {
		return fmt.Errorf("s3store: prefix %q starts with /", c.Prefix)
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.MaxAttempts < 1 {
		return fmt.Errorf("s3store: MaxAttempts %d < 1", c.MaxAttempts)
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 2 * time.Second
	}
	if c.MaxBackoff < 0 {
		return fmt.Errorf("s3store: negative MaxBackoff %v", c.MaxBackoff)
	}
	if strings.HasSuffix(c.Bucket, "--x-s3") {
		c.DirectoryBucket = true
	}
	return nil
}

// Store is an S3 bucket (and prefix) as an objstore.Store.
type Store struct {
	cfg    Config
	client *s3.Client
	pool   objstore.BufferPool // GetRangeBody's buffers
}

var (
	_ objstore.Store      = (*Store)(nil)
	_ objstore.BodyGetter = (*Store)(nil)
)

// New builds the SDK client for cfg. It makes no request unless
// cfg.CreateBucket is set.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	loadOpts := []func(*config.LoadOptions) error{
		config.WithRegion(cfg.Region),
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = cfg.MaxAttempts
				o.MaxBackoff = cfg.MaxBackoff
				o.Backoff = retry.NewExponentialJitterBackoff(cfg.MaxBackoff)
			})
		}),
	}
	if cfg.AccessKey != "" {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)))
	}
	if cfg.HTTPClient != nil {
		loadOpts = append(loadOpts, config.WithHTTPClient(cfg.HTTPClient))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3store: load AWS config: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
	})
	s := &Store{cfg: cfg, client: client}
	if cfg.CreateBucket {
		if err := s.createBucket(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Store) createBucket(ctx context.Context) error {
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.cfg.Bucket}); err == nil {
		return nil
	}
	_, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.cfg.Bucket})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("s3store: create bucket %q: %w", s.cfg.Bucket, err)
	}
	return nil
}

// Client returns the underlying SDK client, for tests and tools.
func (s *Store) Client() *s3.Client { return s.client }

func (s *Store) key(key string) string { return s.cfg.Prefix + key }

// Put implements objstore.Store: ErrExists when a create-only put finds the
// key (412, or 409 when a concurrent create is in flight).
func (s *Store) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	if key == "" {
		return fmt.Errorf("s3store: put: empty key: %w", objstore.ErrInvalidKey)
	}
	// net/http may still read a request body after RoundTrip returns (an
	// early 412 or 503 answer), and the caller may reuse body once Put
	// returns (objstore.Store's contract): send a private copy.
	body = bytes.Clone(body)
	in := &s3.PutObjectInput{
		Bucket:        &s.cfg.Bucket,
		Key:           aws.String(s.key(key)),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
	}
	if opts.IfNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := s.client.PutObject(ctx, in); err != nil {
		return fmt.Errorf("s3store: put %q: %w", key, mapError(err))
	}
	return nil
}

// rangeHeader returns the HTTP Range for a GetRange, or "" for the whole
// object. length must not be 0.
func rangeHeader(off, length int64) string {
	switch {
	case off < 0:
		return fmt.Sprintf("bytes=-%d", -off)
	case length < 0 && off == 0:
		return ""
	case length < 0:
		return fmt.Sprintf("bytes=%d-", off)
	default:
		return fmt.Sprintf("bytes=%d-%d", off, off+length-1)
	}
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
		return nil, fmt.Errorf("s3store: get: empty key: %w", objstore.ErrInvalidKey)
	}
	if length == 0 && off >= 0 {
		// HTTP cannot express an empty range; check existence and bounds.
		return s.emptyBody(ctx, key, off, length)
	}
	in := &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.key(key))}
	if r := rangeHeader(off, length); r != "" {
		in.Range = aws.String(r)
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		err = mapError(err)
		if errors.Is(err, objstore.ErrInvalidRange) && off <= 0 {
			// S3 answers 416 to any range on an empty object; the contract
			// returns an empty body for off 0 and for suffix ranges.
			return s.emptyBody(ctx, key, off, length)
		}
		return nil, fmt.Errorf("s3store: get %q [off=%d len=%d]: %w", key, off, length, err)
	}
	defer out.Body.Close()
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	b, err := read(out.Body, size)
	if err != nil {
		return nil, fmt.Errorf("s3store: get %q: read body: %w", key, err)
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
		return nil, fmt.Errorf("s3store: get %q [off=%d len=%d]: %w", key, off, length, err)
	}
	if start != end {
		// Only reachable if the object changed between the requests.
		return nil, fmt.Errorf("s3store: get %q: object is %d bytes but the range request was refused: %w", key, info.Size, objstore.ErrInvalidRange)
	}
	return []byte{}, nil
}

// Head implements objstore.Store: ErrNotFound for a missing key.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if key == "" {
		return objstore.ObjectInfo{}, fmt.Errorf("s3store: head: empty key: %w", objstore.ErrInvalidKey)
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.key(key))})
	if err != nil {
		return objstore.ObjectInfo{}, fmt.Errorf("s3store: head %q: %w", key, mapError(err))
	}
	return objstore.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), LastModified: aws.ToTime(out.LastModified)}, nil
}

// Delete implements objstore.Store; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if key == "" {
		return fmt.Errorf("s3store: delete: empty key: %w", objstore.ErrInvalidKey)
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.key(key))})
	if err != nil {
		if err = mapError(err); errors.Is(err, objstore.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("s3store: delete %q: %w", key, err)
	}
	return nil
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	var (
		p   objstore.Page
		err error
	)
	if s.cfg.DirectoryBucket {
		p, err = s.listDirectory(ctx, opts)
	} else {
		p, err = s.listGeneral(ctx, opts)
	}
	if err != nil {
		return objstore.Page{}, fmt.Errorf("s3store: list %q after %q: %w", opts.Prefix, opts.StartAfter, mapError(err))
	}
	return p, nil
}

func (s *Store) listGeneral(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	limit := opts.LimitOrDefault()
	in := &s3.ListObjectsV2Input{
		Bucket:  &s.cfg.Bucket,
		Prefix:  aws.String(s.key(opts.Prefix)),
		MaxKeys: aws.Int32(int32(min(limit, objstore.DefaultListLimit))),
	}
	if opts.StartAfter != "" {
		in.StartAfter = aws.String(s.key(opts.StartAfter))
	}
	var p objstore.Page
	for {
		out, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return objstore.Page{}, err
		}
		for _, o := range out.Contents {
			if len(p.Objects) == limit {
				p.Truncated = true
				return p, nil
			}
			p.Objects = append(p.Objects, s.info(o))
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return p, nil
		}
		if len(p.Objects) == limit {
			p.Truncated = true
			return p, nil
		}
		in.ContinuationToken = out.NextContinuationToken
		in.StartAfter = nil
	}
}

// dirListPrefix is the longest "/"-terminated leading part of prefix: the
// only kind of prefix directory buckets accept.
func dirListPrefix(prefix string) string {
	return prefix[:strings.LastIndexByte(prefix, '/')+1]
}

func (s *Store) listDirectory(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	full := s.key(opts.Prefix)
	after := ""
	if opts.StartAfter != "" {
		after = s.key(opts.StartAfter)
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, MaxKeys: aws.Int32(objstore.DefaultListLimit)}
	if lp := dirListPrefix(full); lp != "" {
		in.Prefix = aws.String(lp)
	}
	var all []types.Object
	for {
		out, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return objstore.Page{}, err
		}
		for _, o := range out.Contents {
			k := aws.ToString(o.Key)
			if strings.HasPrefix(k, full) && k > after {
				all = append(all, o)
			}
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			break
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	slices.SortFunc(all, func(a, b types.Object) int { return strings.Compare(aws.ToString(a.Key), aws.ToString(b.Key)) })
	limit := opts.LimitOrDefault()
	var p objstore.Page
	if len(all) > limit {
		all, p.Truncated = all[:limit], true
	}
	for _, o := range all {
		p.Objects = append(p.Objects, s.info(o))
	}
	return p, nil
}

func (s *Store) info(o types.Object) objstore.ObjectInfo {
	return objstore.ObjectInfo{
		Key:          strings.TrimPrefix(aws.ToString(o.Key), s.cfg.Prefix),
		Size:         aws.ToInt64(o.Size),
		LastModified: aws.ToTime(o.LastModified),
	}
}

// mapError turns S3 answers into the objstore sentinels, keeping the SDK
// error in the chain for logging.
func mapError(err error) error {
	var code string
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	status := 0
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	var sentinel error
	switch {
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound && code != "NoSuchBucket":
		sentinel = objstore.ErrNotFound
	case code == "PreconditionFailed" || code == "ConditionalRequestConflict" ||
		status == http.StatusPreconditionFailed:
		sentinel = objstore.ErrExists
	case code == "InvalidRange" || status == http.StatusRequestedRangeNotSatisfiable:
		sentinel = objstore.ErrInvalidRange
	case code == "KeyTooLongError" || code == "InvalidKey":
		sentinel = objstore.ErrInvalidKey
	default:
		return err
	}
	return fmt.Errorf("%w (%w)", sentinel, err)
}

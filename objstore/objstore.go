package objstore

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Backends wrap them with the operation and key; callers
// test with errors.Is.
var (
	// ErrNotFound: the key does not exist (GetRange, Head).
	ErrNotFound = errors.New("objstore: object not found")
	// ErrExists: a create-only Put found the key already present
	// (S3 answers 412 Precondition Failed to If-None-Match: *).
	ErrExists = errors.New("objstore: object already exists")
	// ErrInvalidRange: the requested range starts at or past the object's end
	// (S3 answers 416).
	ErrInvalidRange = errors.New("objstore: invalid range")
	// ErrInvalidKey: empty key, or a key the backend cannot store.
	ErrInvalidKey = errors.New("objstore: invalid key")
)

// Store is kwal's object-storage interface. Every method takes ctx first and
// honours its cancellation. Implementations are safe for concurrent use.
//
// Ownership: the body passed to Put is not retained after Put returns and is
// not modified; the slice returned by GetRange belongs to the caller.
type Store interface {
	// Put writes body under key. With opts.IfNoneMatch the write is
	// create-only and fails with ErrExists if key already exists; kwal writes
	// every combined object that way and never overwrites one.
	Put(ctx context.Context, key string, body []byte, opts PutOptions) error

	// GetRange reads length bytes of key starting at off.
	//   - length < 0 reads to the end of the object;
	//   - a range running past the end is clipped to the end (as S3 does);
	//   - off < 0 reads the last -off bytes (a suffix range; length ignored);
	//   - off at or past the end of a non-empty object is ErrInvalidRange.
	// A missing key is ErrNotFound.
	GetRange(ctx context.Context, key string, off, length int64) ([]byte, error)

	// Head returns the size and modification time of key, or ErrNotFound.
	Head(ctx context.Context, key string) (ObjectInfo, error)

	// Delete removes key. Deleting a missing key is not an error (as in S3),
	// so deletes can be retried freely.
	Delete(ctx context.Context, key string) error

	// List returns up to opts.Limit keys with the prefix, in lexical order,
	// strictly after opts.StartAfter. Page.Truncated says whether more
	// remain; pass the last key returned as the next StartAfter.
	List(ctx context.Context, opts ListOptions) (Page, error)
}

// PutOptions modify a Put.
type PutOptions struct {
	// IfNoneMatch makes the Put create-only (If-None-Match: *).
	IfNoneMatch bool
}

// ListOptions select a page of keys.
type ListOptions struct {
	Prefix     string
	StartAfter string
	// Limit caps the page size; 0 means the backend's default (1000).
	Limit int
}

// Page is one page of a listing.
type Page struct {
	Objects   []ObjectInfo
	Truncated bool
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// ListAll pages through every key with the prefix and calls fn for each.
func ListAll(ctx context.Context, s Store, prefix string, fn func(ObjectInfo) error) error {
	after := ""
	for {
		p, err := s.List(ctx, ListOptions{Prefix: prefix, StartAfter: after})
		if err != nil {
			return err
		}
		for _, o := range p.Objects {
			if err := fn(o); err != nil {
				return err
			}
			after = o.Key
		}
		if !p.Truncated || len(p.Objects) == 0 {
			return nil
		}
	}
}

// Tags say who made a request, for the ledger: the component (combiner,
// follower, retention, ...), the user partition and the rack of the caller.
// They travel in the context so the Store interface stays small.
type Tags struct {
	Component string
	Topic     string
	Partition int32
	Rack      string
}

type tagsKey struct{}

// WithTags returns ctx carrying t.
func WithTags(ctx context.Context, t Tags) context.Context {
	return context.WithValue(ctx, tagsKey{}, t)
}

// TagsFrom returns the tags carried by ctx, or zero Tags with Partition -1.
func TagsFrom(ctx context.Context) Tags {
	if t, ok := ctx.Value(tagsKey{}).(Tags); ok {
		return t
	}
	return Tags{Partition: -1}
}

// DefaultListLimit is the page size List uses when ListOptions.Limit is 0,
// matching S3's ListObjectsV2 default.
const DefaultListLimit = 1000

// ResolveRange applies the GetRange rules to an object of the given size and
// returns the half-open byte interval [start, end) to read. It is the single
// statement of the range contract that the in-process backends share; the
// S3 backends get the same behaviour from the server and are held to it by
// the acceptance suite.
//
// It returns ErrInvalidRange when off is at or past the end of a non-empty
// object. An empty object yields an empty interval for any off >= 0 or any
// suffix range, so a reader that asks for "everything from 0" of an empty
// object gets an empty body rather than an error.
func ResolveRange(size, off, length int64) (start, end int64, err error) {
	switch {
	case off < 0: // suffix: the last -off bytes.
		start = size + off
		if start < 0 {
			start = 0
		}
		return start, size, nil
	case size == 0 && off == 0:
		return 0, 0, nil
	case off >= size:
		return 0, 0, ErrInvalidRange
	}
	end = size
	if length >= 0 && length < size-off {
		end = off + length
	}
	return off, end, nil
}

// LimitOrDefault returns the page size a List with opts should use.
func (o ListOptions) LimitOrDefault() int {
	if o.Limit <= 0 {
		return DefaultListLimit
	}
	return o.Limit
}

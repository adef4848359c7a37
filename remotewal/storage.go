package remotewal

import (
	"context"
	"fmt"

	"github.com/kwal/kwal/objstore"
)

// StorageManager is KIP-1176's RemoteWalStorageManager: where combined
// objects are written, read back by range, and deleted.
type StorageManager interface {
	// CopyCombinedSegment stores a combined object under key, create-only.
	// It returns objstore.ErrExists if key is already taken.
	CopyCombinedSegment(ctx context.Context, key string, data []byte) error
	// FetchCombinedSegment reads [start, end) of the object.
	FetchCombinedSegment(ctx context.Context, key string, start, end int64) ([]byte, error)
	// DeleteCombinedSegment removes the object; a missing object is not an error.
	DeleteCombinedSegment(ctx context.Context, key string) error
}

// ObjectStorageManager implements StorageManager over any objstore.Store,
// S3 Express One Zone directory buckets included (the s3 backend handles
// their session authentication).
type ObjectStorageManager struct {
	Store objstore.Store
}

var _ StorageManager = (*ObjectStorageManager)(nil)

// NewObjectStorageManager wraps store.
func NewObjectStorageManager(store objstore.Store) *ObjectStorageManager {
	return &ObjectStorageManager{Store: store}
}

func (m *ObjectStorageManager) CopyCombinedSegment(ctx context.Context, key string, data []byte) error {
	if err := m.Store.Put(ctx, key, data, objstore.PutOptions{IfNoneMatch: true}); err != nil {
		return fmt.Errorf("remotewal: copy combined segment %q (%d bytes): %w", key, len(data), err)
	}
	return nil
}

// PutObject lets the storage manager serve as the combiner's object writer.
func (m *ObjectStorageManager) PutObject(ctx context.Context, key string, body []byte) error {
	return m.CopyCombinedSegment(ctx, key, body)
}

func (m *ObjectStorageManager) FetchCombinedSegment(ctx context.Context, key string, start, end int64) ([]byte, error) {
	if start < 0 || end <= start {
		return nil, fmt.Errorf("remotewal: fetch %q [%d,%d): %w", key, start, end, objstore.ErrInvalidRange)
	}
	b, err := m.Store.GetRange(ctx, key, start, end-start)
	if err != nil {
		return nil, fmt.Errorf("remotewal: fetch %q [%d,%d): %w", key, start, end, err)
	}
	if int64(len(b)) != end-start {
		return nil, fmt.Errorf("remotewal: fetch %q [%d,%d): got %d bytes: %w", key, start, end, len(b), objstore.ErrInvalidRange)
	}
	return b, nil
}

func (m *ObjectStorageManager) DeleteCombinedSegment(ctx context.Context, key string) error {
	if err := m.Store.Delete(ctx, key); err != nil {
		return fmt.Errorf("remotewal: delete combined segment %q: %w", key, err)
	}
	return nil
}

// ReadObjectTail returns the last n bytes of key (the whole object when it is
// shorter), so the combiner can recognise its own object after an ambiguous
// PUT.
func (m *ObjectStorageManager) ReadObjectTail(ctx context.Context, key string, n int64) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("remotewal: read tail of %q: length %d: %w", key, n, objstore.ErrInvalidRange)
	}
	b, err := m.Store.GetRange(ctx, key, -n, -1)
	if err != nil {
		return nil, fmt.Errorf("remotewal: read tail of %q: %w", key, err)
	}
	return b, nil
}

package fsstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/kwal/kwal/objstore"
)

const tmpDir = ".kwal-tmp"

// Store is a directory-backed object store.
type Store struct {
	root string
	pool objstore.BufferPool // GetRangeBody's buffers
}

var (
	_ objstore.Store      = (*Store)(nil)
	_ objstore.BodyGetter = (*Store)(nil)
)

// New returns a store rooted at dir, creating dir if needed.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("fsstore: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fsstore: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(abs, tmpDir), 0o755); err != nil {
		return nil, fmt.Errorf("fsstore: create %s: %w", abs, err)
	}
	return &Store{root: abs}, nil
}

// Root returns the directory the store lives in.
func (s *Store) Root() string { return s.root }

// ValidKey reports whether key can be stored: non-empty, "/"-separated parts
// that are neither empty, "." nor "..", no NUL byte, and not inside the
// temporary directory.
func ValidKey(key string) bool {
	if key == "" || strings.ContainsRune(key, 0) || strings.Contains(key, "\\") {
		return false
	}
	for part := range strings.SplitSeq(key, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return key != tmpDir && !strings.HasPrefix(key, tmpDir+"/")
}

func (s *Store) path(op, key string) (string, error) {
	if !ValidKey(key) {
		return "", fmt.Errorf("fsstore: %s %q: %w", op, key, objstore.ErrInvalidKey)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Put implements objstore.Store: ErrExists for a create-only put of a present
// key; ErrInvalidKey for a key the layout cannot hold (including a key one of
// whose "/"-prefixes is an object, or that is a directory of other keys).
func (s *Store) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	final, err := s.path("put", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fsstore: put %q: %w", key, err)
	}
	tmp, err := s.writeTemp(body)
	if err != nil {
		return fmt.Errorf("fsstore: put %q: %w", key, err)
	}
	defer os.Remove(tmp) // no-op after a rename
	// A concurrent Delete may remove a freshly created empty parent; retry
	// the few times that can happen.
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("fsstore: put %q: a prefix of the key is an object: %w", key, objstore.ErrInvalidKey)
			}
			return fmt.Errorf("fsstore: put %q: %w", key, err)
		}
		if opts.IfNoneMatch {
			err = os.Link(tmp, final)
		} else {
			err = os.Rename(tmp, final)
		}
		switch {
		case err == nil:
			return syncDir(filepath.Dir(final))
		case errors.Is(err, fs.ErrNotExist) && attempt < 5:
			continue
		case errors.Is(err, fs.ErrExist) && opts.IfNoneMatch:
			if fi, serr := os.Stat(final); serr == nil && fi.IsDir() {
				return fmt.Errorf("fsstore: put %q: key is a prefix of other keys: %w", key, objstore.ErrInvalidKey)
			}
			return fmt.Errorf("fsstore: put %q: %w", key, objstore.ErrExists)
		case errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY):
			return fmt.Errorf("fsstore: put %q: key is a prefix of other keys: %w", key, objstore.ErrInvalidKey)
		default:
			return fmt.Errorf("fsstore: put %q: %w", key, err)
		}
	}
}

func (s *Store) writeTemp(body []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Join(s.root, tmpDir), "put-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsstore: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsstore: sync %s: %w", dir, err)
	}
	return nil
}

// GetRange implements objstore.Store: ErrNotFound for a missing key (or a
// directory), ErrInvalidRange for off at or past the end.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	return s.get(ctx, key, off, length, func(n int) []byte { return make([]byte, n) })
}

// GetRangeBody implements objstore.BodyGetter: GetRange, read into a pooled
// buffer that Release hands back for the next read.
func (s *Store) GetRangeBody(ctx context.Context, key string, off, length int64) (*objstore.Body, error) {
	b, err := s.get(ctx, key, off, length, s.pool.Get)
	if err != nil {
		return nil, err
	}
	return s.pool.Body(b), nil
}

// get is GetRange reading into a buffer from alloc.
func (s *Store) get(ctx context.Context, key string, off, length int64, alloc func(int) []byte) ([]byte, error) {
	p, err := s.path("get", key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fsstore: get %q: %w", key, err)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("fsstore: get %q: %w", key, notFound(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fsstore: get %q: %w", key, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("fsstore: get %q: %w", key, objstore.ErrNotFound)
	}
	start, end, err := objstore.ResolveRange(fi.Size(), off, length)
	if err != nil {
		return nil, fmt.Errorf("fsstore: get %q [off=%d len=%d]: %w", key, off, length, err)
	}
	buf := alloc(int(end - start))
	if _, err := f.ReadAt(buf, start); err != nil && !(errors.Is(err, io.EOF) && len(buf) == 0) {
		return nil, fmt.Errorf("fsstore: get %q: %w", key, err)
	}
	return buf, nil
}

func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return objstore.ErrNotFound
	}
	return err
}

// Head implements objstore.Store: ErrNotFound for a missing key.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	p, err := s.path("head", key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return objstore.ObjectInfo{}, fmt.Errorf("fsstore: head %q: %w", key, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return objstore.ObjectInfo{}, fmt.Errorf("fsstore: head %q: %w", key, notFound(err))
	}
	if fi.IsDir() {
		return objstore.ObjectInfo{}, fmt.Errorf("fsstore: head %q: %w", key, objstore.ErrNotFound)
	}
	return objstore.ObjectInfo{Key: key, Size: fi.Size(), LastModified: fi.ModTime()}, nil
}

// Delete implements objstore.Store; a missing key is not an error. Parent
// directories left empty are removed, as S3 has no empty "directories".
func (s *Store) Delete(ctx context.Context, key string) error {
	p, err := s.path("delete", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fsstore: delete %q: %w", key, err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if errors.Is(notFound(err), objstore.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("fsstore: delete %q: %w", key, err)
	}
	if fi.IsDir() {
		return nil // a prefix of other keys, not an object
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("fsstore: delete %q: %w", key, err)
	}
	// Best effort: rmdir fails harmlessly on a non-empty directory.
	for dir := filepath.Dir(p); dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

var errPageFull = errors.New("page full")

// List implements objstore.Store. It walks the tree in key order, visiting
// only directories that can hold keys with the prefix and after StartAfter,
// and stops as soon as the page is full.
func (s *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.Page, error) {
	if err := ctx.Err(); err != nil {
		return objstore.Page{}, fmt.Errorf("fsstore: list %q: %w", opts.Prefix, err)
	}
	w := walker{ctx: ctx, opts: opts, limit: opts.LimitOrDefault()}
	err := w.walk(s.root, "")
	if err != nil && !errors.Is(err, errPageFull) {
		return objstore.Page{}, fmt.Errorf("fsstore: list %q: %w", opts.Prefix, err)
	}
	return w.page, nil
}

type walker struct {
	ctx   context.Context
	opts  objstore.ListOptions
	limit int
	page  objstore.Page
}

// walk lists dir, whose keys all start with keyPrefix ("" or ending in "/").
// Sorting entries by name, with "/" appended to directories, yields keys in
// lexical order: every key below directory "a" starts with "a/", so "a-c"
// (with '-' < '/') correctly comes first.
func (w *walker) walk(dir, keyPrefix string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed by a concurrent Delete
		}
		return err
	}
	type item struct {
		name string // key relative to keyPrefix, "/"-terminated for directories
		e    fs.DirEntry
	}
	items := make([]item, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if keyPrefix == "" && name == tmpDir {
			continue
		}
		if e.IsDir() {
			name += "/"
		}
		items = append(items, item{name, e})
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.name, b.name) })
	for _, it := range items {
		key := keyPrefix + it.name
		if it.e.IsDir() {
			// Every key below starts with key (which ends in "/").
			if !strings.HasPrefix(key, w.opts.Prefix) && !strings.HasPrefix(w.opts.Prefix, key) {
				continue
			}
			if key < w.opts.StartAfter && !strings.HasPrefix(w.opts.StartAfter, key) {
				continue // the whole subtree sorts before StartAfter
			}
			if err := w.walk(filepath.Join(dir, it.e.Name()), key); err != nil {
				return err
			}
			continue
		}
		if !strings.HasPrefix(key, w.opts.Prefix) || key <= w.opts.StartAfter {
			continue
		}
		if !it.e.Type().IsRegular() {
			continue
		}
		fi, err := it.e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if len(w.page.Objects) == w.limit {
			w.page.Truncated = true
			return errPageFull
		}
		w.page.Objects = append(w.page.Objects, objstore.ObjectInfo{Key: key, Size: fi.Size(), LastModified: fi.ModTime()})
	}
	return nil
}

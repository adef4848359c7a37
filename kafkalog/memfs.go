package kafkalog

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// FSOp names a file-layer operation for fault injection.
type FSOp string

// The operations MemFS reports to its fault hook.
const (
	OpCreate   FSOp = "create"
	OpOpen     FSOp = "open"
	OpRename   FSOp = "rename"
	OpRemove   FSOp = "remove"
	OpReadDir  FSOp = "readdir"
	OpMkdirAll FSOp = "mkdirall"
	OpSyncDir  FSOp = "syncdir"
	OpWrite    FSOp = "write"
	OpRead     FSOp = "read"
	OpSync     FSOp = "sync"
	OpTruncate FSOp = "truncate"
)

// MemFS is an in-memory FS for tests that remembers, per file, what was
// fsynced. CrashClone returns the state a crash would leave. SetFault
// injects errors.
//
// Durability model: file contents are durable only up to the last
// File.Sync; writes and truncations after it are pending. Creates, renames
// and removes are durable when they happen (as if every directory
// operation were followed by a directory fsync); SyncDir is a no-op. This
// is stricter than nothing and simpler than tracking directory state; the
// log fsyncs directories anyway on the real OS.
type MemFS struct {
	mu struct {
		sync.Mutex
		files map[string]*memNode
		dirs  map[string]bool
		fault func(op FSOp, name string) error
	}
}

var _ FS = (*MemFS)(nil)

type memNode struct {
	mu      sync.Mutex
	data    []byte
	durable []byte
	pending []memOp
}

type memOp struct {
	truncate bool
	off      int64 // write offset, or truncate size
	data     []byte
}

// NewMemFS returns an empty in-memory FS.
func NewMemFS() *MemFS {
	m := &MemFS{}
	m.mu.files = map[string]*memNode{}
	m.mu.dirs = map[string]bool{"/": true, ".": true}
	return m
}

// SetFault installs fn, called before every operation; a non-nil result
// is returned instead of doing the operation. nil removes the hook.
func (m *MemFS) SetFault(fn func(op FSOp, name string) error) {
	m.mu.Lock()
	m.mu.fault = fn
	m.mu.Unlock()
}

func (m *MemFS) check(op FSOp, name string) error {
	m.mu.Lock()
	fn := m.mu.fault
	m.mu.Unlock()
	if fn == nil {
		return nil
	}
	if err := fn(op, name); err != nil {
		return &fs.PathError{Op: string(op), Path: name, Err: err}
	}
	return nil
}

func clean(name string) string { return path.Clean(filepath.ToSlash(name)) }

// CrashClone returns a new MemFS holding what a crash now would leave.
// With rng nil, each file holds exactly its fsynced contents. With rng
// set, each file also keeps a random prefix of its writes since the last
// fsync, the last of them possibly cut short (a torn write), as a disk
// that persisted some of the page cache would.
func (m *MemFS) CrashClone(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS()
	for d := range m.mu.dirs {
		c.mu.dirs[d] = true
	}
	names := make([]string, 0, len(m.mu.files))
	for n := range m.mu.files {
		names = append(names, n)
	}
	sort.Strings(names) // deterministic use of rng
	for _, name := range names {
		n := m.mu.files[name]
		n.mu.Lock()
		data := append([]byte(nil), n.durable...)
		if rng != nil && len(n.pending) > 0 {
			k := rng.IntN(len(n.pending) + 1)
			for _, op := range n.pending[:k] {
				data = op.apply(data)
			}
			if k < len(n.pending) && !n.pending[k].truncate {
				op := n.pending[k]
				op.data = op.data[:rng.IntN(len(op.data)+1)]
				data = op.apply(data)
			}
		}
		n.mu.Unlock()
		c.mu.files[name] = &memNode{data: data, durable: append([]byte(nil), data...)}
	}
	return c
}

func (op memOp) apply(data []byte) []byte {
	if op.truncate {
		return resize(data, op.off)
	}
	end := op.off + int64(len(op.data))
	if int64(len(data)) < end {
		data = resize(data, end)
	}
	copy(data[op.off:], op.data)
	return data
}

// resize cuts b to n bytes or extends it with zeros. It at least doubles
// the capacity when it must grow it, so a file written by appends is
// copied a constant number of times per byte (append's own growth is
// 1.25x for large slices: about five copies of every byte).
func resize(b []byte, n int64) []byte {
	l := int64(len(b))
	if l >= n {
		return b[:n]
	}
	if int64(cap(b)) < n {
		// The bytes appended are zeros, up to the new capacity.
		return append(b[:l:l], make([]byte, max(n, 2*int64(cap(b)))-l)...)[:n]
	}
	b = b[:n]
	clear(b[l:]) // what a truncation left past the length
	return b
}

// Create creates or truncates name. Its parent directory must exist.
func (m *MemFS) Create(name string) (File, error) {
	if err := m.check(OpCreate, name); err != nil {
		return nil, err
	}
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.dirs[path.Dir(name)] {
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrNotExist}
	}
	n := m.mu.files[name]
	if n == nil {
		n = &memNode{}
		m.mu.files[name] = n
	} else {
		n.mu.Lock()
		n.data = n.data[:0]
		n.pending = append(n.pending, memOp{truncate: true})
		n.mu.Unlock()
	}
	return &memFile{fs: m, node: n, name: name}, nil
}

func (m *MemFS) Open(name string) (File, error) {
	if err := m.check(OpOpen, name); err != nil {
		return nil, err
	}
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.mu.files[name]
	if n == nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memFile{fs: m, node: n, name: name}, nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	if err := m.check(OpRename, oldname); err != nil {
		return err
	}
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.mu.files[oldname]
	if n == nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.mu.files, oldname)
	m.mu.files[newname] = n
	return nil
}

func (m *MemFS) Remove(name string) error {
	if err := m.check(OpRemove, name); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.mu.files, clean(name))
	m.mu.Unlock()
	return nil
}

func (m *MemFS) ReadDir(dir string) ([]string, error) {
	if err := m.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.dirs[dir] {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	var names []string
	for n := range m.mu.files {
		if path.Dir(n) == dir {
			names = append(names, path.Base(n))
		}
	}
	sort.Strings(names)
	return names, nil
}

func (m *MemFS) MkdirAll(dir string) error {
	if err := m.check(OpMkdirAll, dir); err != nil {
		return err
	}
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := dir; ; d = path.Dir(d) {
		m.mu.dirs[d] = true
		if d == "/" || d == "." || !strings.Contains(d, "/") {
			break
		}
	}
	return nil
}

func (m *MemFS) SyncDir(dir string) error { return m.check(OpSyncDir, dir) }

// FileBytes returns a copy of the current (not necessarily durable)
// contents of name, for tests.
func (m *MemFS) FileBytes(name string) ([]byte, error) {
	m.mu.Lock()
	n := m.mu.files[clean(name)]
	m.mu.Unlock()
	if n == nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]byte(nil), n.data...), nil
}

// WriteFile creates name holding data, durably, for tests that plant files.
func (m *MemFS) WriteFile(name string, data []byte) error {
	if err := m.MkdirAll(path.Dir(clean(name))); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.files[clean(name)] = &memNode{data: append([]byte(nil), data...), durable: append([]byte(nil), data...)}
	return nil
}

type memFile struct {
	fs   *MemFS
	node *memNode
	name string
	mu   struct {
		sync.Mutex
		closed bool
	}
}

var _ File = (*memFile)(nil)

func (f *memFile) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.closed
}

func (f *memFile) errClosed(op string) error {
	return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if f.isClosed() {
		return 0, f.errClosed("read")
	}
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("memfs: negative offset %d", off)
	}
	n := f.node
	n.mu.Lock()
	defer n.mu.Unlock()
	if off >= int64(len(n.data)) {
		return 0, io.EOF
	}
	c := copy(p, n.data[off:])
	if c < len(p) {
		return c, io.EOF
	}
	return c, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.write(append([]byte(nil), p...), off); err != nil {
		return 0, err
	}
	return len(p), nil
}

var _ vectorWriter = (*memFile)(nil)

// writevAt is one write of the concatenation of bufs (one pending
// operation, as one pwritev is one write for a crash).
func (f *memFile) writevAt(bufs [][]byte, off int64) error {
	return f.write(bytes.Join(bufs, nil), off) // Join does not zero its buffer first
}

// write applies a write of data, which the file keeps.
func (f *memFile) write(data []byte, off int64) error {
	if f.isClosed() {
		return f.errClosed("write")
	}
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return err
	}
	if off < 0 {
		return fmt.Errorf("memfs: negative offset %d", off)
	}
	n := f.node
	n.mu.Lock()
	defer n.mu.Unlock()
	op := memOp{off: off, data: data}
	n.data = op.apply(n.data)
	n.pending = append(n.pending, op)
	return nil
}

func (f *memFile) Sync() error {
	if f.isClosed() {
		return f.errClosed("sync")
	}
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	n := f.node
	n.mu.Lock()
	defer n.mu.Unlock()
	n.durable = append(n.durable[:0], n.data...)
	n.pending = nil
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if f.isClosed() {
		return f.errClosed("truncate")
	}
	if err := f.fs.check(OpTruncate, f.name); err != nil {
		return err
	}
	n := f.node
	n.mu.Lock()
	defer n.mu.Unlock()
	op := memOp{truncate: true, off: size}
	n.data = op.apply(n.data)
	n.pending = append(n.pending, op)
	return nil
}

func (f *memFile) Size() (int64, error) {
	if f.isClosed() {
		return 0, f.errClosed("stat")
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	return int64(len(f.node.data)), nil
}

func (f *memFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.closed {
		return f.errClosed("close")
	}
	f.mu.closed = true
	return nil
}

package faultfs

import (
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/kwal/kwal/kafkalog"
)

// ReadOnlyFS is the real file system that turns read-only (EROFS, as a
// remounted or failing disk does) for paths under a prefix while broken:
// files already open refuse writes, syncs and truncation too. Reads still
// work.
type ReadOnlyFS struct {
	kafkalog.OSFS
	prefix string
	broken atomic.Bool
}

var _ kafkalog.FS = (*ReadOnlyFS)(nil)

// NewReadOnlyFS returns a ReadOnlyFS for paths under prefix, not broken.
func NewReadOnlyFS(prefix string) *ReadOnlyFS { return &ReadOnlyFS{prefix: prefix} }

// SetBroken turns the file system read-only (true) or writable again.
func (f *ReadOnlyFS) SetBroken(broken bool) { f.broken.Store(broken) }

func (f *ReadOnlyFS) refuse(op, name string) error {
	if f.broken.Load() && strings.HasPrefix(name, f.prefix) {
		return &fs.PathError{Op: op, Path: name, Err: syscall.EROFS}
	}
	return nil
}

func (f *ReadOnlyFS) Create(name string) (kafkalog.File, error) {
	if err := f.refuse("open", name); err != nil {
		return nil, err
	}
	fl, err := f.OSFS.Create(name)
	return roFile{File: fl, fs: f, name: name}, err
}

func (f *ReadOnlyFS) Open(name string) (kafkalog.File, error) {
	fl, err := f.OSFS.Open(name)
	if err != nil {
		return nil, err
	}
	return roFile{File: fl, fs: f, name: name}, nil
}

func (f *ReadOnlyFS) Rename(o, n string) error {
	if err := f.refuse("rename", o); err != nil {
		return err
	}
	return f.OSFS.Rename(o, n)
}

func (f *ReadOnlyFS) Remove(name string) error {
	if err := f.refuse("remove", name); err != nil {
		return err
	}
	return f.OSFS.Remove(name)
}

func (f *ReadOnlyFS) MkdirAll(dir string) error {
	if err := f.refuse("mkdir", dir); err != nil {
		return err
	}
	return f.OSFS.MkdirAll(dir)
}

type roFile struct {
	kafkalog.File
	fs   *ReadOnlyFS
	name string
}

func (f roFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.refuse("write", f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f roFile) Sync() error {
	if err := f.fs.refuse("sync", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f roFile) Truncate(size int64) error {
	if err := f.fs.refuse("truncate", f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

package kafkalog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNoSection: the log's files are not operating-system files (MemFS),
// so ReadSection cannot hand out a file region; use Read.
var ErrNoSection = errors.New("kafkalog: log files are not OS files; no file sections")

// osFiler is a File backed by an *os.File (OSFS's).
type osFiler interface{ osFile() *os.File }

func (f osFile) osFile() *os.File { return f.File }

// Section is a region of a segment file holding whole batches: what Read
// would have copied, left in the file so it can go to a socket with
// sendfile (Kafka's FileRecords.writeTo). It holds its own duplicate of
// the file descriptor, taken under the log's read lock, so the region
// stays readable after the lock is released even if retention deletes the
// segment, the cleaner swaps it or the log is closed. Bytes below a
// segment's published size never change except by truncation; a section
// of a region truncated while in flight reads short (ErrSectionShort).
// Close releases the descriptor; a Section is used by one goroutine.
type Section struct {
	f   *os.File
	Pos int64 // start in the segment file
	Len int64 // bytes
}

// ErrSectionShort: the file ended before the section did (the segment was
// truncated after the section was taken).
var ErrSectionShort = errors.New("kafkalog: section shorter than its length (segment truncated)")

// File returns the section's file (its own descriptor); use ReadAt only:
// its position is shared with duplicates.
func (s *Section) File() *os.File { return s.f }

// WriteTo copies the section to w through user space (the path for
// writers that are not sockets, and for tests). It reads with pread, so
// it does not move the shared file position.
func (s *Section) WriteTo(w io.Writer) (int64, error) {
	n, err := io.Copy(w, io.NewSectionReader(s.f, s.Pos, s.Len))
	if err == nil && n < s.Len {
		err = ErrSectionShort
	}
	return n, err
}

// Bytes reads the section into memory.
func (s *Section) Bytes() ([]byte, error) {
	b := make([]byte, s.Len)
	n, err := s.f.ReadAt(b, s.Pos)
	if int64(n) == s.Len {
		return b, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = ErrSectionShort
	}
	return nil, err
}

// Close releases the section's descriptor. Closing twice is harmless.
func (s *Section) Close() error {
	if s == nil || s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// ReadSection is Read without the copy, and with the broker's trims: the
// whole batches starting with the one containing offset, all from one
// segment, stopping before the first batch whose last offset is at or
// past below, within maxBytes, except that with atLeastOne the first
// batch is included even if larger than maxBytes. The batch headers are
// read (one small pread each); the record bytes are not. An empty result
// (nil Section, nil error) means no batch qualified. Errors:
// ErrNoSection (MemFS), ErrOffsetOutOfRange, ErrClosed, I/O errors.
func (l *Log) ReadSection(offset int64, maxBytes int, below int64, atLeastOne bool) (*Section, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.checkRange(offset); err != nil {
		return nil, err
	}
	if _, ok := l.active().file.(osFiler); !ok {
		return nil, ErrNoSection
	}
	if offset == l.mu.leo {
		return nil, nil
	}
	s, pos, h, err := l.find(offset)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: read section %d: %w", offset, err)
	}
	of, ok := s.file.(osFiler)
	if !ok {
		return nil, ErrNoSection
	}
	end := pos
	var hdr [liteHeaderSize]byte
	for cur := h; ; {
		if cur.last >= below || (end-pos+int64(cur.size) > int64(maxBytes) && !(atLeastOne && end == pos)) {
			break
		}
		end += int64(cur.size)
		if end+liteHeaderSize > s.size {
			break
		}
		if _, err := s.file.ReadAt(hdr[:], end); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("kafkalog: read section %d: %w", offset, err)
		}
		cur = parseLite(hdr[:])
		if cur.size < BatchHeaderSize || end+int64(cur.size) > s.size {
			break
		}
	}
	if end == pos {
		return nil, nil
	}
	fd, err := dupFile(of.osFile())
	if err != nil {
		return nil, fmt.Errorf("kafkalog: read section %d: %w", offset, err)
	}
	return &Section{f: fd, Pos: pos, Len: end - pos}, nil
}

// dupFile duplicates f's descriptor (close-on-exec).
func dupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var derr error
	if err := rc.Control(func(fd uintptr) {
		nfd, derr = dupCloexec(int(fd))
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, os.NewSyscallError("dup", derr)
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

func dupCloexec(fd int) (int, error) {
	for {
		nfd, err := fcntlDup(fd)
		if err != syscall.EINTR {
			return nfd, err
		}
	}
}

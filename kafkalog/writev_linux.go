package kafkalog

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"
)

// iovMax is Linux's IOV_MAX: the most buffers one pwritev takes.
const iovMax = 1024

var _ vectorWriter = osFile{}

// writevAt writes bufs at off with pwritev(2), as few calls as IOV_MAX
// and short writes allow.
func (f osFile) writevAt(bufs [][]byte, off int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	iov := make([]syscall.Iovec, 0, min(len(bufs), iovMax))
	for len(bufs) > 0 {
		iov = iov[:0]
		for _, b := range bufs[:min(len(bufs), iovMax)] {
			if len(b) == 0 {
				continue
			}
			v := syscall.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
		n := len(bufs[:min(len(bufs), iovMax)])
		if len(iov) == 0 {
			bufs = bufs[n:]
			continue
		}
		var wrote uintptr
		var errno syscall.Errno
		if err := rc.Write(func(fd uintptr) bool {
			wrote, _, errno = syscall.Syscall6(syscall.SYS_PWRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)), uintptr(off), uintptr(off>>32), 0)
			return errno != syscall.EAGAIN
		}); err != nil {
			return err
		}
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return &os.PathError{Op: "pwritev", Path: f.Name(), Err: errno}
		}
		if wrote == 0 {
			return fmt.Errorf("pwritev %s: %w", f.Name(), io.ErrShortWrite)
		}
		// Skip what was written; a short write resumes mid-buffer.
		off += int64(wrote)
		left := int(wrote)
		for left > 0 && len(bufs) > 0 {
			if len(bufs[0]) <= left {
				left -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			bufs = append([][]byte{bufs[0][left:]}, bufs[1:]...)
			left = 0
		}
	}
	return nil
}

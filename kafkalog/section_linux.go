package kafkalog

import "syscall"

// fcntlDup is fcntl(fd, F_DUPFD_CLOEXEC, 0).
func fcntlDup(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

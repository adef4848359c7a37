//go:build !linux

package kafkalog

import "syscall"

// fcntlDup: sections need Linux here; ReadSection then fails and callers
// use Read.
func fcntlDup(fd int) (int, error) { return -1, syscall.ENOTSUP }

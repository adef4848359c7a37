package mem

import (
	"os"
	"syscall"
)

// mapBlock maps n bytes of anonymous memory outside the Go heap, so that
// the arena does not count towards the garbage collector's heap goal
// (which would otherwise grow by the arena's size and change how often
// the process under test collects, and how much fresh memory it touches
// between collections). The kernel faults the pages in (MAP_POPULATE),
// then one byte of every page is written from here: on a machine whose
// hypervisor shadows the guest's page tables, the first user-space touch
// of a page costs an exit of its own however the kernel populated it
// (measured: a 200 MB copy into populated pages 313 ms, into pages also
// touched once 13 ms).
func mapBlock(n int) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i += os.Getpagesize() {
		b[i] = 1
	}
	return b, nil
}

func unmapBlock(b []byte) error { return syscall.Munmap(b) }

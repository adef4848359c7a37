package mem

import "syscall"

// mapBlock maps n bytes of anonymous memory outside the Go heap, faulted
// in by the kernel at once (MAP_POPULATE): the arena's bytes do not count
// towards the garbage collector's heap goal, which would otherwise grow
// by the arena's size and change how often the process under test
// collects (and how much fresh memory it touches between collections).
func mapBlock(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
}

func unmapBlock(b []byte) error { return syscall.Munmap(b) }

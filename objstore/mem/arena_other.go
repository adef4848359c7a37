//go:build !linux

package mem

import "os"

// mapBlock allocates n bytes on the heap and writes one byte of every
// page, so that none of it faults later.
func mapBlock(n int) ([]byte, error) {
	b := make([]byte, n)
	for i := 0; i < n; i += os.Getpagesize() {
		b[i] = 1
	}
	return b, nil
}

func unmapBlock([]byte) error { return nil }

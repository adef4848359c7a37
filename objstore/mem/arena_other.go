//go:build !linux

package mem

import "os"

// mapBlock allocates n bytes on the heap and writes one byte of every
// page, so that none of it faults later. The mapping is the block.
func mapBlock(n int) (block, mapping []byte, err error) {
	b := make([]byte, n)
	for i := 0; i < n; i += os.Getpagesize() {
		b[i] = 1
	}
	return b, b, nil
}

func unmapBlock([]byte) error { return nil }

// hugeBytes is 0: only Linux reports transparent huge pages here.
func hugeBytes([]byte) int64 { return 0 }

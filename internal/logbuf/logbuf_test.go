package logbuf

import (
	"fmt"
	"sync"
	"testing"
)

func TestBufferConcurrentWritesAndLines(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				fmt.Fprintf(&b, "w%d line %d\n", i, j)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := len(b.Lines()); n != 200 {
		t.Fatalf("%d lines, want 200", n)
	}
}

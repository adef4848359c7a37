package mem_test

import (
	"testing"

	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/mem"
	"github.com/kwal/kwal/objstore/objstoretest"
)

func TestAcceptance(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return mem.New() })
}

func BenchmarkLatency(b *testing.B) {
	objstoretest.BenchLatency(b, mem.New())
}

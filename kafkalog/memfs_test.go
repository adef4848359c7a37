package kafkalog

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestMemFSContents checks a MemFS file against a plain byte slice under
// random writes (appends, overwrites, writes past the end) and truncations
// (shrinking, then growing again, which must read back zeros), and that a
// crash clone keeps exactly the synced contents.
func TestMemFSContents(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	fs := NewMemFS()
	if err := fs.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	var want, synced []byte
	for i := range 2000 {
		switch k := rng.IntN(10); {
		case k < 6: // write at, near or past the end, or over the middle
			off := int64(len(want)) + int64(rng.IntN(64)) - 32
			if k == 0 {
				off = int64(rng.IntN(len(want) + 1))
			}
			off = max(0, off)
			p := make([]byte, 1+rng.IntN(3000))
			for j := range p {
				p[j] = byte(rng.Uint32()) | 1
			}
			if _, err := f.WriteAt(p, off); err != nil {
				t.Fatal(err)
			}
			if end := off + int64(len(p)); end > int64(len(want)) {
				want = append(want, make([]byte, end-int64(len(want)))...)
			}
			copy(want[off:], p)
		case k < 8:
			n := int64(rng.IntN(len(want) + 100))
			if err := f.Truncate(n); err != nil {
				t.Fatal(err)
			}
			if n <= int64(len(want)) {
				want = want[:n:n]
			} else {
				want = append(want, make([]byte, n-int64(len(want)))...)
			}
		case k < 9:
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			synced = append([]byte(nil), want...)
		default:
			got, err := fs.FileBytes("/d/f")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("step %d: file differs (%d bytes, want %d)", i, len(got), len(want))
			}
			c, err := fs.CrashClone(nil).FileBytes("/d/f")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c, synced) {
				t.Fatalf("step %d: crash clone differs from the synced contents", i)
			}
		}
		if size, err := f.Size(); err != nil || size != int64(len(want)) {
			t.Fatalf("step %d: size %d, %v; want %d", i, size, err, len(want))
		}
	}
	got := make([]byte, len(want))
	if n, err := f.ReadAt(got, 0); n != len(want) || (err != nil && len(want) > 0) {
		t.Fatalf("read %d, %v", n, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("read back differs")
	}
}

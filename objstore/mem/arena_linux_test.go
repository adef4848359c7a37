package mem

import (
	"os"
	"strings"
	"testing"
	"unsafe"
)

func TestSmapsRange(t *testing.T) {
	for _, c := range []struct {
		line   string
		lo, hi uint64
		ok     bool
	}{
		{"7f12a0000000-7f12a4200000 rw-p 00000000 00:00 0 ", 0x7f12a0000000, 0x7f12a4200000, true},
		{"00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon", 0x400000, 0x452000, true},
		{"AnonHugePages:     65536 kB", 0, 0, false},
		{"VmFlags: rd wr mr mw me ac sd hg", 0, 0, false},
		{"zz-10 rw-p", 0, 0, false},
		{"", 0, 0, false},
	} {
		lo, hi, ok := smapsRange([]byte(c.line))
		if lo != c.lo || hi != c.hi || ok != c.ok {
			t.Errorf("%q: %x-%x %v, want %x-%x %v", c.line, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
}

// A block is aligned to a huge page inside its mapping, every page of it
// is usable, and what it reports in huge pages is what the kernel says:
// all of it where transparent huge pages are on and were granted, none
// where they are off.
func TestBlockHugePages(t *testing.T) {
	const n = 4 * hugePageBytes
	b, m, err := mapBlock(n)
	if err != nil {
		t.Fatal(err)
	}
	defer unmapBlock(m)
	if len(b) != n || cap(b) != n {
		t.Fatalf("block of %d (cap %d), want %d", len(b), cap(b), n)
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	if start%hugePageBytes != 0 {
		t.Fatalf("block at %#x, not aligned to %d", start, hugePageBytes)
	}
	mstart := uintptr(unsafe.Pointer(&m[0]))
	if start < mstart || start+n > mstart+uintptr(len(m)) {
		t.Fatalf("block %#x+%d outside its mapping %#x+%d", start, n, mstart, len(m))
	}
	for i := range b {
		b[i] = byte(i)
	}
	huge := hugeBytes(b)
	if huge < 0 || huge > n || huge%hugePageBytes != 0 {
		t.Fatalf("hugeBytes %d: want whole huge pages within %d", huge, n)
	}
	mode, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if strings.Contains(string(mode), "[never]") && huge != 0 {
		t.Fatalf("hugeBytes %d with transparent huge pages off", huge)
	}
	t.Logf("transparent_hugepage %q: %d of %d bytes in huge pages", strings.TrimSpace(string(mode)), huge, n)
	if hugeBytes(nil) != 0 {
		t.Fatal("an empty block reported as huge pages")
	}
}

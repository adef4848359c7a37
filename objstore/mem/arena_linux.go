package mem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePageBytes is the size of a transparent huge page on x86-64 and
// arm64 with 4 KiB base pages; a block is mapped aligned to it.
const hugePageBytes = 2 << 20

// mapBlock maps n bytes (a multiple of hugePageBytes) of anonymous memory
// outside the Go heap, so that the arena does not count towards the
// garbage collector's heap goal (which would otherwise grow by the
// arena's size and change how often the process under test collects, and
// how much fresh memory it touches between collections). It returns the
// block and the mapping to unmap (the block aligned within it).
//
// The block asks for transparent huge pages (madvise MADV_HUGEPAGE; the
// kernel grants them where /sys/kernel/mm/transparent_hugepage/enabled
// is "always" or "madvise" and it has 2 MiB of contiguous memory), and
// one byte of every 4 KiB page is then written from here, which faults
// it in. Both are for a machine whose hypervisor shadows the guest's
// page tables:
//   - the first user-space touch of a page costs an exit of its own
//     however the kernel populated it (measured: a 200 MB copy into
//     populated pages 313 ms, into pages also touched once 13 ms);
//   - an arena of 4 KiB pages is some 230,000 more mappings per 900 MB
//     for the hypervisor to shadow, and with them the kernel's copies
//     from the process's other memory (every pwrite of a log append) got
//     dearer and noisier: in the latency bench's produce-acks1 step,
//     copy_folio_from_iter_atomic took 322-599 perf samples per remote-WAL
//     run with 4 KiB pages and 265-271 with huge pages, and the store
//     stands in for memory that is not the broker's at all.
func mapBlock(n int) (block, mapping []byte, err error) {
	mapping, err = syscall.Mmap(-1, 0, n+hugePageBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	skip := (hugePageBytes - int(uintptr(unsafe.Pointer(&mapping[0]))%hugePageBytes)) % hugePageBytes
	block = mapping[skip : skip+n : skip+n]
	// Refused (EINVAL) on a kernel without transparent huge pages: the
	// block then has 4 KiB pages, as hugeBytes reports.
	_ = unix.Madvise(block, unix.MADV_HUGEPAGE)
	for i := 0; i < n; i += os.Getpagesize() {
		block[i] = 1
	}
	return block, mapping, nil
}

func unmapBlock(mapping []byte) error { return syscall.Munmap(mapping) }

// hugeBytes is how many bytes of the block starting at b's first byte are
// backed by transparent huge pages (AnonHugePages of its mapping in
// /proc/self/smaps), 0 where that cannot be read.
func hugeBytes(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0
	}
	defer f.Close()
	addr := uint64(uintptr(unsafe.Pointer(&b[0])))
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Bytes()
		if lo, hi, ok := smapsRange(line); ok {
			in = lo <= addr && addr < hi
			continue
		}
		if in && bytes.HasPrefix(line, []byte("AnonHugePages:")) {
			fields := bytes.Fields(line[len("AnonHugePages:"):])
			if len(fields) < 1 {
				return 0
			}
			kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// smapsRange parses the address range opening an smaps entry
// ("7f12a0000000-7f12a4200000 rw-p …").
func smapsRange(line []byte) (lo, hi uint64, ok bool) {
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 {
		return 0, 0, false
	}
	dash := bytes.IndexByte(line[:sp], '-')
	if dash < 0 {
		return 0, 0, false
	}
	lo, err1 := strconv.ParseUint(string(line[:dash]), 16, 64)
	hi, err2 := strconv.ParseUint(string(line[dash+1:sp]), 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return lo, hi, true
}

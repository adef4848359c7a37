package mem

import (
	"fmt"
	"slices"
)

// arenaBlockBytes is the size of one block of a Store's arena, a whole
// number of 2 MiB huge pages. An object goes into one block or, larger
// than a block, to the heap.
const arenaBlockBytes = 64 << 20

// arena is memory for object bodies, allocated and faulted in before the
// store is used: blocks handed out front to back, never reused (a
// replaced or deleted object's bytes stay where they are). Guarded by
// the Store's mutex.
type arena struct {
	blocks   [][]byte
	mappings [][]byte // what to unmap, one per block
	huge     int64    // bytes of the blocks backed by huge pages when made
	cur, off int      // the block being filled, and how much of it is used
	size     int64    // bytes in all blocks
	used     int64    // bytes handed out
	overflow int64    // bytes of bodies that found no room and went to the heap
	spilled  int64    // number of such bodies
}

// newArena allocates size bytes (rounded up to whole blocks), every page
// faulted in (mapBlock).
func newArena(size int64) (*arena, error) {
	a := &arena{}
	for a.size < size {
		b, m, err := mapBlock(arenaBlockBytes)
		if err != nil {
			a.free()
			return nil, fmt.Errorf("mem: arena of %d bytes: %w", size, err)
		}
		a.blocks, a.mappings = append(a.blocks, b), append(a.mappings, m)
		a.size += arenaBlockBytes
		a.huge += hugeBytes(b)
	}
	return a, nil
}

// free gives the blocks back. Nothing may read them afterwards.
func (a *arena) free() {
	for _, m := range a.mappings {
		_ = unmapBlock(m)
	}
	a.blocks, a.mappings, a.cur, a.off = nil, nil, 0, 0
}

// take returns n bytes of the arena, or nil when no block has room
// (counted as overflow). Caller holds the Store's mutex.
func (a *arena) take(n int) []byte {
	for n <= arenaBlockBytes && a.cur < len(a.blocks) {
		if a.off+n <= arenaBlockBytes {
			b := a.blocks[a.cur][a.off : a.off+n : a.off+n]
			a.off += n
			a.used += int64(n)
			return b
		}
		a.cur, a.off = a.cur+1, 0
	}
	a.overflow += int64(n)
	a.spilled++
	return nil
}

// ArenaStats is what WithArena's memory holds.
type ArenaStats struct {
	// Bytes is the arena's size; Used the bytes of bodies stored in it.
	Bytes, Used int64
	// HugePageBytes is how much of the arena the kernel backed with
	// transparent huge pages when it was made (Linux; 0 elsewhere, or
	// where the kernel has them off).
	HugePageBytes int64
	// OverflowBytes and OverflowObjects: bodies that found no room and
	// were copied to fresh heap memory instead (whose page faults the
	// arena exists to keep out of a measurement).
	OverflowBytes, OverflowObjects int64
}

// ArenaStats reports the arena's use; the zero ArenaStats without one.
func (s *Store) ArenaStats() ArenaStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.arena
	if a == nil {
		return ArenaStats{}
	}
	return ArenaStats{Bytes: a.size, Used: a.used, HugePageBytes: a.huge, OverflowBytes: a.overflow, OverflowObjects: a.spilled}
}

// copyIn is the stored copy of body: in the arena when the store has
// one with room, else on the heap.
func (s *Store) copyIn(body []byte) []byte {
	if s.arena != nil && len(body) > 0 {
		s.mu.Lock()
		b := s.arena.take(len(body))
		s.mu.Unlock()
		if b != nil {
			copy(b, body)
			return b
		}
	}
	data := slices.Clone(body)
	if data == nil {
		data = []byte{}
	}
	return data
}

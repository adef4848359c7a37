package kafkalog

import (
	"hash/crc32"
	"math"
)

// CRC-32C arithmetic for checking a run of batches and its own CRC32C in
// one pass over the bytes: the run's CRC is computed as the bytes go by,
// and each batch's CRC (over its bytes from attributes on) is derived from
// the running CRC at its start and end instead of being computed again.
//
// crc(B) from crc(A) and crc(A‖B), for Go's (pre- and post-inverted)
// CRC values: crc(B) = crc(A‖B) ⊕ shift(crc(A), |B|), where shift
// multiplies by x^(8|B|) modulo the Castagnoli polynomial (as zlib's
// crc32_combine does).

// castagnoliReflected is the Castagnoli polynomial, bit-reflected.
const castagnoliReflected = 0x82f63b78

// x2n[k] is x^(2^k) modulo the polynomial.
var x2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = multModP(p, p)
	}
	return t
}()

// multModP multiplies a and b modulo the polynomial (reflected bit order).
func multModP(a, b uint32) uint32 {
	// Branch-free: a and b are CRC values, random bits, so a branch on
	// each bit is mispredicted half the time (about 320 ns a call against
	// 60 here); a batch's check makes one call, a slice's first batch
	// about seven more (x8n).
	var p uint32
	for range 32 {
		p ^= b & -(a >> 31)
		a <<= 1
		b = b>>1 ^ castagnoliReflected&-(b&1)
	}
	return p
}

// x8nLow[j] and x8nHigh[j] are x^(8j) and x^(8*256*j) modulo the
// polynomial: x8n of a batch's length (below 64 KiB, the usual) is one
// product of two of them.
var x8nLow, x8nHigh = func() (lo, hi [256]uint32) {
	lo[0], hi[0] = 1<<31, 1<<31 // x^0
	for j := 1; j < 256; j++ {
		lo[j] = multModP(lo[j-1], x2n[3])  // times x^8
		hi[j] = multModP(hi[j-1], x2n[11]) // times x^2048
	}
	return lo, hi
}()

// x8n returns x^(8n) modulo the polynomial.
func x8n(n int) uint32 {
	p := multModP(x8nLow[n&255], x8nHigh[n>>8&255])
	// The bits from 2^16 on; bit i stands for x^(8*2^i) = x^(2^(i+3)).
	for m, k := n>>16, 19; m > 0; m, k = m>>1, k+1 {
		if m&1 != 0 {
			p = multModP(x2n[k&31], p)
		}
	}
	return p
}

// ValidateBatchesCRC32C validates every batch of b as Kafka's follower
// does a replicated batch, header and CRC: framing, size, magic, CRC32C,
// attributes, codec, and the record count against lastOffsetDelta (see
// validateHeaderCRC; the records are not walked: the leader checked them
// when it appended them, and each batch's CRC32C covers them), and returns
// the CRC32C (Castagnoli) of all of b, in one pass over the bytes. A
// remote-WAL follower checks a slice's stored CRC32C and its batches with
// it, then appends the slice with AppendVerifiedAsFollower, so that no
// byte is checksummed twice. Errors are *CorruptBatchError
// (ErrCorruptBatch) whose Position is the batch's offset within b.
func ValidateBatchesCRC32C(b []byte) (uint32, error) {
	var run uint32
	lastLen, lastShift := -1, uint32(0)
	for pos := 0; pos < len(b); {
		size, err := frameSize(b[pos:], int64(pos))
		if err != nil {
			return 0, err
		}
		batch := b[pos : pos+size]
		atAttrs := crc32.Update(run, castagnoli, batch[:offAttributes])
		run = crc32.Update(atAttrs, castagnoli, batch[offAttributes:])
		n := size - offAttributes
		if n != lastLen {
			// Batches of one producer are often the same size.
			lastLen, lastShift = n, x8n(n)
		}
		crc := run ^ multModP(lastShift, atAttrs)
		if _, err := validateHeaderCRC(batch, math.MaxInt32, crc); err != nil {
			return 0, atPosition(err, int64(pos))
		}
		pos += size
	}
	return run, nil
}

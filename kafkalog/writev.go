package kafkalog

// chunks is a run of batches held in several buffers, read as their
// concatenation: AppendVerifiedRunAsFollower's parts, or one buffer.
type chunks [][]byte

// span appends to dst the pieces of [from, to) of the concatenation.
func (c chunks) span(dst [][]byte, from, to int) [][]byte {
	base := 0
	for _, b := range c {
		end := base + len(b)
		if end > from && base < to {
			dst = append(dst, b[max(from-base, 0):min(to-base, len(b))])
		}
		if end >= to {
			break
		}
		base = end
	}
	return dst
}

// vectorWriter is a File that writes several buffers at one offset with
// one call (the OS file's pwritev; MemFS's one write).
type vectorWriter interface {
	writevAt(bufs [][]byte, off int64) error
}

// writeChunks writes bufs back to back at off: with one call when f can
// (vectorWriter), else one WriteAt each, so a File that wraps another
// (fault injection) sees every byte go through its WriteAt.
func writeChunks(f File, bufs [][]byte, off int64) error {
	if len(bufs) == 1 {
		_, err := f.WriteAt(bufs[0], off)
		return err
	}
	if v, ok := f.(vectorWriter); ok {
		return v.writevAt(bufs, off)
	}
	for _, b := range bufs {
		if _, err := f.WriteAt(b, off); err != nil {
			return err
		}
		off += int64(len(b))
	}
	return nil
}

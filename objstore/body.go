package objstore

import (
	"errors"
	"fmt"
	"io"
)

// ReadBody reads a GET response body of size bytes (its Content-Length;
// negative when unknown) into one buffer of exactly that size: the body
// is copied once, from the connection into the buffer the caller gets.
// (io.Copy into a bytes.Buffer of capacity size grows it at the end to
// look for EOF, copying the whole body a second time.) A body shorter or
// longer than size is an error wrapping io.ErrUnexpectedEOF.
func ReadBody(r io.Reader, size int64) ([]byte, error) {
	if size < 0 || size > 1<<40 {
		return io.ReadAll(r)
	}
	buf := make([]byte, size)
	if n, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("body %d bytes, Content-Length %d: %w", n, size, io.ErrUnexpectedEOF)
		}
		return nil, err
	}
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return nil, fmt.Errorf("body longer than its Content-Length %d: %w", size, io.ErrUnexpectedEOF)
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

package objstore

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestReadBodyExactOneBuffer(t *testing.T) {
	body := bytes.Repeat([]byte("kwal"), 1<<16)
	// A reader that returns a few bytes at a time, as a socket does.
	got, err := ReadBody(iotest.HalfReader(bytes.NewReader(body)), int64(len(body)))
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("ReadBody: %d bytes, %v", len(got), err)
	}
	if cap(got) != len(body) {
		t.Fatalf("buffer capacity %d for a body of %d: it was regrown (a second copy)", cap(got), len(body))
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := ReadBody(bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 { // the buffer, the test reader, the 1-byte EOF probe: no regrowth
		t.Fatalf("%v allocations per body", allocs)
	}
	for _, tc := range []struct {
		name string
		r    io.Reader
		size int64
	}{
		{"short", bytes.NewReader(body[:10]), 11},
		{"long", bytes.NewReader(body[:12]), 11},
	} {
		if _, err := ReadBody(tc.r, tc.size); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: err %v, want io.ErrUnexpectedEOF", tc.name, err)
		}
	}
	if got, err := ReadBody(bytes.NewReader(body[:7]), -1); err != nil || len(got) != 7 {
		t.Fatalf("unknown size: %d bytes, %v", len(got), err)
	}
	if _, err := ReadBody(iotest.ErrReader(errors.New("reset")), 5); err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a read error must come back as it is: %v", err)
	}
}

package rwnode

import (
	"testing"

	"github.com/kwal/kwal/metadata"
)

// TestUploadStart: a new leader cuts from the end of the published slices
// below its log end (the range an older leader appended and never
// uploaded), never from an older leader's slices past its log end (they
// are dead), never below its log start, and from its log end when the
// store has nothing of the partition or everything up to the log end.
func TestUploadStart(t *testing.T) {
	sl := func(base, last int64) metadata.IndexedSlice {
		return metadata.IndexedSlice{SliceEntry: metadata.SliceEntry{BaseOffset: base, LastOffset: last}}
	}
	for _, c := range []struct {
		name             string
		slices           []metadata.IndexedSlice
		logStart, logEnd int64
		want             int64
	}{
		{"nothing published", nil, 0, 40, 40},
		{"published to the log end", []metadata.IndexedSlice{sl(0, 20), sl(21, 39)}, 0, 40, 40},
		{"an older leader's tail was never uploaded", []metadata.IndexedSlice{sl(0, 25)}, 0, 40, 26},
		{"dead slices past the log end do not count", []metadata.IndexedSlice{sl(0, 25), sl(41, 50)}, 0, 40, 26},
		{"a slice across the log end does not count", []metadata.IndexedSlice{sl(0, 25), sl(26, 45)}, 0, 40, 26},
		{"not below the log start", []metadata.IndexedSlice{sl(0, 25)}, 30, 40, 30},
	} {
		if got := uploadStart(c.slices, c.logStart, c.logEnd); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

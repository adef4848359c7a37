package s3store

import "testing"

func TestRangeHeader(t *testing.T) {
	for _, tc := range []struct {
		off, length int64
		want        string
	}{
		{0, -1, ""}, {5, -1, "bytes=5-"}, {0, 1, "bytes=0-0"}, {10, 6, "bytes=10-15"}, {-7, 3, "bytes=-7"},
	} {
		if got := rangeHeader(tc.off, tc.length); got != tc.want {
			t.Errorf("rangeHeader(%d, %d) = %q, want %q", tc.off, tc.length, got, tc.want)
		}
	}
}

func TestDirListPrefix(t *testing.T) {
	for in, want := range map[string]string{"": "", "a": "", "a/": "a/", "a/b": "a/", "a/b/c/d": "a/b/c/"} {
		if got := dirListPrefix(in); got != want {
			t.Errorf("dirListPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

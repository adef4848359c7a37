package kafkalog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/kwal/kwal/clock"
)

// sectionLog is a log on the real file system (sections need OS files)
// with batches of varied sizes over several segments.
func sectionLog(t *testing.T) *Log {
	t.Helper()
	l, err := Open(t.TempDir(), Config{SegmentBytes: 16 << 10, IndexIntervalBytes: 1024, RetentionBytes: 1, Clock: clock.NewManual(t0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := range 60 {
		mustAppendLeader(t, l, batch(1+i%5, 50+(i*131)%900), 0)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, got %d", len(l.Segments()))
	}
	return l
}

// refSection is what the broker's copying path sends: Read, then the
// batches below bound, then (unless atLeastOne) those within maxBytes.
func refSection(t *testing.T, l *Log, offset int64, maxBytes int, below int64, atLeastOne bool) []byte {
	data, err := l.Read(offset, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for pos < len(data) {
		h, err := ParseBatchHeader(data[pos:])
		if err != nil {
			t.Fatal(err)
		}
		if h.LastOffset() >= below || (!atLeastOne || pos > 0) && pos+h.Size() > maxBytes {
			break
		}
		pos += h.Size()
	}
	return data[:pos]
}

// TestReadSectionMatchesRead: for any offset, byte limit, bound and
// at-least-one flag, the section holds exactly the bytes of the copying
// read, trimmed as the broker trims it.
func TestReadSectionMatchesRead(t *testing.T) {
	l := sectionLog(t)
	leo := l.LogEndOffset()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		off := rng.Int64N(leo + 1)
		maxBytes := 1 + rng.IntN(20<<10)
		if i%3 == 0 {
			maxBytes = 1 + rng.IntN(200) // below one batch
		}
		below := rng.Int64N(leo + 2)
		one := rng.IntN(2) == 0
		sec, err := l.ReadSection(off, maxBytes, below, one)
		if err != nil {
			t.Fatal(err)
		}
		want := refSection(t, l, off, maxBytes, below, one)
		var got []byte
		if sec != nil {
			got, err = sec.Bytes()
			sec.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Fatal("empty section returned instead of nil")
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("offset %d maxBytes %d below %d atLeastOne %v: section of %d bytes, copying read %d bytes", off, maxBytes, below, one, len(got), len(want))
		}
	}
}

// TestSectionOutlivesSegment: a section taken before its segment is
// deleted by retention, and before the log is closed, still reads its
// bytes (it holds its own descriptor).
func TestSectionOutlivesSegment(t *testing.T) {
	l := sectionLog(t)
	want, err := l.Read(0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := l.ReadSection(0, 4096, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer sec.Close()
	segs := l.Segments()
	if err := l.SetHighWatermark(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if n, err := l.DeleteRetentionExpired(segs[1].BaseOffset); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := sec.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("section reads %d bytes after deletion, want the %d it covered", buf.Len(), len(want))
	}
}

// TestReadSectionMemFS: MemFS logs hand out no sections.
func TestReadSectionMemFS(t *testing.T) {
	e := newEnv(t, Config{})
	mustAppendLeader(t, e.log, batch(3, 100), 0)
	if _, err := e.log.ReadSection(0, 1<<20, 10, true); !errors.Is(err, ErrNoSection) {
		t.Fatalf("MemFS ReadSection: %v, want ErrNoSection", err)
	}
}

package kafkalog

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// cutAtBatches cuts run into parts of 1..4 whole batches.
func cutAtBatches(t *testing.T, rng *rand.Rand, run []byte) [][]byte {
	t.Helper()
	var parts [][]byte
	for pos := 0; pos < len(run); {
		start := pos
		for k := 1 + rng.IntN(4); k > 0 && pos < len(run); k-- {
			h, err := ParseBatchHeader(run[pos:])
			if err != nil {
				t.Fatal(err)
			}
			pos += h.Size()
		}
		parts = append(parts, run[start:pos])
	}
	return parts
}

// noVecFS hides the vectored write of its files, as a File that wraps
// another does (fault injection): writeChunks falls back to WriteAt.
type noVecFS struct{ FS }

func (f noVecFS) Create(name string) (File, error) {
	file, err := f.FS.Create(name)
	return noVecFile{file}, err
}

func (f noVecFS) Open(name string) (File, error) {
	file, err := f.FS.Open(name)
	return noVecFile{file}, err
}

type noVecFile struct{ File }

// A run appended in parts writes exactly the bytes, segments and infos
// that the same run appended whole writes, on every kind of file (pwritev
// on the OS, MemFS's one write, and WriteAt one part at a time), across
// segment rolls in the middle of a run and of a part.
func TestAppendVerifiedRunAsFollower(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, fsName := range []string{"os", "mem", "wrapped"} {
		t.Run("fs="+fsName, func(t *testing.T) {
			for trial := range 6 {
				run := runOfBatches(rng, 5+rng.IntN(40))
				parts := cutAtBatches(t, rng, run)
				open := func(name string) *Log {
					var fs FS = NewMemFS()
					dir := "/data/" + name
					switch fsName {
					case "os":
						fs, dir = OSFS{}, filepath.Join(t.TempDir(), name)
					case "wrapped":
						fs = noVecFS{NewMemFS()}
					}
					l, err := Open(dir, Config{FS: fs, Clock: clock.NewManual(t0), SegmentBytes: 4 << 10, Logger: slog.New(slog.DiscardHandler)})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { l.Close() })
					return l
				}
				whole, inParts := open("whole"), open("parts")
				iw, err := whole.AppendVerifiedAsFollower(run)
				if err != nil {
					t.Fatal(err)
				}
				ip, err := inParts.AppendVerifiedRunAsFollower(parts)
				if err != nil {
					t.Fatalf("trial %d: %v", trial, err)
				}
				if iw.LastOffset != ip.LastOffset || iw.NumBatches != ip.NumBatches || iw.Bytes != ip.Bytes || iw.LastEpoch != ip.LastEpoch {
					t.Fatalf("trial %d: infos differ: %+v vs %+v", trial, iw, ip)
				}
				sw, sp := whole.Segments(), inParts.Segments()
				if len(sw) != len(sp) || len(sw) < 2 && len(run) > 4<<10 {
					t.Fatalf("trial %d: %d segments whole, %d in parts", trial, len(sw), len(sp))
				}
				for i := range sw {
					a, err := whole.ReadSegmentRange(sw[i].BaseOffset, 0, sw[i].Size)
					if err != nil {
						t.Fatal(err)
					}
					b, err := inParts.ReadSegmentRange(sp[i].BaseOffset, 0, sp[i].Size)
					if err != nil {
						t.Fatal(err)
					}
					if sw[i].BaseOffset != sp[i].BaseOffset || !bytes.Equal(a, b) {
						t.Fatalf("trial %d: segment %d differs", trial, i)
					}
				}
			}
		})
	}
}

// Nothing of a run is appended when any part of it is refused: a gap, an
// overlap or an epoch going down in its last part.
func TestAppendVerifiedRunAllOrNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	run := runOfBatches(rng, 8)
	parts := cutAtBatches(t, rng, run)
	for name, last := range map[string][]byte{
		"gap":     kafkalogtest.MakeBatchN(1_000_000, 100, 1, 10, 0),
		"overlap": kafkalogtest.MakeBatchN(0, 100, 1, 10, 0),
	} {
		e := newEnv(t, Config{})
		_, err := e.log.AppendVerifiedRunAsFollower(append(append([][]byte{}, parts...), last))
		if !errors.Is(err, ErrOffsetGap) && !errors.Is(err, ErrOffsetOverlap) {
			t.Fatalf("%s: err %v", name, err)
		}
		if e.log.LogEndOffset() != 0 {
			t.Fatalf("%s: log end %d after a refused run", name, e.log.LogEndOffset())
		}
	}
}

// pwritev of more buffers than IOV_MAX, some empty, writes their
// concatenation.
func TestWritevManyBuffers(t *testing.T) {
	f, err := OSFS{}.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(11, 12))
	var bufs [][]byte
	var want []byte
	for range 2500 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		bufs, want = append(bufs, b), append(want, b...)
	}
	if err := writeChunks(f, bufs, 7); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.(osFile).Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[7:], want) {
		t.Fatalf("file holds %d bytes, want %d + 7", len(got), len(want))
	}
}

func TestChunksSpan(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for range 200 {
		var c chunks
		var all []byte
		for range rng.IntN(6) {
			b := make([]byte, rng.IntN(10))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			c, all = append(c, b), append(all, b...)
		}
		from := rng.IntN(len(all) + 1)
		to := from + rng.IntN(len(all)-from+1)
		if got := bytes.Join(c.span(nil, from, to), nil); !bytes.Equal(got, all[from:to]) {
			t.Fatalf("span [%d, %d) of %d bytes: %x, want %x", from, to, len(all), got, all[from:to])
		}
	}
}

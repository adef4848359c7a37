package kafkalog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Checkpoint file names, as Kafka names them (Kafka keeps the high
// watermark and recovery point in one file per log dir; kwal keeps one per
// partition directory with a single value).
const (
	leaderEpochCheckpointFile   = "leader-epoch-checkpoint"
	highWatermarkCheckpointFile = "replication-offset-checkpoint"
	recoveryPointCheckpointFile = "recovery-point-offset-checkpoint"
	checkpointVersion           = 0
)

// writeCheckpoint atomically replaces dir/name with Kafka's checkpoint
// text format: version line, count line, one line per entry. It writes a
// temp file, fsyncs it, renames it over name and fsyncs the directory.
func writeCheckpoint(fsys FS, dir, name string, lines []string) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d\n%d\n", checkpointVersion, len(lines))
	for _, l := range lines {
		sb.WriteString(l)
		sb.WriteByte('\n')
	}
	if err := writeFileAtomic(fsys, dir, name, []byte(sb.String())); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", name, err)
	}
	return nil
}

// writeFileAtomic replaces dir/name with data: temp file, fsync, rename,
// directory fsync.
func writeFileAtomic(fsys FS, dir, name string, data []byte) error {
	final := filepath.Join(dir, name)
	tmp := final + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, final)
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	return err
}

// readCheckpoint reads a checkpoint written by writeCheckpoint. A missing
// file yields (nil, nil). A malformed one yields an error.
func readCheckpoint(fsys FS, dir, name string) ([]string, error) {
	f, err := fsys.Open(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	if size > 16<<20 {
		return nil, fmt.Errorf("read checkpoint %s: %d bytes is too large", name, size)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(buf), "\n"), "\n")
	if len(lines) < 2 || lines[0] != strconv.Itoa(checkpointVersion) {
		return nil, fmt.Errorf("read checkpoint %s: bad version line", name)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("read checkpoint %s: count line %q does not match %d entries", name, lines[1], len(lines)-2)
	}
	return lines[2:], nil
}

func writeOffsetCheckpoint(fsys FS, dir, name string, v int64) error {
	return writeCheckpoint(fsys, dir, name, []string{strconv.FormatInt(v, 10)})
}

// readOffsetCheckpoint returns the single value, or ok=false if absent.
func readOffsetCheckpoint(fsys FS, dir, name string) (v int64, ok bool, err error) {
	lines, err := readCheckpoint(fsys, dir, name)
	if err != nil || lines == nil {
		return 0, false, err
	}
	if len(lines) != 1 {
		return 0, false, fmt.Errorf("read checkpoint %s: %d entries, want 1", name, len(lines))
	}
	v, err = strconv.ParseInt(lines[0], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	return v, true, nil
}

func epochLines(es []EpochEntry) []string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = fmt.Sprintf("%d %d", e.Epoch, e.StartOffset)
	}
	return lines
}

func parseEpochLines(lines []string) ([]EpochEntry, error) {
	es := make([]EpochEntry, 0, len(lines))
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("leader-epoch-checkpoint: bad line %q", l)
		}
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("leader-epoch-checkpoint: bad line %q", l)
		}
		if n := len(es); n > 0 && (int32(ep) <= es[n-1].Epoch || off < es[n-1].StartOffset) {
			return nil, fmt.Errorf("leader-epoch-checkpoint: line %q out of order", l)
		}
		es = append(es, EpochEntry{Epoch: int32(ep), StartOffset: off})
	}
	return es, nil
}

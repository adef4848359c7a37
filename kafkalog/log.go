package kafkalog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kwal/kwal/clock"
)

// AppendInfo describes a successful append.
type AppendInfo struct {
	FirstOffset int64 // base offset of the first batch
	LastOffset  int64 // last offset of the last batch
	LastEpoch   int32 // partitionLeaderEpoch of the last batch
	NumBatches  int
	NumRecords  int64
	Bytes       int
	// LastMaxTimestamp is the maxTimestamp of the last batch, so a caller
	// need not walk the batches to find it.
	LastMaxTimestamp int64
	// Batches are the headers of the appended batches, in offset order,
	// with the offsets and leader epoch the log gave them: what a caller
	// needs for producer state without walking the bytes again. The slice
	// is the caller's.
	Batches []BatchInfo
}

// BatchInfo is the part of one appended batch's header that producer
// state and callers need.
type BatchInfo struct {
	BaseOffset    int64
	LastOffset    int64
	LeaderEpoch   int32
	MaxTimestamp  int64
	ProducerID    int64 // -1: not idempotent
	ProducerEpoch int16
	BaseSequence  int32
	// LastOffsetDelta is lastOffsetDelta; RecordCount the header's count
	// (they differ only in compressed batches compacted by a cleaner).
	LastOffsetDelta int32
	RecordCount     int32
	Transactional   bool
	Control         bool
}

// LastSequence is the sequence number of the batch's last record,
// wrapping at math.MaxInt32 as Kafka's DefaultRecordBatch.incrementSequence does.
func (b BatchInfo) LastSequence() int32 { return IncrementSequence(b.BaseSequence, b.LastOffsetDelta) }

// IncrementSequence is seq+n wrapping past math.MaxInt32 to 0.
func IncrementSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

func batchInfoOf(h BatchHeader) BatchInfo {
	return BatchInfo{
		BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), LeaderEpoch: h.PartitionLeaderEpoch,
		MaxTimestamp: h.MaxTimestamp, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
		BaseSequence: h.BaseSequence, LastOffsetDelta: h.LastOffsetDelta, RecordCount: h.RecordCount,
		Transactional: h.Transactional(), Control: h.Control(),
	}
}

// SegmentPosition is where in which segment a batch starts.
type SegmentPosition struct {
	SegmentBaseOffset int64
	Position          int64
}

// SegmentSlice is a run of whole batches of one segment and one leader
// epoch, as Slice returns it.
type SegmentSlice struct {
	SegmentBaseOffset int64
	BasePosition      int64 // file position of the first batch
	EndPosition       int64 // file position after the last batch
	FirstOffset       int64
	LastOffset        int64
	LeaderEpoch       int32
	Data              []byte // the file bytes [BasePosition, EndPosition)
	NextOffset        int64  // LastOffset+1: where the next Slice starts
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	BaseOffset int64
	NextOffset int64 // offset after the segment's last batch
	Size       int64
	Path       string
}

// Log is one partition's log. See doc.go for the concurrency rules.
type Log struct {
	dir    string
	cfg    Config
	fs     FS
	clock  clock.Clock
	logger *slog.Logger
	bufs   sync.Pool // *segReader scratch for readers

	// writeMu serialises everything that changes the log or its files.
	writeMu sync.Mutex
	w       struct { // guarded by writeMu
		unflushed     int64
		lastFlush     time.Time
		lastHWCkpt    time.Time
		ckptHW        int64 // last high watermark written, -1 none
		recoveryPoint int64
		compacted     bool // the cleaner has rewritten (or may have) segments
		// epochsDirty: the leader-epoch cache has entries the checkpoint
		// file lacks (assignEpochs); they are written before the recovery
		// point passes them (roll, Close) or at Flush.
		epochsDirty bool
		failed      error
		buf         []byte
		refs        []batchRef
		idx         []indexEntry
		one         [1][]byte // chunks of a one-buffer append
		iov         [][]byte  // a write's pieces (chunks.span)
	}

	// mu guards what readers see. Writers take it only to publish.
	mu struct {
		sync.RWMutex
		segs   []*segment // by base offset; the last is active
		start  int64      // log start inside segs[0] (logstart.go); 0: its base
		leo    int64
		hw     int64
		epochs epochCache
		// producers is the producer table; the writer changes it.
		producers producerState
		notify    chan struct{}
		closed    bool
	}
}

type batchRef struct {
	pos int
	h   BatchHeader
}

// Open opens or creates the log in dir, recovering it: segments from the
// one holding the recovery point on are validated batch by batch and a
// torn or corrupt tail is truncated (logged with slog.Warn); the offset
// index is rebuilt; the leader-epoch cache is trimmed to the log end.
// Errors: invalid config, or I/O errors.
func Open(dir string, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, fs: cfg.FS, clock: cfg.Clock, logger: cfg.Logger.With("log", dir)}
	l.w.ckptHW = -1
	if err := l.load(); err != nil {
		for _, s := range l.mu.segs {
			s.file.Close()
		}
		return nil, fmt.Errorf("kafkalog: open %s: %w", dir, err)
	}
	return l, nil
}

func (l *Log) load() error {
	if err := l.fs.MkdirAll(l.dir); err != nil {
		return err
	}
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var bases []int64
	for _, n := range names {
		if strings.HasSuffix(n, ".tmp") {
			if err := l.fs.Remove(l.dir + "/" + n); err != nil {
				return err
			}
			continue
		}
		if b, ok := parseSegmentName(n); ok {
			bases = append(bases, b)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	// A cleaner checkpoint says the log may hold compacted segments.
	_, l.w.compacted, err = readOffsetCheckpoint(l.fs, l.dir, cleanerCheckpointFile)
	if err != nil {
		l.logger.Warn("kafkalog: unreadable cleaner checkpoint; treating the log as compacted", "err", err)
		l.w.compacted = true
	}
	l.w.compacted = l.w.compacted || l.cfg.Compacted
	rp, _, err := readOffsetCheckpoint(l.fs, l.dir, recoveryPointCheckpointFile)
	if err != nil {
		l.logger.Warn("kafkalog: ignoring unreadable recovery point; recovering every segment", "err", err)
		rp = 0
	}
	now := l.clock.Now()
	var epochStarts []EpochEntry // of the segments recovered (verify)
	for i, base := range bases {
		s := newSegmentPaths(l.dir, base)
		if n := len(l.mu.segs); n > 0 && base < l.mu.segs[n-1].next {
			l.logger.Warn("kafkalog: segment overlaps its predecessor; deleting it and later segments", "segment", base, "expectedBase", l.mu.segs[n-1].next)
			if err := l.removeFiles(bases[i:]); err != nil {
				return err
			}
			break
		}
		if s.file, err = l.fs.Open(s.logPath); err != nil {
			return err
		}
		l.mu.segs = append(l.mu.segs, s)
		size, err := s.file.Size()
		if err != nil {
			return err
		}
		verify := i == len(bases)-1 || bases[i+1] > rp
		res, err := scanSegment(s.file, size, base, l.cfg.IndexIntervalBytes, verify, l.w.compacted)
		if err != nil {
			return fmt.Errorf("scan segment %d: %w", base, err)
		}
		s.size, s.next, s.index, s.maxTimestamp = res.validEnd, res.next, res.index, res.maxTimestamp
		s.timeIndex, s.bytesSinceTimeIndex = res.timeIndex, res.bytesSinceTimeIndex
		epochStarts = append(epochStarts, res.epochStarts...)
		s.bytesSinceIndex, s.lastModified = res.bytesSinceIndex, now
		if res.validEnd > 0 {
			s.firstAppend = now
		}
		if res.validEnd < size {
			l.logger.Warn("kafkalog: truncating torn or corrupt segment tail",
				"segment", base, "position", res.validEnd, "droppedBytes", size-res.validEnd, "reason", res.problem)
			if err := s.file.Truncate(res.validEnd); err != nil {
				return err
			}
			if err := s.file.Sync(); err != nil {
				return err
			}
			if i+1 < len(bases) {
				l.logger.Warn("kafkalog: deleting segments after the truncated one", "from", bases[i+1], "count", len(bases)-i-1)
				if err := l.removeFiles(bases[i+1:]); err != nil {
					return err
				}
			}
			break
		}
	}
	if len(l.mu.segs) == 0 {
		s, err := l.createSegment(0)
		if err != nil {
			return err
		}
		l.mu.segs = append(l.mu.segs, s)
	}
	l.mu.leo = l.active().next
	l.w.recoveryPoint = min(rp, l.active().base)

	l.loadLogStart()
	lines, err := readCheckpoint(l.fs, l.dir, leaderEpochCheckpointFile)
	if err != nil {
		return err
	}
	entries, err := parseEpochLines(lines)
	if err != nil {
		return err
	}
	l.mu.epochs.entries = entries
	ch1 := l.mu.epochs.truncateFromEnd(l.mu.leo)
	// The checkpoint holds every epoch that starts below the recovery
	// point (assignEpochs defers the write, but roll and Close write it
	// before the recovery point moves); the epochs of the batches past it
	// are taken from the segments recovered, as Kafka's LogSegment.recover
	// does, so an epoch whose checkpoint write a crash lost is found again.
	ch3 := false
	for _, e := range epochStarts {
		if latest, ok := l.mu.epochs.latest(); (!ok || e.Epoch > latest.Epoch) && e.StartOffset < l.mu.leo {
			l.mu.epochs.assign(e.Epoch, e.StartOffset)
			l.logger.Info("kafkalog: leader epoch recovered from the log, not in its checkpoint", "epoch", e.Epoch, "startOffset", e.StartOffset)
			ch3 = true
		}
	}
	ch2 := l.mu.epochs.truncateFromStart(l.logStartOffset())
	if ch1 || ch2 || ch3 {
		if err := l.writeEpochCheckpoint(); err != nil {
			return err
		}
	}
	hw, _, err := readOffsetCheckpoint(l.fs, l.dir, highWatermarkCheckpointFile)
	if err != nil {
		l.logger.Warn("kafkalog: ignoring unreadable high-watermark checkpoint", "err", err)
	}
	l.mu.hw = min(max(hw, l.logStartOffset()), l.mu.leo)
	l.w.ckptHW = hw
	l.w.lastFlush, l.w.lastHWCkpt = now, now
	return l.loadProducerState()
}

// removeFiles deletes the files of the given segments, newest first so
// that a crash leaves a prefix of the log.
func (l *Log) removeFiles(bases []int64) error {
	for i := len(bases) - 1; i >= 0; i-- {
		s := newSegmentPaths(l.dir, bases[i])
		if err := l.fs.Remove(s.logPath); err != nil {
			return err
		}
		if err := l.fs.Remove(s.indexPath); err != nil {
			return err
		}
	}
	return l.fs.SyncDir(l.dir)
}

func (l *Log) createSegment(base int64) (*segment, error) {
	s := newSegmentPaths(l.dir, base)
	var err error
	if s.file, err = l.fs.Create(s.logPath); err != nil {
		return nil, err
	}
	if err := l.writeIndexFile(s.indexPath, nil); err != nil {
		s.file.Close()
		return nil, err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		s.file.Close()
		return nil, err
	}
	s.lastModified = l.clock.Now()
	return s, nil
}

func (l *Log) writeIndexFile(path string, entries []indexEntry) error {
	f, err := l.fs.Create(path)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		_, err = f.WriteAt(encodeIndex(entries), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeEpochCheckpoint writes the leader-epoch cache to its checkpoint
// (fsynced). Caller holds writeMu.
func (l *Log) writeEpochCheckpoint() error {
	if err := writeCheckpoint(l.fs, l.dir, leaderEpochCheckpointFile, epochLines(l.mu.epochs.entries)); err != nil {
		return err
	}
	l.w.epochsDirty = false
	return nil
}

// flushEpochCheckpoint writes the leader-epoch checkpoint if the cache
// has entries it lacks. Caller holds writeMu.
func (l *Log) flushEpochCheckpoint() error {
	if !l.w.epochsDirty {
		return nil
	}
	return l.writeEpochCheckpoint()
}

// active is the last segment. Caller holds mu or writeMu.
func (l *Log) active() *segment { return l.mu.segs[len(l.mu.segs)-1] }

// logStartOffset: caller holds mu or writeMu.
func (l *Log) logStartOffset() int64 { return max(l.mu.segs[0].base, l.mu.start) }

// writable checks that writes may proceed. Caller holds writeMu.
func (l *Log) writable() error {
	if l.mu.closed {
		return ErrClosed
	}
	if l.w.failed != nil {
		return fmt.Errorf("%w: %v", ErrFailed, l.w.failed)
	}
	return nil
}

// AppendAsLeader validates batches (a concatenation of v2 batches), assigns
// them offsets from the log end, stamps leaderEpoch into each and appends
// them. If any batch is invalid nothing is appended. The caller's bytes
// are not modified. A leaderEpoch above the latest cached one starts a new
// leader-epoch entry at the current log end.
//
// Errors: *CorruptBatchError (ErrCorruptBatch), ErrBatchTooLarge,
// ErrEpochRegression (leaderEpoch below the latest cached epoch),
// ErrClosed, ErrFailed, or an I/O error (after which the log may be
// ErrFailed).
func (l *Log) AppendAsLeader(batches []byte, leaderEpoch int32) (AppendInfo, error) {
	defer l.changed() // after the unlock
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.leaderAppendable(leaderEpoch); err != nil {
		return AppendInfo{}, err
	}
	refs := l.w.refs[:0]
	err := splitBatches(batches, l.cfg.MaxBatchBytes, func(h BatchHeader, b []byte) error {
		refs = append(refs, batchRef{h: h}) // pos set below
		return nil
	})
	l.w.refs = refs
	if err != nil {
		return AppendInfo{}, fmt.Errorf("kafkalog: append as leader: %w", err)
	}
	return l.assignAndAppend(append(l.w.buf[:0], batches...), refs, leaderEpoch)
}

// AppendValidatedAsLeader appends one batch a BatchValidator accepted, as
// AppendAsLeader does, without validating it again (the produce path
// validates each batch once). Like Kafka's leader, it sets the header's
// maxTimestamp to the records' largest timestamp (and the CRC with it)
// when the client's differs and the batch is CreateTime.
//
// Errors: as AppendAsLeader; ErrBatchTooLarge if the batch is over this
// log's MaxBatchBytes.
func (l *Log) AppendValidatedAsLeader(vb ValidBatch, leaderEpoch int32) (AppendInfo, error) {
	defer l.changed() // after the unlock
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.leaderAppendable(leaderEpoch); err != nil {
		return AppendInfo{}, err
	}
	if len(vb.bytes) < BatchHeaderSize {
		return AppendInfo{}, fmt.Errorf("kafkalog: append as leader: %w: not a batch from BatchValidator.Validate", ErrCorruptBatch)
	}
	if len(vb.bytes) > l.cfg.MaxBatchBytes {
		return AppendInfo{}, fmt.Errorf("kafkalog: append as leader: %w: %d bytes, max %d", ErrBatchTooLarge, len(vb.bytes), l.cfg.MaxBatchBytes)
	}
	buf := append(l.w.buf[:0], vb.bytes...)
	h := vb.header
	if !h.LogAppendTime() && h.MaxTimestamp != vb.maxTimestamp {
		h.MaxTimestamp, h.CRC = vb.maxTimestamp, setMaxTimestamp(buf, vb.maxTimestamp)
	}
	refs := append(l.w.refs[:0], batchRef{h: h})
	l.w.refs = refs
	return l.assignAndAppend(buf, refs, leaderEpoch)
}

// leaderAppendable checks the log and the epoch of a leader append.
// Caller holds writeMu.
func (l *Log) leaderAppendable(leaderEpoch int32) error {
	if err := l.writable(); err != nil {
		return err
	}
	if leaderEpoch < 0 {
		return fmt.Errorf("kafkalog: append as leader: %w: negative epoch %d", ErrEpochRegression, leaderEpoch)
	}
	if latest, ok := l.mu.epochs.latest(); ok && leaderEpoch < latest.Epoch {
		return fmt.Errorf("kafkalog: append as leader: %w: epoch %d, latest %d", ErrEpochRegression, leaderEpoch, latest.Epoch)
	}
	return nil
}

// assignAndAppend stamps offsets from the log end and leaderEpoch into
// buf (validated batches, the log's own copy, described by refs) and
// appends it. Caller holds writeMu.
func (l *Log) assignAndAppend(buf []byte, refs []batchRef, leaderEpoch int32) (AppendInfo, error) {
	l.w.buf = buf
	next := l.mu.leo
	pos := 0
	for i := range refs {
		r := &refs[i]
		r.pos = pos
		SetBaseOffset(buf[pos:], next)
		SetPartitionLeaderEpoch(buf[pos:], leaderEpoch)
		r.h.BaseOffset, r.h.PartitionLeaderEpoch = next, leaderEpoch
		next = r.h.NextOffset()
		pos += r.h.Size()
	}
	if len(refs) > 0 {
		if err := l.assignEpochs(refs); err != nil {
			return AppendInfo{}, err
		}
	}
	l.w.one[0] = buf
	return l.appendValidated(l.w.one[:], refs)
}

// AppendAsFollower appends batches replicated from the leader as they
// are: offsets and leader epochs kept. The first batch must start at the
// log end offset and the batches must be contiguous; their epochs must not
// go below the latest cached epoch (a higher one is recorded). If anything
// is wrong nothing is appended.
//
// Errors: *OffsetError matching ErrOffsetGap or ErrOffsetOverlap,
// *CorruptBatchError (ErrCorruptBatch), ErrEpochRegression, ErrClosed,
// ErrFailed, or an I/O error.
func (l *Log) AppendAsFollower(batches []byte) (AppendInfo, error) {
	return l.appendAsFollower(nil, batches, false)
}

// AppendVerifiedAsFollower is AppendAsFollower for batches the caller has
// validated already with ValidateBatchesCRC32C (a remote-WAL follower,
// which checks a slice's CRC32C and its batches' CRCs and headers in that
// one pass, as Kafka's follower checks a batch): each batch's framing,
// offsets and leader epoch are checked here, its CRC is not again, and
// its records are not walked. A compacted log validates them all the same.
func (l *Log) AppendVerifiedAsFollower(batches []byte) (AppendInfo, error) {
	return l.appendAsFollower(nil, batches, true)
}

// AppendVerifiedRunAsFollower is AppendVerifiedAsFollower of the
// concatenation of parts (each holding whole batches), without
// concatenating them: each segment's share is written with one vectored
// write (pwritev on the OS file system) rather than one write per part.
// A remote-WAL follower appends a run of consecutive slices, each in its
// own GET body, this way. The checks, the errors and the all-or-nothing
// rule are AppendVerifiedAsFollower's for the whole run.
func (l *Log) AppendVerifiedRunAsFollower(parts [][]byte) (AppendInfo, error) {
	return l.appendAsFollower(parts, nil, true)
}

// appendAsFollower appends parts, or batches when parts is nil.
func (l *Log) appendAsFollower(parts [][]byte, batches []byte, verified bool) (AppendInfo, error) {
	defer l.changed() // after the unlock
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return AppendInfo{}, err
	}
	if parts == nil {
		l.w.one[0] = batches
		parts = l.w.one[:]
		defer func() { l.w.one[0] = nil }() // keep no caller's buffer
	}
	refs := l.w.refs[:0]
	expected := l.mu.leo
	latest := UndefinedEpoch
	if e, ok := l.mu.epochs.latest(); ok {
		latest = e.Epoch
	}
	pos := 0
	// A compacted leader's sealed segments have gaps and sparse batches;
	// a follower catching up copies them as they are.
	gapsOK := l.cfg.Compacted
	each := func(h BatchHeader, b []byte) error {
		if h.BaseOffset < expected || (!gapsOK && h.BaseOffset != expected) {
			return offsetMismatch(expected, h.BaseOffset)
		}
		if h.PartitionLeaderEpoch < latest && h.PartitionLeaderEpoch >= 0 {
			return fmt.Errorf("%w: batch at offset %d has epoch %d, latest %d", ErrEpochRegression, h.BaseOffset, h.PartitionLeaderEpoch, latest)
		}
		latest = max(latest, h.PartitionLeaderEpoch)
		expected = h.NextOffset()
		refs = append(refs, batchRef{pos: pos, h: h})
		pos += len(b)
		return nil
	}
	var err error
	for _, part := range parts {
		// Static calls, so that each (and what it captures) stays on the
		// stack: no allocation per part.
		switch {
		case l.cfg.Compacted:
			err = splitStoredBatches(part, math.MaxInt32, each)
		case verified:
			err = splitVerifiedBatches(part, math.MaxInt32, each)
		default:
			err = splitBatches(part, math.MaxInt32, each)
		}
		if err != nil {
			break
		}
	}
	l.w.refs = refs
	if err != nil {
		return AppendInfo{}, fmt.Errorf("kafkalog: append as follower: %w", err)
	}
	if err := l.assignEpochs(refs); err != nil {
		return AppendInfo{}, err
	}
	return l.appendValidated(parts, refs)
}

// assignEpochs records each new epoch among refs. The checkpoint file is
// not written here, on the append path (a temp file, two fsyncs and a
// rename per new epoch: on a follower, per new log and per leader
// change), but before the recovery point passes the new entries (roll,
// Close) and at Flush: recovery takes the epochs of the batches past the
// recovery point from the segments themselves (load), as Kafka's
// LogSegment.recover does, and trims entries past the log end. So a
// crash between this append and the checkpoint write loses no epoch.
// Caller holds writeMu.
func (l *Log) assignEpochs(refs []batchRef) error {
	changed := false
	for i := range refs {
		h := &refs[i].h
		if h.PartitionLeaderEpoch < 0 {
			continue
		}
		if latest, ok := l.mu.epochs.latest(); ok && latest.Epoch >= h.PartitionLeaderEpoch {
			continue
		}
		l.mu.Lock()
		l.mu.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		l.mu.Unlock()
		changed = true
	}
	if changed {
		l.w.epochsDirty = true
	}
	return nil
}

// appendValidated writes validated, offset-assigned batches: the
// concatenation of data holds them back to back as refs describe (refs'
// positions are in it). Caller holds writeMu.
func (l *Log) appendValidated(data chunks, refs []batchRef) (AppendInfo, error) {
	info := AppendInfo{FirstOffset: l.mu.leo, LastOffset: l.mu.leo - 1}
	if len(refs) == 0 {
		return info, nil
	}
	info.Batches = make([]BatchInfo, 0, len(refs))
	now := l.clock.Now()
	if act := l.active(); act.size > 0 && !act.firstAppend.IsZero() && now.Sub(act.firstAppend).Milliseconds() >= l.cfg.SegmentMs {
		if err := l.roll(refs[0].h.BaseOffset); err != nil {
			return AppendInfo{}, err
		}
	}
	for i := 0; i < len(refs); {
		act := l.active()
		if act.size > 0 && !fits(act, act.size, refs[i].h, l.cfg.SegmentBytes) {
			if err := l.roll(refs[i].h.BaseOffset); err != nil {
				return info, err
			}
			act = l.active()
		}
		// The run: refs[i:j] go to act. The first always does.
		j, end := i+1, act.size+int64(refs[i].h.Size())
		for j < len(refs) && fits(act, end, refs[j].h, l.cfg.SegmentBytes) {
			end += int64(refs[j].h.Size())
			j++
		}
		from := refs[i].pos
		to := refs[j-1].pos + refs[j-1].h.Size()
		l.w.iov = data.span(l.w.iov[:0], from, to)
		err := writeChunks(act.file, l.w.iov, act.size)
		clear(l.w.iov) // keep no caller's buffer
		if err != nil {
			l.writeFailed(act)
			return info, fmt.Errorf("kafkalog: append to segment %d: %w", act.base, err)
		}
		act.dirty = true
		if act.firstAppend.IsZero() {
			act.firstAppend = now
		}
		idx := l.w.idx[:0]
		maxTS := act.maxTimestamp
		tix := act.timeIndex
		pos := act.size
		var records int64
		for _, r := range refs[i:j] {
			info.Batches = append(info.Batches, batchInfoOf(r.h))
			if act.bytesSinceIndex > l.cfg.IndexIntervalBytes {
				idx = append(idx, indexEntry{rel: uint32(r.h.LastOffset() - act.base), pos: uint32(pos)})
				act.bytesSinceIndex = 0
			}
			act.bytesSinceIndex += r.h.Size()
			pos += int64(r.h.Size())
			maxTS = max(maxTS, r.h.MaxTimestamp)
			tix, act.bytesSinceTimeIndex = addTimeEntry(tix, act.bytesSinceTimeIndex, r.h.Size(), l.cfg.IndexIntervalBytes, maxTS, r.h.LastOffset())
			records += int64(r.h.RecordCount)
		}
		l.w.idx = idx
		last := refs[j-1].h
		l.mu.Lock()
		act.size = pos
		act.next = last.NextOffset()
		act.index = append(act.index, idx...)
		act.maxTimestamp = maxTS
		act.timeIndex = tix
		act.lastModified = now
		l.mu.leo = act.next
		for _, b := range info.Batches[len(info.Batches)-(j-i):] {
			l.mu.producers.update(b)
		}
		l.notifyLocked()
		l.mu.Unlock()
		info.LastOffset = last.LastOffset()
		info.LastEpoch = last.PartitionLeaderEpoch
		info.LastMaxTimestamp = last.MaxTimestamp
		info.NumBatches += j - i
		info.NumRecords += records
		info.Bytes += to - from
		l.w.unflushed += records
		i = j
	}
	if l.w.unflushed >= l.cfg.FlushMessages ||
		(l.cfg.FlushMs != math.MaxInt64 && now.Sub(l.w.lastFlush).Milliseconds() >= l.cfg.FlushMs) {
		if err := l.flushLocked(now); err != nil {
			return info, err
		}
	}
	return info, nil
}

// fits reports whether batch h can go into s when s is size bytes long.
func fits(s *segment, size int64, h BatchHeader, segmentBytes int64) bool {
	if size+int64(h.Size()) > segmentBytes {
		return false
	}
	return h.LastOffset()-s.base <= math.MaxInt32 && size+int64(h.Size()) <= math.MaxUint32
}

// writeFailed undoes a partial write past the published size; if even
// that fails the log refuses further writes. Caller holds writeMu.
func (l *Log) writeFailed(s *segment) {
	if err := s.file.Truncate(s.size); err != nil {
		l.w.failed = err
		l.logger.Error("kafkalog: cannot undo a failed write; log is failed", "segment", s.base, "err", err)
	}
}

// roll starts a new active segment at base: the old one is fsynced and its
// index written, then the recovery point moves to base. Caller holds writeMu.
func (l *Log) roll(base int64) error {
	old := l.active()
	if old.dirty {
		if err := old.file.Sync(); err != nil {
			l.w.failed = err
			return fmt.Errorf("kafkalog: roll: fsync segment %d: %w", old.base, err)
		}
		old.dirty = false
	}
	if err := l.writeIndexFile(old.indexPath, old.index); err != nil {
		return fmt.Errorf("kafkalog: roll: write index of %d: %w", old.base, err)
	}
	s, err := l.createSegment(base)
	if err != nil {
		return fmt.Errorf("kafkalog: roll: create segment %d: %w", base, err)
	}
	l.mu.Lock()
	l.mu.segs = append(l.mu.segs, s)
	l.mu.Unlock()
	l.w.unflushed = 0
	l.logger.Debug("kafkalog: rolled segment", "from", old.base, "to", base)
	if err := l.flushEpochCheckpoint(); err != nil { // before the recovery point passes its entries
		return fmt.Errorf("kafkalog: roll: %w", err)
	}
	if err := writeOffsetCheckpoint(l.fs, l.dir, recoveryPointCheckpointFile, base); err != nil {
		return fmt.Errorf("kafkalog: roll: %w", err)
	}
	l.w.recoveryPoint = base
	l.takeSnapshot()
	return nil
}

// Flush fsyncs the active segment and writes the high-watermark checkpoint
// and, if the leader-epoch cache changed since it was last written, the
// leader-epoch checkpoint.
// Errors: ErrClosed, ErrFailed, I/O errors.
func (l *Log) Flush() error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	now := l.clock.Now()
	if err := l.flushLocked(now); err != nil {
		return err
	}
	if err := l.flushEpochCheckpoint(); err != nil {
		return fmt.Errorf("kafkalog: flush: %w", err)
	}
	return l.checkpointHW(now)
}

func (l *Log) flushLocked(now time.Time) error {
	act := l.active()
	if act.dirty {
		if err := act.file.Sync(); err != nil {
			l.w.failed = err
			return fmt.Errorf("kafkalog: fsync segment %d: %w", act.base, err)
		}
		act.dirty = false
	}
	l.w.unflushed = 0
	l.w.lastFlush = now
	return nil
}

// checkpointHW writes the high watermark if it changed. Caller holds writeMu.
func (l *Log) checkpointHW(now time.Time) error {
	l.mu.RLock()
	hw := l.mu.hw
	l.mu.RUnlock()
	if hw == l.w.ckptHW {
		return nil
	}
	if err := writeOffsetCheckpoint(l.fs, l.dir, highWatermarkCheckpointFile, hw); err != nil {
		return fmt.Errorf("kafkalog: %w", err)
	}
	l.w.ckptHW, l.w.lastHWCkpt = hw, now
	return nil
}

// AppendNotify returns a channel closed at the next append, truncation or
// Close. Call it again after it fires; check the log state after taking
// the channel to avoid missing an append.
func (l *Log) AppendNotify() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.notify == nil {
		l.mu.notify = make(chan struct{})
		if l.mu.closed {
			close(l.mu.notify)
		}
	}
	return l.mu.notify
}

// changed calls Config.OnChange (see there); callers defer it before
// taking writeMu so that it runs after the unlock.
func (l *Log) changed() {
	if l.cfg.OnChange != nil {
		l.cfg.OnChange()
	}
}

// notifyLocked wakes AppendNotify waiters. Caller holds mu (write).
func (l *Log) notifyLocked() {
	if l.mu.notify != nil {
		close(l.mu.notify)
		l.mu.notify = nil
	}
}

// LogStartOffset is the first offset in the log.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStartOffset()
}

// LogEndOffset is the offset the next batch will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.leo
}

// HighWatermark is the last value SetHighWatermark set (clamped), or the
// checkpointed one after Open.
func (l *Log) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.hw
}

// SetHighWatermark sets the high watermark, clamped to the log end offset. The checkpoint file is rewritten when
// HighWatermarkCheckpointMs has passed since its last write (always with
// -1), and at Flush and Close.
// Errors: ErrOffsetOutOfRange for a negative hw, ErrClosed, I/O errors.
func (l *Log) SetHighWatermark(hw int64) error {
	if hw < 0 {
		return fmt.Errorf("kafkalog: set high watermark %d: %w", hw, ErrOffsetOutOfRange)
	}
	defer l.changed() // after the unlock
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	l.mu.Lock()
	hw = min(hw, l.mu.leo)
	l.mu.hw = hw
	l.mu.Unlock()
	now := l.clock.Now()
	if l.cfg.HighWatermarkCheckpointMs == -1 || now.Sub(l.w.lastHWCkpt).Milliseconds() >= l.cfg.HighWatermarkCheckpointMs {
		return l.checkpointHW(now)
	}
	return nil
}

// LatestEpoch is the latest leader epoch in the cache; ok is false when
// the cache is empty.
func (l *Log) LatestEpoch() (int32, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e, ok := l.mu.epochs.latest()
	if !ok {
		return UndefinedEpoch, false
	}
	return e.Epoch, true
}

// EpochEntries returns a copy of the leader-epoch cache.
func (l *Log) EpochEntries() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.epochs.snapshot()
}

// EndOffsetForEpoch answers OffsetsForLeaderEpoch as Kafka's
// LeaderEpochFileCache.endOffsetFor: the largest cached epoch <= epoch and
// the start offset of the next higher epoch, or the log end offset if
// epoch is the latest. If epoch is below every cached epoch it returns
// (epoch, first start offset); if it is -1 or above the latest epoch,
// (-1, -1).
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.epochs.endOffsetFor(epoch, l.mu.leo)
}

// segmentFor returns the segment holding offset (LogStartOffset <= offset
// < leo). Caller holds mu.
func (l *Log) segmentFor(offset int64) *segment {
	segs := l.mu.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	return segs[max(i-1, 0)]
}

// find returns the first batch whose last offset is at or above offset
// (LogStartOffset <= offset < leo): in the segment holding offset, or, where
// compaction left the rest of that segment (or all of it) without batches,
// in the next segment that has one. Caller holds mu.
func (l *Log) find(offset int64) (*segment, int64, liteHeader, error) {
	segs := l.mu.segs
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })-1, 0)
	for ; ; i++ {
		s := segs[i]
		r := l.reader(s)
		pos, h, err := locate(r, s, max(offset, s.base))
		l.release(r)
		if err == nil || !errors.Is(err, ErrOffsetOutOfRange) || i == len(segs)-1 {
			return s, pos, h, err
		}
	}
}

func (l *Log) reader(s *segment) *segReader {
	r, _ := l.bufs.Get().(*segReader)
	if r == nil {
		r = &segReader{chunk: max(2*l.cfg.IndexIntervalBytes, 8192)}
	}
	r.f, r.size, r.start, r.buf = s.file, s.size, 0, r.buf[:0]
	return r
}

func (l *Log) release(r *segReader) {
	r.f = nil
	l.bufs.Put(r)
}

// checkRange validates a read offset. Caller holds mu.
func (l *Log) checkRange(offset int64) error {
	if l.mu.closed {
		return ErrClosed
	}
	if offset < l.logStartOffset() || offset > l.mu.leo {
		return fmt.Errorf("kafkalog: offset %d outside [%d, %d]: %w", offset, l.logStartOffset(), l.mu.leo, ErrOffsetOutOfRange)
	}
	return nil
}

// Read returns whole batches starting with the one containing offset, up
// to maxBytes but at least one batch, all from one segment. The bytes are
// the caller's. offset == LogEndOffset returns an empty non-nil slice.
// Errors: ErrOffsetOutOfRange, ErrClosed, I/O errors.
func (l *Log) Read(offset int64, maxBytes int) ([]byte, error) {
	return l.ReadInto(nil, offset, maxBytes)
}

// ReadInto is Read into dst's storage: it returns dst[:0] grown and
// filled, so a caller that reuses dst allocates nothing. Errors as Read.
func (l *Log) ReadInto(dst []byte, offset int64, maxBytes int) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.checkRange(offset); err != nil {
		return nil, err
	}
	if offset == l.mu.leo {
		if dst == nil {
			return []byte{}, nil
		}
		return dst[:0], nil
	}
	s, pos, h, err := l.find(offset)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: read %d: %w", offset, err)
	}
	data, err := readBatches(dst, s, pos, h, maxBytes, false)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: read %d: %w", offset, err)
	}
	return data, nil
}

// readBatches reads whole batches of s from pos (where first starts), up
// to maxBytes but at least the first; sameEpoch stops at an epoch change.
// Caller holds mu.
func readBatches(dst []byte, s *segment, pos int64, first liteHeader, maxBytes int, sameEpoch bool) ([]byte, error) {
	n := max(int64(first.size), min(int64(maxBytes), s.size-pos))
	data := dst[:0]
	if int64(cap(data)) < n {
		data = make([]byte, n)
	}
	data = data[:n]
	if _, err := s.file.ReadAt(data, pos); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	end := first.size
	for end+liteHeaderSize <= len(data) {
		h := parseLite(data[end:])
		if h.size < BatchHeaderSize || end+h.size > len(data) || (sameEpoch && h.epoch != first.epoch) {
			break
		}
		end += h.size
	}
	if dst == nil {
		return data[:end:end], nil
	}
	return data[:end], nil
}

// PositionOf returns where the batch containing offset starts. For offset
// == LogEndOffset it returns the end of the active segment, where the
// next batch will go. Errors: ErrOffsetOutOfRange, ErrClosed, I/O errors.
func (l *Log) PositionOf(offset int64) (SegmentPosition, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.checkRange(offset); err != nil {
		return SegmentPosition{}, err
	}
	if offset == l.mu.leo {
		act := l.active()
		return SegmentPosition{SegmentBaseOffset: act.base, Position: act.size}, nil
	}
	s, pos, _, err := l.find(offset)
	if err != nil {
		return SegmentPosition{}, fmt.Errorf("kafkalog: position of %d: %w", offset, err)
	}
	return SegmentPosition{SegmentBaseOffset: s.base, Position: pos}, nil
}

// EndPosition returns the log end offset and where it lies: the active
// segment's base offset and size. It costs one read lock, no I/O and no
// allocation, so a caller that remembers where its own offset lies (a
// remote-WAL task after each Slice) can tell how many bytes were appended
// since without PositionOf.
func (l *Log) EndPosition() (leo int64, end SegmentPosition) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	act := l.active()
	return l.mu.leo, SegmentPosition{SegmentBaseOffset: act.base, Position: act.size}
}

// Slice returns whole batches starting with the batch whose base offset is
// fromOffset, all in one segment and with one partition leader epoch, up
// to maxBytes but at least one batch. fromOffset == LogEndOffset gives an
// empty slice (Data empty, NextOffset == fromOffset).
// Errors: ErrNotBatchBoundary, ErrOffsetOutOfRange, ErrClosed, I/O errors.
func (l *Log) Slice(fromOffset int64, maxBytes int) (SegmentSlice, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.checkRange(fromOffset); err != nil {
		return SegmentSlice{}, err
	}
	if fromOffset == l.mu.leo {
		return l.emptySlice(fromOffset), nil
	}
	s := l.segmentFor(fromOffset)
	r := l.reader(s)
	pos, h, err := locate(r, s, fromOffset)
	l.release(r)
	if err != nil {
		return SegmentSlice{}, fmt.Errorf("kafkalog: slice from %d: %w", fromOffset, err)
	}
	if h.base != fromOffset {
		return SegmentSlice{}, fmt.Errorf("kafkalog: slice from %d: batch starts at %d: %w", fromOffset, h.base, ErrNotBatchBoundary)
	}
	data, err := readBatches(nil, s, pos, h, maxBytes, true)
	if err != nil {
		return SegmentSlice{}, fmt.Errorf("kafkalog: slice from %d: %w", fromOffset, err)
	}
	return sliceOf(s, pos, h, data), nil
}

// SliceAt is Slice for a caller that knows where fromOffset's batch
// starts (the end of its previous slice): it reads from at without the
// index lookup, in one read, and checks that a batch with base offset
// fromOffset starts there. Errors as Slice; ErrNotBatchBoundary also when
// at is not where that batch starts (the caller then uses Slice).
func (l *Log) SliceAt(at SegmentPosition, fromOffset int64, maxBytes int) (SegmentSlice, error) {
	return l.SliceAtInto(at, fromOffset, maxBytes, nil)
}

// SliceAtInto is SliceAt reading into memory of the caller's: alloc(n), if
// not nil, returns a buffer of length n (the bytes SliceAt reads in one
// read; its contents are overwritten), and the slice's Data is a prefix
// of it, so that a caller cutting slice after slice can reuse buffers
// instead of faulting in fresh memory for each. Data is not in alloc's
// buffer when the first batch is longer than maxBytes (it goes whole,
// read into memory of its own) or the slice is empty. alloc is called
// with the log's lock held; it must not call the log.
func (l *Log) SliceAtInto(at SegmentPosition, fromOffset int64, maxBytes int, alloc func(n int) []byte) (SegmentSlice, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.checkRange(fromOffset); err != nil {
		return SegmentSlice{}, err
	}
	if fromOffset == l.mu.leo {
		return l.emptySlice(fromOffset), nil
	}
	i := sort.Search(len(l.mu.segs), func(i int) bool { return l.mu.segs[i].base >= at.SegmentBaseOffset })
	if i == len(l.mu.segs) || l.mu.segs[i].base != at.SegmentBaseOffset || at.Position < 0 || at.Position+liteHeaderSize > l.mu.segs[i].size {
		return SegmentSlice{}, fmt.Errorf("kafkalog: slice from %d at %+v: %w", fromOffset, at, ErrNotBatchBoundary)
	}
	s := l.mu.segs[i]
	n := min(int64(max(maxBytes, liteHeaderSize)), s.size-at.Position)
	var data []byte
	if alloc != nil {
		data = alloc(int(n))
	} else {
		data = make([]byte, n)
	}
	if _, err := s.file.ReadAt(data, at.Position); err != nil && !errors.Is(err, io.EOF) {
		return SegmentSlice{}, fmt.Errorf("kafkalog: slice from %d: %w", fromOffset, err)
	}
	h := parseLite(data)
	if h.base != fromOffset || h.size < BatchHeaderSize || at.Position+int64(h.size) > s.size {
		return SegmentSlice{}, fmt.Errorf("kafkalog: slice from %d at %+v: batch there starts at %d: %w", fromOffset, at, h.base, ErrNotBatchBoundary)
	}
	if h.size > len(data) {
		// maxBytes is below the first batch: it goes whole, as in Slice.
		whole, err := readBatches(nil, s, at.Position, h, maxBytes, true)
		if err != nil {
			return SegmentSlice{}, fmt.Errorf("kafkalog: slice from %d: %w", fromOffset, err)
		}
		return sliceOf(s, at.Position, h, whole), nil
	}
	end := h.size
	for end+liteHeaderSize <= len(data) {
		nh := parseLite(data[end:])
		if nh.size < BatchHeaderSize || end+nh.size > len(data) || nh.epoch != h.epoch {
			break
		}
		end += nh.size
	}
	return sliceOf(s, at.Position, h, data[:end:end]), nil
}

// emptySlice is the slice at the log end. Caller holds mu.
func (l *Log) emptySlice(fromOffset int64) SegmentSlice {
	act := l.active()
	return SegmentSlice{
		SegmentBaseOffset: act.base, BasePosition: act.size, EndPosition: act.size,
		FirstOffset: fromOffset, LastOffset: fromOffset - 1, LeaderEpoch: UndefinedEpoch,
		Data: []byte{}, NextOffset: fromOffset,
	}
}

// sliceOf describes data, whole batches of s from pos whose first is first.
func sliceOf(s *segment, pos int64, first liteHeader, data []byte) SegmentSlice {
	last := first.last
	for p := 0; p < len(data); {
		lh := parseLite(data[p:])
		last = lh.last
		p += lh.size
	}
	return SegmentSlice{
		SegmentBaseOffset: s.base, BasePosition: pos, EndPosition: pos + int64(len(data)),
		FirstOffset: first.base, LastOffset: last, LeaderEpoch: first.epoch,
		Data: data, NextOffset: last + 1,
	}
}

// Segments describes the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.mu.segs))
	for i, s := range l.mu.segs {
		out[i] = SegmentInfo{BaseOffset: s.base, NextOffset: s.next, Size: s.size, Path: s.logPath}
	}
	return out
}

// ReadSegmentRange returns bytes [from, to) of the segment with base
// offset segmentBase. Errors: ErrSegmentNotFound, ErrOffsetOutOfRange (a
// range outside the segment's published size), ErrClosed, I/O errors.
func (l *Log) ReadSegmentRange(segmentBase, from, to int64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return nil, ErrClosed
	}
	for _, s := range l.mu.segs {
		if s.base != segmentBase {
			continue
		}
		if from < 0 || from > to || to > s.size {
			return nil, fmt.Errorf("kafkalog: segment %d range [%d, %d) outside size %d: %w", segmentBase, from, to, s.size, ErrOffsetOutOfRange)
		}
		b := make([]byte, to-from)
		if _, err := s.file.ReadAt(b, from); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("kafkalog: segment %d: %w", segmentBase, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("kafkalog: segment %d: %w", segmentBase, ErrSegmentNotFound)
}

// Close flushes the log, writes its checkpoints and closes its files.
// Waiters on AppendNotify wake. Later calls return ErrClosed.
func (l *Log) Close() error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	var errs []error
	if l.w.failed == nil {
		now := l.clock.Now()
		act := l.active()
		errs = append(errs, l.flushLocked(now), l.checkpointHW(now),
			l.writeIndexFile(act.indexPath, act.index))
		epochErr := l.flushEpochCheckpoint()
		errs = append(errs, epochErr)
		if l.w.recoveryPoint < act.base && epochErr == nil { // the recovery point passes the epochs only once they are written
			errs = append(errs, writeOffsetCheckpoint(l.fs, l.dir, recoveryPointCheckpointFile, act.base))
		}
		// Kafka snapshots at a clean shutdown too: the next open replays nothing.
		l.takeSnapshot()
	}
	l.mu.Lock()
	l.mu.closed = true
	l.notifyLocked()
	for _, s := range l.mu.segs {
		errs = append(errs, s.file.Close())
	}
	l.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafkalog: close: %w", err)
	}
	return nil
}

package kafkalog

import "fmt"

// The log start offset may sit inside the first segment (Kafka's
// DeleteRecords and a follower following its leader's log start): it is
// then kept in log-start-offset-checkpoint ("0\n1\n<offset>\n"), written
// before the new start is published, and read at Open (a value outside the
// log is ignored). Reads below it get ErrOffsetOutOfRange; segments wholly
// below it are deleted.

const logStartCheckpointFile = "log-start-offset-checkpoint"

// IncrementLogStartOffset moves the log start offset up to offset (Kafka's
// maybeIncrementLogStartOffset): records below it are gone for readers,
// segments wholly below it (but the active one) are deleted, the
// leader-epoch cache is trimmed. It reports whether the start moved.
// Errors: ErrOffsetOutOfRange when offset is above the high watermark,
// ErrClosed, ErrFailed, I/O errors.
func (l *Log) IncrementLogStartOffset(offset int64) (bool, error) {
	defer l.changed() // after the unlock
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.writable(); err != nil {
		return false, err
	}
	l.mu.RLock()
	cur, hw := l.logStartOffset(), l.mu.hw
	l.mu.RUnlock()
	if offset > hw {
		return false, fmt.Errorf("kafkalog: log start %d above the high watermark %d: %w", offset, hw, ErrOffsetOutOfRange)
	}
	if offset <= cur {
		return false, nil
	}
	if err := writeOffsetCheckpoint(l.fs, l.dir, logStartCheckpointFile, offset); err != nil {
		return false, fmt.Errorf("kafkalog: log start checkpoint: %w", err)
	}
	l.mu.Lock()
	n := 0
	for n < len(l.mu.segs)-1 && l.mu.segs[n].next <= offset {
		n++
	}
	victims := append([]*segment(nil), l.mu.segs[:n]...)
	l.mu.segs = append([]*segment(nil), l.mu.segs[n:]...)
	l.mu.start = offset
	changed := l.mu.epochs.truncateFromStart(offset)
	l.notifyLocked()
	l.mu.Unlock()
	if changed {
		if err := l.writeEpochCheckpoint(); err != nil {
			return true, fmt.Errorf("kafkalog: log start: %w", err)
		}
	}
	for _, s := range victims {
		s.file.Close()
		if err := l.fs.Remove(s.logPath); err != nil {
			return true, fmt.Errorf("kafkalog: log start: %w", err)
		}
		if err := l.fs.Remove(s.indexPath); err != nil {
			return true, fmt.Errorf("kafkalog: log start: %w", err)
		}
	}
	if n > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return true, fmt.Errorf("kafkalog: log start: %w", err)
		}
		base := l.mu.segs[0].base
		if err := l.removeSnapshots(func(o int64) bool { return o >= base }); err != nil {
			return true, fmt.Errorf("kafkalog: log start: %w", err)
		}
	}
	l.logger.Info("kafkalog: log start offset moved", "logStartOffset", offset, "segmentsDeleted", n)
	return true, nil
}

// loadLogStart reads the checkpoint at Open. Caller holds the locks.
func (l *Log) loadLogStart() {
	v, ok, err := readOffsetCheckpoint(l.fs, l.dir, logStartCheckpointFile)
	if err != nil {
		l.logger.Warn("kafkalog: ignoring unreadable log start checkpoint", "err", err)
		return
	}
	if ok && v > l.mu.segs[0].base && v <= l.mu.leo {
		l.mu.start = v
	}
}

package kafkalog

// Tunables are the per-topic settings a running log can change (Kafka's
// dynamic topic configs): zero fields keep the current value.
type Tunables struct {
	SegmentBytes   int64 // segment.bytes
	SegmentMs      int64 // segment.ms
	RetentionMs    int64 // retention.ms (-1 unlimited)
	RetentionBytes int64 // retention.bytes (-1 unlimited)
	MaxBatchBytes  int   // max.message.bytes
	// Compacted turns on Config.Compacted (cleanup.policy gained compact):
	// from then on a follower takes the leader's compacted batches. It is
	// never turned off: segments already compacted keep their gaps.
	Compacted bool
}

// Retune changes the log's tunables. Appends and retention read them under
// the write lock, so a change takes effect at the next append or retention
// pass; nothing already written moves. Errors: as Config.Validate.
func (l *Log) Retune(t Tunables) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	next := l.cfg
	set := func(p *int64, v int64) {
		if v != 0 {
			*p = v
		}
	}
	set(&next.SegmentBytes, t.SegmentBytes)
	set(&next.SegmentMs, t.SegmentMs)
	set(&next.RetentionMs, t.RetentionMs)
	set(&next.RetentionBytes, t.RetentionBytes)
	if t.MaxBatchBytes != 0 {
		next.MaxBatchBytes = t.MaxBatchBytes
	}
	if err := next.Validate(); err != nil {
		return err
	}
	// Field by field: readers read IndexIntervalBytes without the lock.
	l.cfg.SegmentBytes, l.cfg.SegmentMs = next.SegmentBytes, next.SegmentMs
	l.cfg.RetentionMs, l.cfg.RetentionBytes = next.RetentionMs, next.RetentionBytes
	l.cfg.MaxBatchBytes = next.MaxBatchBytes
	if t.Compacted {
		l.cfg.Compacted, l.w.compacted = true, true
	}
	return nil
}

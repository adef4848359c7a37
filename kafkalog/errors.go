package kafkalog

import (
	"errors"
	"fmt"
)

// Sentinel errors. Methods document which of these they return; match them
// with errors.Is, since they usually come wrapped with context.
var (
	// ErrCorruptBatch matches every *CorruptBatchError.
	ErrCorruptBatch = errors.New("kafkalog: corrupt record batch")
	// ErrBatchTooLarge: a batch is larger than the configured maximum
	// (Kafka's MESSAGE_TOO_LARGE).
	ErrBatchTooLarge = errors.New("kafkalog: record batch too large")
	// ErrOffsetGap: a follower append starts after the log end offset, or
	// two batches of one append are not contiguous. See *OffsetError.
	ErrOffsetGap = errors.New("kafkalog: offset gap")
	// ErrOffsetOverlap: a follower append starts before the log end offset
	// (a duplicate or overlapping range). See *OffsetError.
	ErrOffsetOverlap = errors.New("kafkalog: offset overlap")
	// ErrOffsetOutOfRange: an offset outside [LogStartOffset, LogEndOffset].
	ErrOffsetOutOfRange = errors.New("kafkalog: offset out of range")
	// ErrNotBatchBoundary: an offset that must start a batch lies inside one.
	ErrNotBatchBoundary = errors.New("kafkalog: offset is not a batch boundary")
	// ErrEpochRegression: a leader epoch lower than the latest one in the
	// leader-epoch cache.
	ErrEpochRegression = errors.New("kafkalog: leader epoch regression")
	// ErrSegmentNotFound: no segment has the requested base offset.
	ErrSegmentNotFound = errors.New("kafkalog: segment not found")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("kafkalog: log closed")
	// ErrFailed: an earlier I/O error left the log in an unknown state; it
	// refuses writes until reopened (Kafka marks the log dir offline).
	ErrFailed = errors.New("kafkalog: log failed after an I/O error")
)

// CorruptBatchError says where in a byte sequence a batch failed to parse
// or validate. Position is relative to the start of the bytes handed in
// (for recovery, the position in the segment file).
type CorruptBatchError struct {
	Position int64
	Reason   string
}

func (e *CorruptBatchError) Error() string {
	return fmt.Sprintf("kafkalog: corrupt record batch at position %d: %s", e.Position, e.Reason)
}

// Is makes errors.Is(err, ErrCorruptBatch) true.
func (e *CorruptBatchError) Is(target error) bool { return target == ErrCorruptBatch }

func corruptf(pos int64, format string, args ...any) *CorruptBatchError {
	return &CorruptBatchError{Position: pos, Reason: fmt.Sprintf(format, args...)}
}

// OffsetError carries the expected and the received offset of a rejected
// follower append. Err is ErrOffsetGap or ErrOffsetOverlap.
type OffsetError struct {
	Err      error
	Expected int64
	Got      int64
}

func (e *OffsetError) Error() string {
	return fmt.Sprintf("%v: expected offset %d, got %d", e.Err, e.Expected, e.Got)
}

func (e *OffsetError) Unwrap() error { return e.Err }

func offsetMismatch(expected, got int64) *OffsetError {
	if got > expected {
		return &OffsetError{Err: ErrOffsetGap, Expected: expected, Got: got}
	}
	return &OffsetError{Err: ErrOffsetOverlap, Expected: expected, Got: got}
}

// ErrInvalidRecord matches every *InvalidRecordError.
var ErrInvalidRecord = errors.New("kafkalog: invalid record batch")

// ErrInvalidTimestamp: a client's batch claims LogAppendTime, which only
// the broker may set (Kafka's INVALID_TIMESTAMP).
var ErrInvalidTimestamp = errors.New("kafkalog: invalid timestamp type")

// InvalidRecordError is a well-formed batch that breaks one of the rules
// Kafka's leader applies to a client's batch (LogValidator.validateBatch:
// record count against the offset range, control batches, sequences);
// Kafka answers INVALID_RECORD.
type InvalidRecordError struct {
	Reason string
}

func (e *InvalidRecordError) Error() string {
	return "kafkalog: invalid record batch: " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidRecord) true.
func (e *InvalidRecordError) Is(target error) bool { return target == ErrInvalidRecord }

func invalidf(format string, args ...any) *InvalidRecordError {
	return &InvalidRecordError{Reason: fmt.Sprintf(format, args...)}
}

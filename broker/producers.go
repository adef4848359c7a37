package broker

import (
	"github.com/kwal/kwal/kafkalog"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Idempotent producers: the sequence rules only. The producer table
// itself (each producer's epoch and its last kafkalog.ProducerBatchWindow
// batches) belongs to the partition's log, which updates it on every
// append, leader or follower, snapshots it at segment rolls and rebuilds
// it when it opens or truncates, as Kafka's ProducerStateManager lives in
// the log layer: the table must describe exactly the batches in the log,
// and only the log knows when that changes (recovery cutting a torn tail,
// KIP-101 truncation, retention). What the broker adds is the leader's
// verdict on a new batch, Kafka's ProducerAppendInfo.checkSequence plus
// the duplicate lookup of ProducerStateEntry.findDuplicateBatch.

// seqCheck is the verdict on one batch.
type seqCheck struct {
	// dup is set when the batch was appended before: answer with its
	// offsets and append nothing.
	dup *kafkalog.ProducerBatch
	err *kerr.Error
}

// checkSequence decides what to do with a leader append of a batch by
// pid/epoch with sequences [firstSeq, lastSeq], given the producer's
// entry in the log (known false: the log has none). Pure.
func checkSequence(e kafkalog.ProducerEntry, known bool, pid int64, epoch int16, firstSeq, lastSeq int32) seqCheck {
	if pid < 0 {
		return seqCheck{}
	}
	if !known {
		if firstSeq != 0 {
			return seqCheck{err: kerr.OutOfOrderSequenceNumber}
		}
		return seqCheck{}
	}
	switch {
	case epoch < e.Epoch:
		return seqCheck{err: kerr.InvalidProducerEpoch}
	case epoch > e.Epoch:
		if firstSeq != 0 {
			return seqCheck{err: kerr.OutOfOrderSequenceNumber}
		}
		return seqCheck{}
	}
	for i := range e.Batches {
		if b := e.Batches[i]; b.FirstSeq == firstSeq && b.LastSeq == lastSeq {
			return seqCheck{dup: &b}
		}
	}
	if len(e.Batches) == 0 {
		if firstSeq != 0 {
			return seqCheck{err: kerr.OutOfOrderSequenceNumber}
		}
		return seqCheck{}
	}
	if last := e.Batches[len(e.Batches)-1]; firstSeq != kafkalog.IncrementSequence(last.LastSeq, 1) {
		return seqCheck{err: kerr.OutOfOrderSequenceNumber}
	}
	return seqCheck{}
}

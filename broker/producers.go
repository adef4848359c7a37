package broker

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// producerBatch is the sequence range and offsets of one appended batch.
type producerBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerEntry is one producer id's state on one partition: its epoch
// and the last batches it appended (Kafka's ProducerStateEntry).
type producerEntry struct {
	epoch   int16
	batches []producerBatch // oldest first, at most producerStateWindow
}

// producerTable checks idempotent sequences for one partition. Not safe
// for concurrent use: the partition's append lock guards it.
type producerTable struct {
	m map[int64]*producerEntry
}

// seqCheck is the verdict on one batch.
type seqCheck struct {
	// dup is set when the batch was appended before: answer with its
	// offsets and append nothing.
	dup *producerBatch
	err *kerr.Error
}

// nextSeq is the sequence after s, wrapping at MaxInt32 as Kafka does.
func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

// lastSeqOf is the last sequence of a batch of count records starting at first.
func lastSeqOf(first int32, count int32) int32 {
	l := int64(first) + int64(count) - 1
	if l > math.MaxInt32 {
		l -= math.MaxInt32 + 1
	}
	return int32(l)
}

// check decides what to do with a leader append of a batch by pid/epoch
// with sequences [firstSeq, lastSeq]. It does not change the table.
func (t *producerTable) check(pid int64, epoch int16, firstSeq, lastSeq int32) seqCheck {
	if pid < 0 {
		return seqCheck{}
	}
	e := t.m[pid]
	if e == nil {
		if firstSeq != 0 {
			return seqCheck{err: kerr.OutOfOrderSequenceNumber}
		}
		return seqCheck{}
	}
	switch {
	case epoch < e.epoch:
		return seqCheck{err: kerr.InvalidProducerEpoch}
	case epoch > e.epoch:
		if firstSeq != 0 {
			return seqCheck{err: kerr.OutOfOrderSequenceNumber}
		}
		return seqCheck{}
	}
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			dup := *b
			return seqCheck{dup: &dup}
		}
	}
	if len(e.batches) == 0 {
		if firstSeq != 0 {
			return seqCheck{err: kerr.OutOfOrderSequenceNumber}
		}
		return seqCheck{}
	}
	if last := e.batches[len(e.batches)-1]; firstSeq != nextSeq(last.lastSeq) {
		return seqCheck{err: kerr.OutOfOrderSequenceNumber}
	}
	return seqCheck{}
}

// record notes an appended batch (leader or follower side).
func (t *producerTable) record(pid int64, epoch int16, b producerBatch) {
	if pid < 0 {
		return
	}
	if t.m == nil {
		t.m = map[int64]*producerEntry{}
	}
	e := t.m[pid]
	if e == nil {
		e = &producerEntry{epoch: epoch}
		t.m[pid] = e
	}
	if epoch != e.epoch {
		e.epoch, e.batches = epoch, e.batches[:0]
	}
	if len(e.batches) == defaultProducerStateBatchWindow {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:len(e.batches)-1]
	}
	e.batches = append(e.batches, b)
}

// truncate forgets batches at or after offset (after a log truncation).
func (t *producerTable) truncate(offset int64) {
	for pid, e := range t.m {
		n := 0
		for _, b := range e.batches {
			if b.lastOffset < offset {
				e.batches[n] = b
				n++
			}
		}
		e.batches = e.batches[:n]
		if n == 0 {
			delete(t.m, pid)
		}
	}
}

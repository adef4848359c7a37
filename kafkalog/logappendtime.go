package kafkalog

import "encoding/binary"

// attrLogAppendTime is the timestamp-type bit of a batch's attributes.
const attrLogAppendTime = 0x08

// WithLogAppendTime returns the batch as a leader of a topic with
// message.timestamp.type=LogAppendTime stores it (Kafka's LogValidator):
// a copy with the LogAppendTime attribute set, now as its max timestamp
// and the CRC recomputed. Records keep their timestamp deltas; readers
// take the batch's max timestamp as every record's time.
func (v ValidBatch) WithLogAppendTime(now int64) ValidBatch {
	b := append([]byte(nil), v.bytes...)
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:], attrs|attrLogAppendTime)
	crc := setMaxTimestamp(b, now)
	h := v.header
	h.Attributes |= attrLogAppendTime
	h.MaxTimestamp, h.CRC = now, crc
	return ValidBatch{header: h, bytes: b, maxTimestamp: now}
}

package broker

import (
	"math"

	"github.com/kwal/kwal/clock"
)

// Local retention: every log.retention.check.interval.ms (by the broker's
// clock) each replica deletes the whole segments its retention.ms and
// retention.bytes allow, as Kafka's log-retention task does. The decision
// is kafkalog's (retentionVictims, pure); this driver only supplies the
// bound no deletion may reach:
//
//   - every replica: the high watermark, so that a follower never drops
//     what it has not been told is committed and a leader keeps what a
//     follower may still fetch (kafkalog applies it);
//   - a remotewal leader: also the offset up to which the remote-WAL task
//     has published its slices, since bytes not uploaded yet exist only
//     here. If the Replicator cannot say, nothing is deleted.

// UploadedOffsetReporter is implemented by a Replicator that can say up to
// which offset (exclusive) a leader partition's bytes are durable in
// object storage; ok is false when it does not know (no task running).
type UploadedOffsetReporter interface {
	UploadedOffset(tp TopicPartition) (offset int64, ok bool)
}

// retentionLoop runs enforceRetention every RetentionCheckInterval.
func (b *Broker) retentionLoop(t clock.Timer) {
	b.everyOn(t, b.cfg.RetentionCheckInterval, func() { b.enforceRetention() }, b.cfg.afterRetention)
}

// producerExpirationLoop forgets idle producers on every replica every
// producer.id.expiration.check.interval.ms, as Kafka's
// PeriodicProducerExpirationCheck does.
func (b *Broker) producerExpirationLoop(t clock.Timer) {
	b.everyOn(t, b.cfg.ProducerIDExpirationCheckInterval, func() {
		for _, p := range b.partitionsSnapshot() {
			if n := p.log.RemoveExpiredProducers(); n > 0 {
				b.logger.Info("forgot expired producers", "partition", p.tp, "producers", n)
			}
		}
	}, b.cfg.afterProducerExpiration)
}

// enforceRetention deletes what retention allows on every replica and
// returns how many segments went.
func (b *Broker) enforceRetention() int {
	total := 0
	for _, p := range b.partitionsSnapshot() {
		if ts, ok := b.ctrl.Topic(p.tp.Topic); ok && !deletesByRetention(ts.Configs) {
			continue // cleanup.policy=compact: the cleaner's, not retention's
		}
		upTo, ok := b.retentionBound(p)
		if !ok {
			continue
		}
		n, err := p.log.DeleteRetentionExpired(upTo)
		if err != nil {
			b.logger.Error("retention", "partition", p.tp, "err", err)
			continue
		}
		if n > 0 {
			b.logger.Info("retention deleted segments", "partition", p.tp, "segments", n, "log_start", p.log.LogStartOffset())
		}
		total += n
	}
	b.events.retentionSegments.Add(int64(total))
	return total
}

// retentionBound is the offset below which retention may delete on p,
// beyond the high watermark kafkalog already applies; ok false: delete
// nothing now.
func (b *Broker) retentionBound(p *partition) (int64, bool) {
	if p.mode != RemoteWAL {
		return math.MaxInt64, true
	}
	if _, leader := p.snapshot(); !leader {
		return math.MaxInt64, true
	}
	r, ok := b.cfg.Replicator.(UploadedOffsetReporter)
	if !ok {
		return 0, false
	}
	return r.UploadedOffset(p.tp)
}

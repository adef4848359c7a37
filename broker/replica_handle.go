package broker

import (
	"time"

	"github.com/kwal/kwal/kafkalog"
)

// replicaHandle is the FollowerReplica the fetcher hands a Replicator: it
// delegates to the partition (its locks and producer state) and to the
// broker's controller view and dialer, and keeps no other state.
type replicaHandle struct {
	b      *Broker
	p      *partition
	leader int32
	epoch  int32
	notify func()
}

var _ FollowerReplica = (*replicaHandle)(nil)

func newReplicaHandle(b *Broker, p *partition, leader, epoch int32, notify func()) *replicaHandle {
	return &replicaHandle{b: b, p: p, leader: leader, epoch: epoch, notify: notify}
}

func (h *replicaHandle) TopicPartition() TopicPartition      { return h.p.tp }
func (h *replicaHandle) LeaderEpoch() int32                  { return h.epoch }
func (h *replicaHandle) LogEndOffset() int64                 { return h.p.log.LogEndOffset() }
func (h *replicaHandle) LatestEpoch() (int32, bool)          { return h.p.log.LatestEpoch() }
func (h *replicaHandle) EpochEntries() []kafkalog.EpochEntry { return h.p.log.EpochEntries() }
func (h *replicaHandle) Truncate(to int64) error             { return h.p.truncate(to) }
func (h *replicaHandle) Notify()                             { h.notify() }

func (h *replicaHandle) AppendAsFollower(batches []byte) (kafkalog.AppendInfo, error) {
	return h.p.appendAsFollower(batches, h.epoch)
}

func (h *replicaHandle) AppendVerifiedAsFollower(batches []byte) (kafkalog.AppendInfo, error) {
	return h.p.appendFollowerBatches(batches, h.epoch, true)
}

func (h *replicaHandle) AppendVerifiedRunAsFollower(parts [][]byte) (kafkalog.AppendInfo, error) {
	return h.p.appendFollower(h.epoch, func() (kafkalog.AppendInfo, error) { return h.p.log.AppendVerifiedRunAsFollower(parts) })
}

func (h *replicaHandle) Leader() ReplicaLeader {
	l := ReplicaLeader{ID: h.leader, Rack: unknownRack}
	for _, bi := range h.b.ctrl.Brokers() {
		if bi.ID == h.leader {
			l.Rack = bi.Rack
		}
	}
	l.Addr = h.b.interBrokerAddr(h.leader)
	return l
}

func (h *replicaHandle) Dial(addr, clientID string, timeout time.Duration) (*WireConn, error) {
	c, err := h.b.secureDial(addr, clientID, timeout, replicaFetchResponseMax)
	if err != nil {
		return nil, err
	}
	return &WireConn{c: c}, nil
}

package broker

import (
	"errors"
	"slices"
	"time"
)

// The broker's side of liveness: it registers (a new broker epoch per
// life), heartbeats every broker.heartbeat.interval.ms, and keeps a lease:
// the send time of the last acknowledged heartbeat plus
// broker.session.timeout.ms. A controller fences a broker only a session
// timeout after it last applied one of its heartbeats, which is after the
// heartbeat was sent, so the lease always runs out first: a broker cut off
// from the controller (or paused) has stopped leading before anyone else
// is elected. While its lease has run out the broker refuses produces and
// completes no acks=all wait (NOT_LEADER_OR_FOLLOWER).

// leaseState is guarded by Broker.lease.
type leaseState struct {
	epoch    int64     // current registration's broker epoch
	enforced bool      // the controller watches sessions
	until    time.Time // lease end
	valid    bool      // last known validity, for logging transitions
	leaving  bool      // Shutdown: fenced on purpose, do not register again
}

// register records a new incarnation with the controller.
func (b *Broker) register() error {
	sent := b.clock.Now()
	reg, err := b.ctrl.RegisterBroker(b.info)
	if err != nil {
		return err
	}
	b.lease.Lock()
	b.lease.st.epoch = reg.Epoch
	b.lease.st.until = sent.Add(b.cfg.BrokerSessionTimeout)
	b.lease.st.valid = true
	b.lease.Unlock()
	b.logger.Info("registered with the controller", "broker_epoch", reg.Epoch)
	return nil
}

// BrokerEpoch is the epoch of this broker's current registration.
func (b *Broker) BrokerEpoch() int64 {
	b.lease.Lock()
	defer b.lease.Unlock()
	return b.lease.st.epoch
}

// leaseValid says whether this broker may act as a leader now.
func (b *Broker) leaseValid() bool {
	now := b.clock.Now()
	b.lease.Lock()
	defer b.lease.Unlock()
	return !b.lease.st.enforced || now.Before(b.lease.st.until)
}

// heartbeat sends one heartbeat and renews the lease from its send time;
// a fenced or superseded registration registers again.
func (b *Broker) heartbeat() {
	sent := b.clock.Now()
	b.lease.Lock()
	epoch := b.lease.st.epoch
	b.lease.Unlock()
	enforced, err := b.ctrl.Heartbeat(b.cfg.BrokerID, epoch)
	b.lease.Lock()
	b.lease.st.enforced = enforced
	if err == nil && b.lease.st.epoch == epoch {
		b.lease.st.until = sent.Add(b.cfg.BrokerSessionTimeout)
	}
	b.lease.Unlock()
	b.lease.Lock()
	leaving := b.lease.st.leaving
	b.lease.Unlock()
	switch {
	case leaving:
	case errors.Is(err, ErrBrokerFenced):
		b.logger.Warn("fenced by the controller; registering again with a new broker epoch", "broker_epoch", epoch)
		if err := b.register(); err != nil {
			b.logger.Warn("registering again", "err", err)
		}
	case err != nil:
		b.logger.Warn("heartbeat failed", "broker_epoch", epoch, "err", err)
	}
	b.noteLease()
}

// noteLease logs a lease running out or coming back and wakes waiting
// produces, which then fail.
func (b *Broker) noteLease() {
	valid := b.leaseValid()
	b.lease.Lock()
	was := b.lease.st.valid
	b.lease.st.valid = valid
	until := b.lease.st.until
	b.lease.Unlock()
	switch {
	case was && !valid:
		b.logger.Error("lease expired: no heartbeat acknowledged within broker.session.timeout.ms; fencing myself (leading nothing, refusing produces)",
			"session_timeout", b.cfg.BrokerSessionTimeout, "lease_end", until)
		for _, p := range b.partitionsSnapshot() {
			b.wake(p.tp)
		}
	case !was && valid:
		b.logger.Info("lease renewed: acting as leader again where the controller says so")
	}
}

// heartbeatLoop heartbeats every broker.heartbeat.interval.ms.
func (b *Broker) heartbeatLoop() {
	b.every(b.cfg.BrokerHeartbeatInterval, b.heartbeat, nil)
}

// rebalanceLoop nominates this broker, every
// leader.imbalance.check.interval, for the partitions it prefers
// (auto.leader.rebalance.enable). It runs apart from the heartbeats, so
// that a slow election cannot delay them.
func (b *Broker) rebalanceLoop() {
	if b.cfg.DisableAutoLeaderRebalance {
		b.wg.Done()
		return
	}
	b.every(b.cfg.LeaderImbalanceCheckInterval, b.rebalance, nil)
}

// rebalance proposes the preferred-leader elections this broker nominates
// itself for (it is the first replica, in the ISR, live, and not leader).
func (b *Broker) rebalance() {
	if !b.leaseValid() {
		return
	}
	regs := map[int32]BrokerRegistration{}
	for _, r := range b.ctrl.Registrations() {
		regs[r.ID] = r
	}
	topics := b.ctrl.Topics()
	for _, tp := range preferredToElect(topics, regs, b.cfg.BrokerID) {
		ps := topics[slices.IndexFunc(topics, func(ts TopicState) bool { return ts.Name == tp.Topic })].Partitions[tp.Partition]
		out, err := b.ctrl.ElectPreferred(tp, ps.LeaderEpoch, ps.PartitionEpoch)
		if err != nil {
			b.logger.Debug("preferred leader election refused", "partition", tp, "err", err)
			continue
		}
		b.logger.Info("preferred leader elected (auto.leader.rebalance.enable)", "partition", tp, "leader", out.Leader, "leader_epoch", out.LeaderEpoch)
	}
}

// Shutdown is Kafka's controlled shutdown, then Close: when the controller
// watches sessions, the broker fences its own registration first, so that
// every partition it leads gets a new leader at once instead of after the
// session timeout (clients are answered NOT_LEADER_OR_FOLLOWER and move).
// Close alone stops the broker as a crash would.
func (b *Broker) Shutdown() error {
	b.lease.Lock()
	enforced, epoch := b.lease.st.enforced, b.lease.st.epoch
	b.lease.st.leaving = true
	b.lease.Unlock()
	if enforced {
		if err := b.ctrl.ShutdownBroker(b.cfg.BrokerID, epoch); err != nil {
			b.logger.Warn("controlled shutdown: could not fence this broker; its partitions move when its session expires", "err", err)
		} else {
			b.logger.Info("controlled shutdown: fenced this broker's registration; its partitions have new leaders", "broker_epoch", epoch)
		}
	}
	return b.Close()
}

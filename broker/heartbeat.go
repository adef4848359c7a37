package broker

import (
	"errors"
	"slices"
	"time"

	"github.com/kwal/kwal/clock"
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
	// parked: remotewal partitions this broker leads whose slice task
	// is stopped because the lease ran out, by leader epoch.
	parked map[TopicPartition]int32
}

// register records a new incarnation with the controller. With catchUp
// (a broker that was fenced), the broker first applies every topic state
// the controller holds, which includes whatever was decided while it was
// fenced (new leaders of its partitions): the registration returns once
// the controller applied it, but the subscription may deliver those
// changes later, and a fresh lease must not let this broker act on a
// leadership it lost in the meantime.
func (b *Broker) register(catchUp bool) error {
	sent := b.clock.Now()
	reg, err := b.ctrl.RegisterBroker(b.info)
	if err != nil {
		return err
	}
	if catchUp {
		for _, ts := range b.ctrl.Topics() {
			b.applyTopic(ts)
		}
	}
	b.lease.Lock()
	b.lease.st.epoch = reg.Epoch
	b.lease.st.until = sent.Add(b.cfg.BrokerSessionTimeout)
	b.lease.st.valid = true
	b.lease.Unlock()
	b.logger.Info("registered with the controller", "broker_epoch", reg.Epoch)
	b.unparkRemoteLeaders()
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
	// A lease that ran out while no heartbeat returned (a pause, a
	// controller that does not answer) is noticed before the next one is
	// sent: the remote-WAL tasks stop at once.
	b.noteLease()
	b.reportLogDir()
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
	case errors.Is(err, ErrBrokerFenced) && b.dir.offline():
		b.retireFenced(epoch)
	case errors.Is(err, ErrBrokerFenced):
		b.logger.Warn("fenced by the controller; registering again with a new broker epoch", "broker_epoch", epoch)
		if err := b.register(true); err != nil {
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
	parked := len(b.lease.st.parked) > 0
	b.lease.Unlock()
	if was && valid && parked {
		// Parked by a leadership that started while the lease had run
		// out (startRemoteLeader), with no transition seen here.
		b.unparkRemoteLeaders()
	}
	switch {
	case was && !valid:
		b.logger.Error("lease expired: no heartbeat acknowledged within broker.session.timeout.ms; fencing myself (leading nothing, refusing produces)",
			"session_timeout", b.cfg.BrokerSessionTimeout, "lease_end", until)
		b.parkRemoteLeaders()
		for _, p := range b.partitionsSnapshot() {
			b.wake(p.tp)
		}
	case !was && valid:
		b.logger.Info("lease renewed: acting as leader again where the controller says so")
		b.unparkRemoteLeaders()
	}
}

// startRemoteLeader starts the remote-WAL slice task of p, which this
// broker now leads at epoch, at its log end; with the lease run out the
// task is parked instead, until the lease is renewed. Caller holds roles.
func (b *Broker) startRemoteLeader(p *partition, epoch int32) {
	if !b.leaseValid() {
		b.lease.Lock()
		if b.lease.st.parked == nil {
			b.lease.st.parked = map[TopicPartition]int32{}
		}
		b.lease.st.parked[p.tp] = epoch
		b.lease.Unlock()
		b.logger.Warn("remote WAL slice task parked: leading without a lease", "partition", p.tp, "leader_epoch", epoch)
		return
	}
	b.unpark(p.tp)
	if err := b.cfg.Replicator.StartLeader(p.tp, p.log, epoch, p.log.LogEndOffset()); err != nil {
		b.logger.Error("remote WAL leader start", "partition", p.tp, "err", err)
	}
}

// unpark forgets that tp's slice task is parked. Caller holds roles.
func (b *Broker) unpark(tp TopicPartition) {
	b.lease.Lock()
	delete(b.lease.st.parked, tp)
	b.lease.Unlock()
}

// parkRemoteLeaders stops the slice task of every remotewal partition
// this broker leads, once its lease has run out: a self-fenced leader
// cuts and uploads nothing more, so nothing it appends from now on can be
// published, whatever the controller decides meanwhile. Slices already
// handed to the combiner are published as usual (they were cut while the
// lease held).
func (b *Broker) parkRemoteLeaders() {
	if b.cfg.Replicator == nil {
		return
	}
	b.roles.Lock()
	defer b.roles.Unlock()
	if b.leaseValid() { // renewed meanwhile
		return
	}
	for _, p := range b.partitionsSnapshot() {
		st, leader := p.snapshot()
		if p.mode != RemoteWAL || !leader {
			continue
		}
		b.cfg.Replicator.StopLeader(p.tp)
		b.lease.Lock()
		if b.lease.st.parked == nil {
			b.lease.st.parked = map[TopicPartition]int32{}
		}
		b.lease.st.parked[p.tp] = st.LeaderEpoch
		b.lease.Unlock()
		b.logger.Warn("remote WAL slice task parked: lease expired", "partition", p.tp, "leader_epoch", st.LeaderEpoch)
	}
}

// unparkRemoteLeaders restarts, at their log end, the slice tasks parked
// by parkRemoteLeaders whose partition this broker still leads at the same
// leader epoch (a lease renewed without a fence); the others were taken
// over by applyTopic. Bytes appended before the park that no slice holds
// reach the followers through their fallback to the leader, as at any
// leadership start.
func (b *Broker) unparkRemoteLeaders() {
	if b.cfg.Replicator == nil {
		return
	}
	b.roles.Lock()
	defer b.roles.Unlock()
	if !b.leaseValid() {
		return
	}
	b.lease.Lock()
	parked := b.lease.st.parked
	b.lease.st.parked = nil
	b.lease.Unlock()
	for tp, epoch := range parked {
		p := b.partition(tp)
		if p == nil {
			continue
		}
		if st, leader := p.snapshot(); !leader || st.LeaderEpoch != epoch {
			continue
		}
		b.logger.Info("remote WAL slice task resumed: lease renewed", "partition", tp, "leader_epoch", epoch)
		if err := b.cfg.Replicator.StartLeader(tp, p.log, epoch, p.log.LogEndOffset()); err != nil {
			b.logger.Error("remote WAL leader start", "partition", tp, "err", err)
		}
	}
}

// heartbeatLoop heartbeats every broker.heartbeat.interval.ms, first when
// t (made in New) fires; a log dir going offline is reported at once
// (logdir.go), between heartbeats.
func (b *Broker) heartbeatLoop(t clock.Timer) {
	b.everyOrWhen(t, b.cfg.BrokerHeartbeatInterval, b.heartbeat, b.cfg.afterHeartbeat, b.dir.failed, b.reportLogDir)
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

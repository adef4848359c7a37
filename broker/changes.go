package broker

// clusterChanged is the controller's change feed: a channel closed once a
// record that changes the cluster state is applied (a topic, leader, ISR
// or registration change; ClusterChanged, where the controller has it,
// which leaves out heartbeats; else Changed, closed at every record), nil
// for a controller without one (never ready).
func (b *Broker) clusterChanged() <-chan struct{} {
	if c, ok := b.ctrl.(interface{ ClusterChanged() <-chan struct{} }); ok {
		return c.ClusterChanged()
	}
	if c, ok := b.ctrl.(interface{ Changed() <-chan struct{} }); ok {
		return c.Changed()
	}
	return nil
}

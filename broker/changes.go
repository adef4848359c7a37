package broker

// clusterChanged is the controller's change feed (a channel closed once
// the next record is applied: a topic, leader, ISR or registration
// change), nil for a controller without one (never ready).
func (b *Broker) clusterChanged() <-chan struct{} {
	if c, ok := b.ctrl.(interface{ Changed() <-chan struct{} }); ok {
		return c.Changed()
	}
	return nil
}

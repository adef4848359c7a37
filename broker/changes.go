package broker

import "sync"

// changeFeed is a broadcast of "something observable changed": Changed
// returns a channel that the next Signal closes. A waiter takes the
// channel, then checks the state it waits for, then waits on the channel,
// so that a change between its check and its wait is not missed (the
// pattern of kafkalog's AppendNotify). Signal never blocks and may be
// called with other locks held.
type changeFeed struct {
	mu struct {
		sync.Mutex
		ch chan struct{}
	}
}

// Changed returns a channel closed at the next Signal.
func (f *changeFeed) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.ch == nil {
		f.mu.ch = make(chan struct{})
	}
	return f.mu.ch
}

// Signal wakes every holder of a Changed channel.
func (f *changeFeed) Signal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.ch != nil {
		close(f.mu.ch)
		f.mu.ch = nil
	}
}

// clusterChanged is the controller's change feed (a channel closed once
// the next record is applied: a topic, leader, ISR or registration
// change), nil for a controller without one (never ready).
func (b *Broker) clusterChanged() <-chan struct{} {
	if c, ok := b.ctrl.(interface{ Changed() <-chan struct{} }); ok {
		return c.Changed()
	}
	return nil
}

package changefeed

import "sync"

// Source is something whose changes can be waited on.
type Source interface {
	// Changed returns a channel closed at the next change.
	Changed() <-chan struct{}
}

// Feed is a broadcast: Changed returns a channel that the next Signal
// closes.
type Feed struct {
	mu struct {
		sync.Mutex
		ch chan struct{}
	}
}

var _ Source = (*Feed)(nil)

// Changed returns a channel closed at the next Signal.
func (f *Feed) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.ch == nil {
		f.mu.ch = make(chan struct{})
	}
	return f.mu.ch
}

// Signal wakes every holder of a Changed channel.
func (f *Feed) Signal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.ch != nil {
		close(f.mu.ch)
		f.mu.ch = nil
	}
}

package changefeed

import "testing"

// TestFeedSignalsEachHolderOnce: every channel taken before a Signal is
// closed by it, a channel taken after waits for the next one, and a
// Signal with no holder is not remembered.
func TestFeedSignalsEachHolderOnce(t *testing.T) {
	var f Feed
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	f.Signal() // nobody holds a channel: nothing to remember
	a, b := f.Changed(), f.Changed()
	if closed(a) || closed(b) {
		t.Fatal("closed before any Signal after they were taken")
	}
	f.Signal()
	if !closed(a) || !closed(b) {
		t.Fatal("Signal did not close the channels taken before it")
	}
	c := f.Changed()
	if closed(c) {
		t.Fatal("a channel taken after the Signal is already closed")
	}
	f.Signal()
	if !closed(c) {
		t.Fatal("the second Signal did not close the later channel")
	}
}

//go:build !linux

package latbench

import "time"

// wire, off Linux, waits on Go's timers, which round sub-millisecond
// waits up to about a millisecond; the report's measured delay says so.
type wire struct{}

func newWire() *wire { return &wire{} }

// after returns a channel closed once due has passed.
func (w *wire) after(due time.Time) <-chan struct{} {
	ch := make(chan struct{})
	if d := time.Until(due); d > 0 {
		time.AfterFunc(d, func() { close(ch) })
	} else {
		close(ch)
	}
	return ch
}

func (w *wire) close() {}

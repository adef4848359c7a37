package latbench

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// progress is the one-line display of a long run: step k of n, what runs,
// records done in the step and time elapsed, redrawn with \r. A nil writer
// shows nothing. One goroutine redraws; stop ends it.
type progress struct {
	w     io.Writer
	total int
	start time.Time
	count atomic.Int64 // records done in the current step
	mu    struct {
		sync.Mutex
		done  int
		label string
	}
	quit chan struct{}
	wg   sync.WaitGroup
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w, total: total, start: time.Now(), quit: make(chan struct{})}
	if w == nil {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func (p *progress) set(label string) {
	p.mu.Lock()
	p.mu.label = label
	p.mu.Unlock()
	p.draw()
}

func (p *progress) begin(label string) {
	p.count.Store(0)
	p.set(label)
}

func (p *progress) end() {
	p.mu.Lock()
	p.mu.done++
	p.mu.Unlock()
}

func (p *progress) draw() {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	done, label := p.mu.done, p.mu.label
	p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[K[%3d/%d] %6.1fs  %s  %d records", done, p.total, time.Since(p.start).Seconds(), label, p.count.Load())
}

func (p *progress) stop() {
	close(p.quit)
	p.wg.Wait()
	if p.w != nil {
		p.draw()
		fmt.Fprintln(p.w)
	}
}

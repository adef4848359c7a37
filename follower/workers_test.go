package follower

import (
	"sync"
	"testing"
)

// TestWorkersNeverQueue runs more jobs than the idle workers kept, each
// blocked until every one has started: a job that waited for a worker to
// be free would deadlock the test. Then the workers are reused (the idle
// count stays within maxIdle) and leave once done closes.
func TestWorkersNeverQueue(t *testing.T) {
	const maxIdle, jobs = 3, 10
	done := make(chan struct{})
	var wg sync.WaitGroup
	w := newWorkers(done, &wg, maxIdle)
	for round := range 3 {
		var started, finished sync.WaitGroup
		started.Add(jobs)
		finished.Add(jobs)
		release := make(chan struct{})
		for range jobs {
			w.run(func() {
				started.Done()
				<-release
				finished.Done()
			})
		}
		started.Wait() // all ten run at once
		close(release)
		finished.Wait()
		if n := w.idle.Load(); n > maxIdle {
			t.Fatalf("round %d: %d idle workers, at most %d kept", round, n, maxIdle)
		}
	}
	close(done)
	wg.Wait() // every worker left
	if n := w.idle.Load(); n != 0 {
		t.Fatalf("%d workers idle after done", n)
	}
	ran := make(chan struct{})
	w.run(func() { close(ran) }) // after done: still runs, on a goroutine of its own
	<-ran
	wg.Wait()
}

// Package clock is the injectable time source every waiting component of
// kwal takes. Production code uses Real; tests use Manual, whose time moves
// only when the test calls Advance, so no test sleeps to wait for a timer.
//
// Manual's timers behave as Go's own since Go 1.23: Advance and Set send on
// the channel of every timer now due, in deadline order, under the clock's
// lock, and Stop and Reset take out a firing not yet received, so no
// receive after them sees a firing from before (a re-armed owner is never
// woken early by its old arming). Armed and Pending let a test learn that
// the goroutine under test has started waiting before it advances.
//
// Concurrency: both implementations are safe for concurrent use.
package clock

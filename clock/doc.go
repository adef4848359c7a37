// Package clock is the injectable time source every waiting component of
// kwal takes. Production code uses Real; tests use Manual, whose time moves
// only when the test calls Advance, so no test sleeps to wait for a timer.
//
// Concurrency: both implementations are safe for concurrent use.
package clock

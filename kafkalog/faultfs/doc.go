// Package faultfs holds fault decorators of kafkalog.FS for tests: a
// file system that turns read-only under a path prefix (EROFS on every
// write, sync, truncation, create, rename, remove and mkdir, as a disk
// remounted read-only or failing does), switched on and off at run time.
//
// It owns no state but the switch, an atomic, so a test may flip it
// while brokers write through it from any goroutine. It does not model
// lost unsynced writes (kafkalog.MemFS's crash clones do).
package faultfs

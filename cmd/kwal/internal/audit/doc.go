// Package audit is `kwal audit`: it rebuilds, from the combined objects
// alone, what the remote-WAL metadata should say, and compares it with
// what the metadata topic does say. Combined objects describe themselves
// (the footer indexes every slice with its CRC32C), so an auditor needs no
// other source of truth.
//
// Findings:
//
//	corrupt-object   the object's trailer or footer fails its checks
//	corrupt-slice    a slice's stored bytes fail their CRC32C (--verify-slices)
//	orphan           stored, but no metadata reached COPY_SEGMENT_FINISHED
//	missing          metadata says FINISHED, the object is not stored
//	entry-mismatch   the footer and the metadata disagree on the slices
//	deleted-present  DELETE_SEGMENT_FINISHED, yet the object is stored
//
// Dead ranges (a new leader's DELETE of every older-epoch entry past its log
// end, metadata.DeadRange) are accounted for: dead entries are left out of
// the footer-versus-metadata comparison; an object whose every entry is
// dead is not missing when the store no longer has it (its AZ's store may
// be gone, and nothing needs it), and while still stored it is the note
// dead-awaiting-deletion, not a leak or a finding.
//
// Partial objects: the combiner publishes an object without the slices it
// gave up for their own partition (a slice after a given-up one of its
// partition, or one the encoder refused), so that one partition's failures
// do not fail the others'. The footer then indexes slices no metadata
// entry names: they are counted (unpublished_slices) and their bytes,
// with those of dead entries, are dead bytes (dead_bytes) that go with
// their object; they are not findings. An object none of whose slices was
// published is never published, so it is an orphan for the collector.
//
// Compare is pure; Run lists the store, reads footers with ranged GETs and
// hands both sides to Compare.
package audit

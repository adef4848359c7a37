// Package fsstore is an objstore.Store on a local directory: the embedded
// default of `kwal demo` and a backend whose crash behaviour is that of a
// real file system.
//
// Layout: key "a/b/c" is the file <root>/a/b/c; the "/"-separated parts of a
// key are directories, so, as with versitygw, key "a" and key "a/b" cannot
// both exist (the second Put fails with ErrInvalidKey). Temporary files live
// in <root>/.kwal-tmp, which is why keys may not start with ".kwal-tmp".
//
//	Put:  write <root>/.kwal-tmp/put-* ; fsync ; then
//	      overwrite:    rename(tmp, final)             (atomic replace)
//	      create-only:  link(tmp, final) ; unlink(tmp)  (link fails if final exists)
//	      ; fsync the parent directory
//
// Readers never see a partly written object: the final name appears only
// once its bytes are synced. Create-only is race-free across processes,
// because link(2) refuses an existing target atomically.
//
// It does not own the directory's other contents and does not lock it; two
// stores on one directory behave like two S3 clients of one bucket.
//
// Concurrency: safe for concurrent use; it keeps no mutable state besides
// the file system.
package fsstore

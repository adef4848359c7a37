// Package objstore is kwal's object-storage interface: the contract every
// backend keeps, its sentinel errors, the request tags the ledger reads,
// and the shared statement of range semantics (ResolveRange).
//
// It owns the interface only. Backends, decorators, URL parsing and the
// acceptance suite live in sub-packages; what the objects contain belongs to
// the combiner and follower packages.
//
// # Contract
//
// Store has five methods, each taking ctx first and honouring its
// cancellation:
//
//	Put(key, body, {IfNoneMatch})   create-only with IfNoneMatch (If-None-Match: *)
//	GetRange(key, off, length)      length<0: to the end; off<0: last -off bytes;
//	                                ranges past the end are clipped
//	Head(key)                       size and modification time
//	Delete(key)                     a missing key is not an error
//	List({Prefix, StartAfter, Limit}) keys in lexical order, paged
//
// Bodies passed to Put are neither kept nor modified; slices returned by
// GetRange belong to the caller.
//
// # Lent bodies
//
// A store may also lend a GET's bytes instead of handing them over
// (BodyGetter.GetRangeBody, reached through GetBody, which falls back to
// GetRange): a *Body is read-only and valid until its last Release;
// Retain adds a reference. mem lends a view of the stored object (no
// copy: a stored object is only ever replaced, never changed); fsstore,
// s3store and miniostore read the body once, from the file or the socket,
// into a buffer of their BufferPool (power-of-two classes, 4 KiB to 64
// MiB), which the last Release hands back for the next GET. The ledger
// and latency decorators forward lent bodies; fault copies one only to
// truncate or corrupt it. Forgetting a Release loses a buffer to the
// garbage collector, never data; releasing twice panics. The follower
// reads every slice this way (follower/buffers.go). Keys are "/"-separated; a key that is a
// "/"-prefix of another ("a" and "a/b") cannot be stored by file-backed
// stores (fsstore, versitygw), so kwal never writes such pairs.
//
// # Errors
//
// Methods wrap these sentinels with the operation and key; test with
// errors.Is:
//
//	ErrNotFound      GetRange, Head: no such key
//	ErrExists        Put with IfNoneMatch: the key exists (S3 412, or 409
//	                 ConditionalRequestConflict while another create races)
//	ErrInvalidRange  GetRange: off at or past the end of a non-empty object (416)
//	ErrInvalidKey    empty key, or one the backend cannot store
//
// Other errors are transport or server failures; the S3 backends have
// already retried the retriable ones (500, 503 SlowDown) by then.
//
// # Backends and URLs (package storeurl)
//
//	mem://                                            objstore/mem
//	file:///dir                                       objstore/fsstore
//	s3://bucket/prefix?endpoint=..&path_style=true    objstore/s3store (aws-sdk-go-v2;
//	                                                  S3 Express directory buckets included)
//	minio://host:port/bucket/prefix?secure=false      objstore/miniostore (minio-go)
//
// # Decorators
//
// Each decorator is a Store wrapping a Store, safe for concurrent use:
//
//	objstore/fault    seeded, replayable injected errors (500, 503 SlowDown),
//	                  timeouts, latency, truncated and corrupted bodies,
//	                  ambiguous PUTs
//	objstore/latency  first-byte latency and bandwidth models
//	                  ("s3express", "s3standard", "none") on an injected clock
//	objstore/ledger   counts requests and bytes by kind, component,
//	                  partition and rack, for the cost model
//
// Compose them outermost-first as ledger(latency(fault(backend))): the
// ledger then counts every request the component made, including those
// that failed by injection, and the latency applies to failed requests as
// it would on a real store:
//
//	base, _ := storeurl.Open(ctx, "s3://bucket/wal?endpoint=...")
//	f, _ := fault.New(base, fault.Config{Seed: 1, Rules: rules})
//	lat, _ := latency.New(f, model, clk, 1)
//	store := ledger.Wrap(lat, l)
//
// The ledger counts Store calls. A call can cost more than one S3 request:
// SDK retries, the HEAD that resolves a range on an empty object, and
// directory-bucket listings are not counted separately.
//
// # Tags
//
// WithTags puts the calling component, user partition and rack in the
// context; the ledger reads them back with TagsFrom.
//
// # Testing
//
// objstore/objstoretest.Run is the acceptance suite. It runs against mem,
// fsstore and every decorator always, and against s3store and miniostore
// when KWAL_S3_ENDPOINT is set (scripts/test-env.sh starts versitygw and
// sets it).
package objstore

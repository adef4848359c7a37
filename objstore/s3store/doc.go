// Package s3store is an objstore.Store on Amazon S3 and S3-compatible servers
// (versitygw in tests), built on aws-sdk-go-v2.
//
// It owns the mapping of the Store contract onto S3 requests:
//
//	Put       PutObject, create-only with If-None-Match: *
//	          412 PreconditionFailed, 409 ConditionalRequestConflict -> ErrExists
//	GetRange  GetObject with Range: bytes=a-b | bytes=a- | bytes=-n
//	          416 InvalidRange -> ErrInvalidRange; 404 NoSuchKey -> ErrNotFound
//	Head      HeadObject; 404 -> ErrNotFound
//	Delete    DeleteObject (S3 answers 204 for a missing key)
//	List      ListObjectsV2 with Prefix, StartAfter, MaxKeys
//
// Keys are stored under Config.Prefix, which List strips again.
//
// Retries: the SDK's standard retryer, with Config.MaxAttempts attempts and
// exponential backoff with full jitter capped at Config.MaxBackoff. It
// retries 500, 502, 503 and 504 and the throttling codes, SlowDown among
// them. A create-only Put that is retried after an ambiguous failure may
// answer ErrExists for its own first attempt; a caller that must tell its
// own write from another writer's compares the stored object (for example
// by Head size or by reading it back).
//
// Checksums: request checksums are sent and response checksums validated
// only when an operation requires them. The SDK's default since
// service/s3 v1.73 streams bodies with aws-chunked trailing checksums, which
// several S3-compatible servers mishandle (some store the chunk framing as
// object bytes). Integrity of kwal's objects is checked end to end by the
// CRCs inside the combined-object format instead.
//
// S3 Express One Zone: directory buckets (names ending in "--x-s3") work
// with no extra configuration; the SDK creates and refreshes the session
// credentials that CreateSession hands out. Directory buckets differ in
// listing: ListObjectsV2 does not support StartAfter, accepts only
// prefixes ending in "/", and does not promise lexical order. For them List
// reads every key under the longest "/"-terminated part of the prefix with
// continuation tokens, filters and sorts client-side, and returns the
// requested page: one page costs as many LIST requests as the whole prefix
// needs. kwal lists only during orphan clean-up and recovery, where that is
// acceptable. Config.DirectoryBucket forces this mode (the tests use it
// against versitygw).
//
// Concurrency: safe for concurrent use; the SDK client is.
package s3store

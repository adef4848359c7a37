// Package miniostore is an objstore.Store on S3-compatible servers through
// minio-go, the second client kwal checks the Store contract with (and the
// client of MinIO deployments in docker-compose).
//
// Mapping onto requests matches s3store: create-only PUT sends
// If-None-Match: * (PutObjectOptions.SetMatchETagExcept("*")); 412 and 409
// ConditionalRequestConflict become ErrExists; ranged GETs use
// GetObjectOptions.SetRange (suffix ranges as bytes=-n); 416 becomes
// ErrInvalidRange and 404 ErrNotFound; List is ListObjectsV2 with
// StartAfter, reading one key past the page to learn whether it is
// truncated. Keys are stored under Config.Prefix, which List strips again.
//
// Retries are minio-go's: up to Config.MaxRetries attempts with
// exponential backoff and jitter on 5xx and throttling answers (SlowDown
// included).
//
// Concurrency: safe for concurrent use; the minio client is.
package miniostore

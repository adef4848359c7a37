// Package storeurl opens an objstore.Store from a URL, so that the broker
// configuration and the command line name a store with one string:
//
//	mem://
//	mem://?arena=1073741824&gets=pooled
//	file:///var/lib/kwal/objects
//	s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true
//	minio://127.0.0.1:9000/bucket/prefix?secure=false
//
// mem parameters: arena (bytes of memory faulted in at once that keep the
// bodies, mem.WithArena), gets (lent, the default, or pooled:
// mem.WithPooledGets); both make an in-process store charge what a
// client of a remote one pays, for benchmarks. s3 parameters: endpoint, region, path_style, directory_bucket,
// max_attempts, create_bucket. minio parameters: secure, region,
// max_retries, create_bucket. Unknown parameters are an error.
//
// Credentials never come from the URL (access_key and secret_key are
// refused with ErrCredentialsInURL: a URL lands on command lines, in
// config files and logs). They come from KWAL_S3_ACCESS_KEY and
// KWAL_S3_SECRET_KEY, else, for s3, from the SDK's default chain
// (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared
// config, an instance or task role).
//
// It lives apart from package objstore because it imports every backend,
// and the backends import objstore. It does not add decorators; wrap the
// result (see the objstore package documentation).
package storeurl

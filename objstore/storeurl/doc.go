// Package storeurl opens an objstore.Store from a URL, so that the broker
// configuration and the command line name a store with one string:
//
//	mem://
//	file:///var/lib/kwal/objects
//	s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true&access_key=K&secret_key=S
//	minio://127.0.0.1:9000/bucket/prefix?secure=false&access_key=K&secret_key=S
//
// s3 parameters: endpoint, region, path_style, access_key, secret_key,
// directory_bucket, max_attempts, create_bucket. minio parameters: secure,
// region, access_key, secret_key, max_retries, create_bucket. Unknown
// parameters are an error. Credentials come from the URL, else from
// KWAL_S3_ACCESS_KEY and KWAL_S3_SECRET_KEY, else from the client's default
// chain (AWS_* environment, shared config, instance role).
//
// It lives apart from package objstore because it imports every backend,
// and the backends import objstore. It does not add decorators; wrap the
// result (see the objstore package documentation).
package storeurl

// Package objstoretest is the acceptance suite every objstore.Store runs:
// the in-memory and file backends always, the S3 backends when the
// environment provides a server (KWAL_S3_ENDPOINT, set by
// scripts/test-env.sh), and every decorator with its faults turned off.
//
// It owns the statement of the Store contract as executable checks and a
// latency benchmark helper. It does not start servers.
//
// Keys: the suite never writes a key that is a "/"-prefix of another key
// (such as "a" and "a/b"), because file-backed servers (versitygw, the fs
// backend) store objects as files and cannot hold both.
package objstoretest

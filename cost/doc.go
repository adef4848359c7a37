// Package cost turns counts of object-store requests, bytes and cross-AZ
// traffic into dollars per broker-month, and compares the remote
// write-ahead log of KIP-1176 with classic Kafka replication.
//
// It owns:
//
//   - price sheets: JSON files, one per priced thing (an object-store class,
//     the cross-AZ network, a block-storage class, an instance type), where
//     every figure carries its source and date. The defaults are embedded
//     from sheets/*.json; Book.LoadDir adds a user's files without code.
//   - Model.MonthlyCost: measured Usage (counts over a duration) to a
//     Breakdown of named, sourced line items per broker-month (720 h).
//   - Workload and Counting: the analytical model of the KIP-1176 appendix
//     (90 i3en.2xlarge brokers, 112 GB/h inbound each, one upload every
//     10 ms, 1 hour kept), the reproduction of its table, the same table
//     with everything counted, sensitivity sweeps and break-even points.
//   - text tables, a JSON report and a PNG chart of the break-even.
//
// It does not measure anything and does not know the objstore ledger type;
// an adapter elsewhere converts a ledger into a Usage.
//
// Billing conventions (each a named, printed parameter, never a hidden
// constant): a GB is 2^30 bytes and a KB 1,024 bytes, as AWS bills; a month
// is 720 hours; a byte that crosses AZs is billed once leaving and once
// arriving (the KIP counts one direction only); S3 Express launch prices
// charge the per-GB upload and retrieval fees only on the part of a request
// above 512 KB, current prices on every byte.
//
// Concurrency: everything here is a pure function of its inputs. A Book is
// not modified after loading and may then be shared between goroutines.
package cost

package cost

import (
	"time"

	"github.com/kwal/kwal/objstore/ledger"
)

// UsageFromLedger turns what a run's ledger measured over d into a Usage for
// MonthlyCost: request counts and bytes by kind, and every byte that crossed
// racks. Failed requests are billed too (S3 bills them). brokers is how many
// brokers the run had, so the result is per broker-month. storedBytesAvg is
// not in the ledger; pass the run's own figure (0 if unknown).
func UsageFromLedger(s ledger.Snapshot, d time.Duration, brokers int, storedBytesAvg float64) Usage {
	u := Usage{Duration: d, Brokers: brokers, StoredBytesAvg: storedBytesAvg}
	for kind, t := range s.ByKind {
		switch kind {
		case ledger.Put:
			u.Puts += t.Requests
			u.BytesPut += t.BytesWritten
		case ledger.Get:
			u.Gets += t.Requests
			u.BytesGot += t.BytesRead
		case ledger.Head:
			u.Heads += t.Requests
		case ledger.List:
			u.Lists += t.Requests
		case ledger.Delete:
			u.Deletes += t.Requests
		}
	}
	u.CrossAZBytes = s.CrossRackBytes
	return u
}

package cost

import (
	"testing"
	"time"

	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/ledger"
)

func TestUsageFromLedger(t *testing.T) {
	l := ledger.New()
	tags := objstore.Tags{Component: "combiner", Topic: "t", Partition: 0, Rack: "az1"}
	for i := 0; i < 100; i++ {
		l.RecordRequest(ledger.Put, tags, 300<<10, 0, false)
	}
	for i := 0; i < 40; i++ {
		l.RecordRequest(ledger.Get, tags, 0, 16<<10, false)
	}
	l.RecordRequest(ledger.Delete, tags, 0, 0, false)
	l.RecordTransfer("replica-fetch", "az1", "az2", ledger.TopicPartition{Topic: "t"}, 5000)
	l.RecordTransfer("consume", "az2", "az2", ledger.TopicPartition{Topic: "t"}, 7000)

	u := UsageFromLedger(l.Snapshot(), time.Second, 3, 0)
	if u.Puts != 100 || u.BytesPut != 100*300<<10 || u.Gets != 40 || u.BytesGot != 40*16<<10 || u.Deletes != 1 {
		t.Fatalf("requests: %+v", u)
	}
	if u.CrossAZBytes != 5000 {
		t.Fatalf("cross-AZ bytes %d, want 5000 (same-rack bytes must not count)", u.CrossAZBytes)
	}
	book, err := DefaultBook()
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(book)
	if err != nil {
		t.Fatal(err)
	}
	sheet, err := book.Sheet("s3express-2025")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.MonthlyCost(u, sheet)
	if err != nil {
		t.Fatal(err)
	}
	// 100 PUT/s for 720 h over 3 brokers at $0.00113 per 1,000.
	want := 100.0 * 3600 * 720 / 3 / 1000 * 0.00113
	got := 0.0
	for _, ln := range b.Lines {
		if ln.Item == "PUT requests" || ln.Item == "PUT" {
			got = ln.USD
		}
	}
	if got == 0 {
		t.Logf("lines: %+v", b.Lines)
		t.Fatal("no PUT line in the breakdown")
	}
	if d := got - want; d > 0.01 || d < -0.01 {
		t.Fatalf("PUT cost %.4f, want %.4f", got, want)
	}
}

package kafkalog

import (
	"fmt"
	"testing"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

// benchRecords is 64 records of about 256 bytes of JSON-like text (16 KiB
// before compression), compressible as real payloads are.
func benchRecords() kafkalogtest.BatchSpec {
	s := kafkalogtest.BatchSpec{BaseTimestamp: 1_700_000_000_000, ProducerID: 1}
	for i := range 64 {
		v := fmt.Sprintf(`{"order":%d,"customer":"c-%04d","items":[{"sku":"sku-%03d","qty":%d}],"note":"%0200d"}`, i, i*7, i%13, i%5, i)
		s.Records = append(s.Records, kafkalogtest.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v), TimestampDelta: int64(i)})
	}
	return s
}

// BenchmarkProducePath measures what the leader does per produced batch
// (validate, then append to an in-memory log) for uncompressed, gzip and
// zstd batches of the same records, with full validation (BatchValidator:
// every record, decompressed) and with structure only (ValidateBatch: CRC,
// and the record walk for uncompressed batches, which is what the leader
// did for compressed batches before). SetBytes is the uncompressed size,
// so MB/s compare like for like. The ratios sub-benchmark reports, from
// the same run, full/structure per codec and codec/none for full
// validation.
func BenchmarkProducePath(b *testing.B) {
	spec := benchRecords()
	rawSize := int64(len(kafkalogtest.Records(spec)))
	ns := map[string]float64{}
	codecs := []struct {
		name string
		id   int
	}{{"none", 0}, {"gzip", kafkalogtest.Gzip}, {"zstd", kafkalogtest.Zstd}}
	for _, c := range codecs {
		batch := kafkalogtest.EncodeCompressed(spec, c.id)
		for _, mode := range []string{"full", "structure"} {
			name := "codec=" + c.name + "/validate=" + mode
			b.Run(name, func(b *testing.B) {
				l := newEnv(b, Config{SegmentBytes: 64 << 20}).log
				v := NewBatchValidator(0, 0)
				b.SetBytes(rawSize)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var err error
					if mode == "full" {
						var vb ValidBatch
						if vb, err = v.Validate(batch); err == nil {
							_, err = l.AppendValidatedAsLeader(vb, 0)
						}
					} else if _, err = ValidateBatch(batch); err == nil {
						_, err = l.AppendValidatedAsLeader(ValidBatch{header: mustHeader(b, batch), bytes: batch, maxTimestamp: spec.BaseTimestamp + 63}, 0)
					}
					if err != nil {
						b.Fatal(err)
					}
					if i%1024 == 1023 {
						b.StopTimer()
						l.Truncate(0) // keep the in-memory log small
						b.StartTimer()
					}
				}
				b.StopTimer()
				ns[name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(float64(len(batch)), "batch-bytes")
			})
		}
	}
	b.Run("ratios", func(b *testing.B) {
		for range b.N {
		}
		for _, c := range codecs {
			full, structure := ns["codec="+c.name+"/validate=full"], ns["codec="+c.name+"/validate=structure"]
			if full > 0 && structure > 0 {
				b.ReportMetric(full/structure, c.name+"-full/structure")
			}
			if none := ns["codec=none/validate=full"]; none > 0 && full > 0 && c.id != 0 {
				b.ReportMetric(full/none, c.name+"/none")
			}
		}
	})
}

func mustHeader(b *testing.B, batch []byte) BatchHeader {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

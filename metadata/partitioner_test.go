package metadata

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Vectors from Kafka's UtilsTest.testMurmur2.
func TestMurmur2KafkaVectors(t *testing.T) {
	cases := []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, c := range cases {
		if got := Murmur2([]byte(c.in)); got != c.want {
			t.Errorf("Murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// franz-go's StickyKeyPartitioner is Kafka's default key partitioner:
// toPositive(murmur2(key)) % n. MetadataPartition must agree with it on the
// bytes "topic-partition", for every length mod 4 and several counts.
func TestMetadataPartitionMatchesKafkaKeyPartitioner(t *testing.T) {
	part := kgo.StickyKeyPartitioner(nil).ForTopic(DefaultTopic)
	for _, n := range []int32{1, 7, 50, 1000} {
		for i := 0; i < 500; i++ {
			tp := TopicPartition{Topic: fmt.Sprintf("topic%s", "abcdefg"[:i%7]), Partition: int32(i)}
			want := int32(part.Partition(&kgo.Record{Key: []byte(tp.String())}, int(n)))
			if got := MetadataPartition(tp, n); got != want {
				t.Fatalf("MetadataPartition(%s, %d) = %d, Kafka key partitioner says %d", tp, n, got, want)
			}
		}
	}
}

func TestSplit(t *testing.T) {
	const n = 50
	var entries []SliceEntry
	for p := int32(0); p < 40; p++ {
		entries = append(entries, testEntry("orders", p, int64(p)*100, int64(p)*100+9))
	}
	obj := testObject(1, 0, CopySegmentFinished, entries...)
	parts := Split(obj, n)
	seen := 0
	prev := int32(-1)
	for _, pt := range parts {
		if pt.MetadataPartition <= prev {
			t.Fatalf("parts not ordered by metadata partition")
		}
		prev = pt.MetadataPartition
		if pt.ID != obj.ID || pt.Key != obj.Key || pt.State != obj.State {
			t.Fatalf("part lost object fields: %+v", pt)
		}
		for _, e := range pt.Entries {
			if MetadataPartition(e.TopicPartition, n) != pt.MetadataPartition {
				t.Fatalf("entry %s on metadata partition %d", e.TopicPartition, pt.MetadataPartition)
			}
			seen++
		}
	}
	if seen != len(entries) {
		t.Fatalf("split kept %d of %d entries", seen, len(entries))
	}
	if len(obj.Entries) != 40 || !reflect.DeepEqual(obj.Entries, entries) {
		t.Fatal("Split modified its input")
	}
	if got := Split(testObject(2, 9, CopySegmentStarted), n); len(got) != 1 || got[0].MetadataPartition != 0 {
		t.Fatalf("empty object split into %+v", got)
	}
}

package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// BenchmarkOffsetCommit measures one OffsetCommit (acks=all to the
// ISR of the group's __consumer_offsets partition) from a client, on an
// in-process cluster on loopback.
func BenchmarkOffsetCommit(b *testing.B) {
	for _, tc := range []struct {
		racks []string
		rf    int16
	}{{[]string{"az1"}, 1}, {[]string{"az1", "az2", "az1"}, 3}} {
		b.Run(fmt.Sprintf("rf=%d/partitions=4", tc.rf), func(b *testing.B) {
			c := startCluster(b, tc.racks, func(cfg *Config) {
				groupTweak(cfg)
				cfg.Logger = quietLogger()
			})
			cl := newClient(b, c)
			createTopic(b, cl, "bench", 4, tc.rf, nil)
			adm := kadm.NewClient(cl)
			ctx := context.Background()
			commit := func(i int) {
				offs := kadm.Offsets{}
				for p := range int32(4) {
					offs.Add(kadm.Offset{Topic: "bench", Partition: p, At: int64(i), LeaderEpoch: -1})
				}
				r, err := adm.CommitOffsets(ctx, "bench-group", offs)
				if err != nil || r.Error() != nil {
					b.Fatalf("commit: %v %v", err, r.Error())
				}
			}
			commit(0) // creates __consumer_offsets and loads the partition
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				commit(i + 1)
			}
		})
	}
}

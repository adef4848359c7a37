package scalebench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// census is what the metadata topic holds: every record from the earliest
// offset to the end offsets listed when the census started.
type census struct {
	Records int64
	Bytes   int64 // key + value bytes of every record (Kafka's per-record framing not counted)
	// InWindow counts the records (and their bytes) whose timestamp, set by
	// the publishing client, falls in [from, to).
	InWindow      int64
	InWindowBytes int64
}

// takeCensus reads topic on bootstrap from the start to its end offsets.
func takeCensus(ctx context.Context, bootstrap []string, topic string, from, to time.Time) (census, error) {
	var c census
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ClientID("kwal-scalebench-census"))
	if err != nil {
		return c, fmt.Errorf("scalebench: census client: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return c, fmt.Errorf("scalebench: census end offsets: %w", err)
	}
	left := map[int32]int64{}
	offs := map[int32]kgo.Offset{}
	var listErr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && listErr == nil {
			listErr = fmt.Errorf("scalebench: census end offset of %s-%d: %w", topic, o.Partition, o.Err)
		}
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
			offs[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if listErr != nil {
		return c, listErr
	}
	if len(left) == 0 {
		return c, nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs})
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return c, fmt.Errorf("scalebench: census: %w (%d partitions unread)", err, len(left))
		}
		var fetchErr error
		fs.EachError(func(_ string, p int32, err error) {
			if fetchErr == nil {
				fetchErr = fmt.Errorf("scalebench: census fetch of %s-%d: %w", topic, p, err)
			}
		})
		if fetchErr != nil {
			return c, fetchErr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			n := int64(len(r.Key) + len(r.Value))
			c.Records++
			c.Bytes += n
			if !r.Timestamp.Before(from) && r.Timestamp.Before(to) {
				c.InWindow++
				c.InWindowBytes += n
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return c, nil
}

package follower

import (
	"reflect"
	"testing"

	"github.com/kwal/kwal/metadata"
)

var tpA = metadata.TopicPartition{Topic: "a", Partition: 0}
var tpB = metadata.TopicPartition{Topic: "b", Partition: 0}

func loc(key string, tp metadata.TopicPartition, base, last, pos, length int64) Located {
	return Located{Key: key, Entry: metadata.SliceEntry{TopicPartition: tp, BaseOffset: base, LastOffset: last, Position: pos, Length: length, RawLength: length}}
}

type span struct {
	key      string
	off, len int64
	n        int
}

func spans(rs []Read) []span {
	out := []span{}
	for _, r := range rs {
		out = append(out, span{r.Key, r.Off, r.Len, len(r.Slices)})
	}
	return out
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name    string
		logEnd  map[metadata.TopicPartition]int64
		pending map[metadata.TopicPartition][]Located
		cfg     PlanConfig
		want    []span
	}{
		{
			name:    "adjacent slices of one partition in one object coalesce",
			logEnd:  map[metadata.TopicPartition]int64{tpA: 0},
			pending: map[metadata.TopicPartition][]Located{tpA: {loc("o1", tpA, 10, 19, 116, 100), loc("o1", tpA, 0, 9, 16, 100)}},
			want:    []span{{"o1", 16, 200, 2}},
		},
		{
			name:   "different partitions in one object merge when the gap is small",
			logEnd: map[metadata.TopicPartition]int64{tpA: 0, tpB: 0},
			pending: map[metadata.TopicPartition][]Located{
				tpA: {loc("o1", tpA, 0, 9, 16, 100)},
				tpB: {loc("o1", tpB, 0, 4, 150, 50)},
			},
			cfg:  PlanConfig{MergeGapBytes: 64},
			want: []span{{"o1", 16, 184, 2}},
		},
		{
			name:   "gap larger than allowed splits the read",
			logEnd: map[metadata.TopicPartition]int64{tpA: 0, tpB: 0},
			pending: map[metadata.TopicPartition][]Located{
				tpA: {loc("o1", tpA, 0, 9, 16, 100)},
				tpB: {loc("o1", tpB, 0, 4, 150, 50)},
			},
			cfg:  PlanConfig{MergeGapBytes: 10},
			want: []span{{"o1", 16, 100, 1}, {"o1", 150, 50, 1}},
		},
		{
			name:   "range cap splits coalesced slices",
			logEnd: map[metadata.TopicPartition]int64{tpA: 0},
			pending: map[metadata.TopicPartition][]Located{tpA: {
				loc("o1", tpA, 0, 9, 0, 100), loc("o1", tpA, 10, 19, 100, 100), loc("o1", tpA, 20, 29, 200, 100),
			}},
			cfg:  PlanConfig{MaxRangeBytes: 200},
			want: []span{{"o1", 0, 200, 2}, {"o1", 200, 100, 1}},
		},
		{
			name:    "a single slice over the cap is still read whole",
			logEnd:  map[metadata.TopicPartition]int64{tpA: 0},
			pending: map[metadata.TopicPartition][]Located{tpA: {loc("o1", tpA, 0, 9, 0, 500)}},
			cfg:     PlanConfig{MaxRangeBytes: 200},
			want:    []span{{"o1", 0, 500, 1}},
		},
		{
			name:   "a gap holds back everything above it",
			logEnd: map[metadata.TopicPartition]int64{tpA: 0},
			pending: map[metadata.TopicPartition][]Located{tpA: {
				loc("o1", tpA, 0, 9, 0, 100), loc("o3", tpA, 20, 29, 0, 100),
			}},
			want: []span{{"o1", 0, 100, 1}},
		},
		{
			name:   "slices below the log end are skipped, one straddling it is taken",
			logEnd: map[metadata.TopicPartition]int64{tpA: 15},
			pending: map[metadata.TopicPartition][]Located{tpA: {
				loc("o1", tpA, 0, 9, 0, 100), loc("o2", tpA, 10, 19, 0, 100), loc("o3", tpA, 20, 29, 0, 100),
			}},
			want: []span{{"o2", 0, 100, 1}, {"o3", 0, 100, 1}},
		},
		{
			name:   "duplicate entries are read once",
			logEnd: map[metadata.TopicPartition]int64{tpA: 0},
			pending: map[metadata.TopicPartition][]Located{tpA: {
				loc("o1", tpA, 0, 9, 0, 100), loc("o1", tpA, 0, 9, 0, 100),
			}},
			want: []span{{"o1", 0, 100, 1}},
		},
		{
			name:   "reads are capped in number, earliest needs first",
			logEnd: map[metadata.TopicPartition]int64{tpA: 0},
			pending: map[metadata.TopicPartition][]Located{tpA: {
				loc("o2", tpA, 10, 19, 0, 100), loc("o1", tpA, 0, 9, 0, 100), loc("o3", tpA, 20, 29, 0, 100),
			}},
			cfg:  PlanConfig{MaxReads: 2},
			want: []span{{"o1", 0, 100, 1}, {"o2", 0, 100, 1}},
		},
		{
			name:    "unknown partitions are ignored",
			logEnd:  map[metadata.TopicPartition]int64{},
			pending: map[metadata.TopicPartition][]Located{tpA: {loc("o1", tpA, 0, 9, 0, 100)}},
			want:    []span{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spans(Plan(tt.logEnd, tt.pending, tt.cfg))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Plan:\n got  %+v\n want %+v", got, tt.want)
			}
		})
	}
}

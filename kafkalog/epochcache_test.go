package kafkalog

import (
	"slices"
	"testing"
)

func TestEndOffsetFor(t *testing.T) {
	c := epochCache{entries: []EpochEntry{{2, 10}, {4, 20}, {7, 35}}}
	const leo = 50
	tests := []struct {
		req       int32
		wantEpoch int32
		wantOff   int64
	}{
		{-1, -1, -1},
		{0, 0, 10}, // below the first epoch: (requested, first start)
		{2, 2, 20},
		{3, 2, 20}, // between: floor epoch, next start
		{4, 4, 35},
		{6, 4, 35},
		{7, 7, leo}, // latest
		{8, -1, -1}, // above latest
	}
	for _, tt := range tests {
		e, o := c.endOffsetFor(tt.req, leo)
		if e != tt.wantEpoch || o != tt.wantOff {
			t.Errorf("endOffsetFor(%d) = (%d, %d), want (%d, %d)", tt.req, e, o, tt.wantEpoch, tt.wantOff)
		}
	}
	var empty epochCache
	if e, o := empty.endOffsetFor(0, leo); e != -1 || o != -1 {
		t.Errorf("empty cache: (%d, %d)", e, o)
	}
}

func TestEpochCacheTruncate(t *testing.T) {
	base := []EpochEntry{{2, 10}, {4, 20}, {7, 35}}
	tests := []struct {
		name string
		op   func(c *epochCache) bool
		want []EpochEntry
		chg  bool
	}{
		{"end inside last", func(c *epochCache) bool { return c.truncateFromEnd(36) }, base, false},
		{"end at last start", func(c *epochCache) bool { return c.truncateFromEnd(35) }, base[:2], true},
		{"end before all", func(c *epochCache) bool { return c.truncateFromEnd(5) }, nil, true},
		{"start before all", func(c *epochCache) bool { return c.truncateFromStart(5) }, base, false},
		{"start at first", func(c *epochCache) bool { return c.truncateFromStart(10) }, base, false},
		{"start inside second", func(c *epochCache) bool { return c.truncateFromStart(25) }, []EpochEntry{{4, 25}, {7, 35}}, true},
		{"start at third", func(c *epochCache) bool { return c.truncateFromStart(35) }, []EpochEntry{{7, 35}}, true},
		{"assign same epoch", func(c *epochCache) bool { return c.assign(7, 40) }, base, false},
		{"assign new epoch", func(c *epochCache) bool { return c.assign(9, 40) }, append(slices.Clone(base), EpochEntry{9, 40}), true},
		{"assign drops later starts", func(c *epochCache) bool { return c.assign(9, 30) }, []EpochEntry{{2, 10}, {4, 20}, {9, 30}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := epochCache{entries: slices.Clone(base)}
			if chg := tt.op(&c); chg != tt.chg {
				t.Errorf("changed = %v, want %v", chg, tt.chg)
			}
			if !slices.Equal(c.entries, tt.want) {
				t.Errorf("entries %v, want %v", c.entries, tt.want)
			}
		})
	}
}

func TestRetentionVictims(t *testing.T) {
	segs := []retentionInput{{next: 10, size: 100, largestMs: 1000}, {next: 20, size: 100, largestMs: 2000}, {next: 30, size: 100, largestMs: 3000}, {next: 35, size: 50, largestMs: 4000}}
	tests := []struct {
		name            string
		hw, now, ms, by int64
		want            int
	}{
		{"nothing expired", 35, 3500, 5000, -1, 0},
		{"time expires two", 35, 3500, 1000, -1, 2},
		{"time never takes active", 35, 100000, 1, -1, 3},
		{"hw limits", 15, 100000, 1, -1, 1},
		{"bytes keeps log at or above limit", 35, 0, -1, 200, 1},
		{"bytes exact fit deletes", 35, 0, -1, 250, 1},
		{"bytes two", 35, 0, -1, 150, 2},
		{"bytes and time take max", 35, 2500, 1000, 150, 2},
		{"time and bytes take max", 35, 3500, 1000, 300, 2},
		{"bound below the first segment's end keeps all", 9, 100000, 1, 0, 0},
		{"bound at a segment end allows it", 20, 100000, 1, 0, 2},
		{"bound inside a segment stops before it", 29, 100000, 1, 0, 2},
		{"unlimited time and bytes", 35, 100000, -1, -1, 0},
		{"one byte keeps only the active segment", 35, 0, -1, 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retentionVictims(segs, tt.hw, tt.now, tt.ms, tt.by); got != tt.want {
				t.Fatalf("got %d want %d", got, tt.want)
			}
		})
	}
}

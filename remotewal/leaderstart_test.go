package remotewal

import (
	"fmt"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/metadata"
)

func entry(epoch int32, base, last int64) metadata.IndexedSlice {
	return metadata.IndexedSlice{State: metadata.CopySegmentFinished,
		SliceEntry: metadata.SliceEntry{TopicPartition: tp0, LeaderEpoch: epoch, BaseOffset: base, LastOffset: last}}
}

func TestUploadStart(t *testing.T) {
	// The leader's log: epoch 1 on [0, 30), epoch 3 on [30, 40); it leads
	// at epoch 4 with log end 40.
	endOf := func(e int32) (int32, int64) {
		switch {
		case e < 1:
			return e, 0
		case e < 3:
			return 1, 30
		case e == 3:
			return 3, 40
		}
		return -1, -1
	}
	dead2 := func(e int32) (int64, bool) { // a dead range of epoch 3 at 30
		if e < 3 {
			return 30, true
		}
		return 0, false
	}
	ls := func(mod func(*LeaderStart)) LeaderStart {
		l := LeaderStart{Epoch: 4, LogStart: 0, LogEnd: 40, EndOfEpoch: endOf}
		if mod != nil {
			mod(&l)
		}
		return l
	}
	for _, c := range []struct {
		name      string
		published []metadata.IndexedSlice
		ls        LeaderStart
		want      int64
		why       string
	}{
		{"everything published", []metadata.IndexedSlice{entry(1, 0, 29), entry(3, 30, 39)}, ls(nil), 40, StartAtLogEnd},
		{"the old leader's tail never uploaded", []metadata.IndexedSlice{entry(1, 0, 9), entry(1, 10, 19)}, ls(nil), 20, StartAtGap},
		{"epoch 3 uploaded only part", []metadata.IndexedSlice{entry(1, 0, 29), entry(3, 30, 34)}, ls(nil), 35, StartAtGap},
		{"an older epoch's entry past where the log ends it diverges", []metadata.IndexedSlice{entry(1, 0, 9), entry(2, 10, 35)}, ls(nil), 10, StartAtGap},
		{"an epoch the log does not hold diverges", []metadata.IndexedSlice{entry(1, 0, 9), entry(2, 10, 19)}, ls(nil), 10, StartAtGap},
		{"dead entries do not count", []metadata.IndexedSlice{entry(1, 0, 9), entry(1, 30, 39)}, ls(func(l *LeaderStart) { l.DeadFrom = dead2 }), 10, StartAtGap},
		{"an entry straddling its epoch's end in the log is fenced whole", []metadata.IndexedSlice{entry(1, 0, 9), entry(1, 10, 35)}, ls(func(l *LeaderStart) { l.DeadFrom = dead2 }), 10, StartAtGap},
		{"the live part of a straddling entry counts", []metadata.IndexedSlice{entry(1, 0, 9), entry(1, 10, 35)}, ls(func(l *LeaderStart) {
			l.DeadFrom = dead2
			l.EndOfEpoch = func(int32) (int32, int64) { return 1, 40 }
		}), 30, StartAtGap},
		{"an earlier life of this epoch counts", []metadata.IndexedSlice{entry(1, 0, 9), entry(4, 10, 24)}, ls(nil), 25, StartAtGap},
		{"not a published object", []metadata.IndexedSlice{entry(1, 0, 9), {State: metadata.CopySegmentStarted, SliceEntry: entry(1, 10, 29).SliceEntry}}, ls(nil), 10, StartAtGap},
		{"not below the log start", []metadata.IndexedSlice{entry(1, 0, 9)}, ls(func(l *LeaderStart) { l.LogStart = 15 }), 15, StartAtLogStart},
		{"an empty store: the log start", nil, ls(func(l *LeaderStart) { l.LogStart = 5 }), 5, StartEmptyStore},
		{"an empty store: the vouched offset", nil, ls(func(l *LeaderStart) { l.Vouched, l.HasVouch = 33, true }), 33, StartAtVouched},
		{"a vouch past the log end", nil, ls(func(l *LeaderStart) { l.Vouched, l.HasVouch = 50, true }), 40, StartAtVouched},
		{"a new partition", nil, ls(func(l *LeaderStart) { l.LogEnd = 0 }), 0, StartEmptyStore},
	} {
		got, why := UploadStart(c.published, c.ls)
		if got != c.want || why != c.why {
			t.Errorf("%s: %d (%s), want %d (%s)", c.name, got, why, c.want, c.why)
		}
	}
}

// TestSameEpochRestartStartsPastItsSlices: a task started again in the
// epoch of the partition's last one (a lease renewed) never cuts below
// what that one submitted, whatever offset it is asked to start at; a new
// epoch starts where asked.
func TestSameEpochRestartStartsPastItsSlices(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	l := openLog(t, clk, 1<<30)
	sink := newCaptureSink()
	m, err := NewManager(Config{UploadBytes: 1, MaxSliceBytes: 1, Interval: time.Millisecond, Clock: clk}, sink)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	appendN(t, l, 3, 4, 1, 10)
	if err := m.StartPartition(tp0, l, 3, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "four slices", func() bool { return len(sink.snapshot()) == 4 })
	m.StopPartition(tp0)
	if err := m.StartPartition(tp0, l, 3, 1); err != nil { // lagging: asks for 1
		t.Fatal(err)
	}
	if off, _ := m.SubmittedOffset(tp0); off != 4 {
		t.Fatalf("restarted in the same epoch at %d, want 4", off)
	}
	appendN(t, l, 3, 1, 1, 10)
	waitFor(t, "the fifth slice", func() bool { return len(sink.snapshot()) == 5 })
	m.StopPartition(tp0)
	if err := m.StartPartition(tp0, l, 4, 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new epoch's slices", func() bool { return len(sink.snapshot()) == 8 })
	var got []string
	for _, s := range sink.snapshot() {
		got = append(got, fmt.Sprintf("%d@%d", s.BaseOffset, s.LeaderEpoch))
	}
	if w := "[0@3 1@3 2@3 3@3 4@3 2@4 3@4 4@4]"; fmt.Sprint(got) != w {
		t.Fatalf("submitted %v, want %s", got, w)
	}
}

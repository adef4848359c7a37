package follower

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/kafkalog/kafkalogtest"
)

func TestJudge(t *testing.T) {
	fence := map[int32]epochEnd{3: {Epoch: 3, EndOffset: 100}, 4: {Epoch: 2, EndOffset: 150}}
	tests := []struct {
		name          string
		epoch         int32
		last          int64
		leader, local int32
		want          verdict
	}{
		{"current epoch", 5, 1000, 5, 5, usable},
		{"newer than the leader waits", 6, 10, 5, 5, wait},
		{"older than the local log is fenced", 3, 10, 5, 4, fenced},
		{"old epoch inside its end", 3, 99, 5, 3, usable},
		{"old epoch at its end is fenced", 3, 100, 5, 3, fenced},
		{"epoch the leader never had is fenced", 4, 120, 5, 3, fenced},
		{"unknown old epoch asks", 2, 10, 5, 2, ask},
		{"no local epoch yet", 5, 10, 5, kafkalog.UndefinedEpoch, usable},
	}
	for _, tt := range tests {
		if got := judge(tt.epoch, tt.last, tt.leader, tt.local, fence); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// testView is a partition's state as the tests write it: slices in any
// order, the busy ones named.
type testView struct {
	LEO           int64
	Leader        LeaderInfo
	LocalEpoch    int32
	Slices        []Located
	Fence         map[int32]epochEnd
	Busy          map[sliceID]int64
	Failures      int
	RetryAt       time.Time
	StuckSince    time.Time
	FallbackUntil int64
	WantedSince   time.Time
	Degraded      bool
}

// testDecision is partDecision with the slots to read as Located.
type testDecision struct {
	Read          []Located
	Ask           []int32
	StuckSince    time.Time
	Fallback      bool
	FallbackUntil int64
	GapCause      Cause
	WakeAt        time.Time
	Target        int64
	Fenced        int
	WantedSince   time.Time
}

// slotsOf builds sorted slots as the driver keeps them.
func slotsOf(ls []Located, busy map[sliceID]int64) []*slot {
	var out []*slot
	for _, l := range ls {
		s := newSlot(l)
		s.listed = true
		if _, ok := busy[sliceID{l.Key, l.Entry.Position}]; ok {
			s.state = reading
		}
		out = append(out, s)
	}
	slices.SortFunc(out, slotCmp)
	return out
}

// runDecide runs decide on the view the driver would build from tv.
func runDecide(now time.Time, tv testView, cfg *Config) testDecision {
	return runDecideBounded(now, tv, cfg, 0)
}

// runDecideBounded is runDecide with decide's maxReadObjects.
func runDecideBounded(now time.Time, tv testView, cfg *Config, maxReadObjects int) testDecision {
	ss := slotsOf(tv.Slices, tv.Busy)
	d := decide(now, partView{
		LEO: tv.LEO, Leader: tv.Leader, LocalEpoch: tv.LocalEpoch, Slots: ss,
		Sum: summarize(ss, tv.LEO, tv.Leader.Epoch, tv.LocalEpoch, tv.Fence), Fence: tv.Fence,
		Failures: tv.Failures, RetryAt: tv.RetryAt, StuckSince: tv.StuckSince, FallbackUntil: tv.FallbackUntil,
		WantedSince: tv.WantedSince, Degraded: tv.Degraded,
	}, cfg, maxReadObjects)
	var read []Located
	for _, s := range d.Read {
		read = append(read, s.Located)
	}
	return testDecision{
		Read: read, Ask: d.Ask, StuckSince: d.StuckSince, Fallback: d.Fallback, FallbackUntil: d.FallbackUntil,
		GapCause: d.GapCause, WakeAt: d.WakeAt, Target: d.Target, Fenced: d.Fenced, WantedSince: d.WantedSince,
	}
}

func TestDecide(t *testing.T) {
	cfg := &Config{GapTimeout: time.Second, MaxReadAttempts: 3, ReadAheadBytes: 250}
	now := t0
	l := func(key string, base, last int64, epoch int32) Located {
		x := loc(key, tpA, base, last, base*10, (last-base+1)*10)
		x.Entry.LeaderEpoch = epoch
		return x
	}
	leader := LeaderInfo{Epoch: 2, LogEnd: 40}
	tests := []struct {
		name string
		v    testView
		want testDecision
	}{
		{
			name: "reads the chain within the read-ahead",
			v:    testView{LEO: 0, Leader: leader, Slices: []Located{l("o", 10, 19, 2), l("o", 0, 9, 2), l("o", 20, 29, 2)}},
			want: testDecision{Read: []Located{l("o", 0, 9, 2), l("o", 10, 19, 2), l("o", 20, 29, 2)}, FallbackUntil: 0, Target: 40},
		},
		{
			name: "busy slices are not read again and count against the read-ahead",
			v: testView{LEO: 0, Leader: leader, Slices: []Located{l("o", 0, 9, 2), l("o", 10, 19, 2), l("o", 20, 29, 2)},
				Busy: map[sliceID]int64{{"o", 0}: 100, {"o", 100}: 100}},
			want: testDecision{Read: []Located{l("o", 20, 29, 2)}, Target: 40},
		},
		{
			name: "read-ahead exhausted",
			v: testView{LEO: 0, Leader: leader, Slices: []Located{l("o", 0, 9, 2), l("o", 10, 19, 2), l("o", 20, 29, 2), l("o", 30, 39, 2)},
				Busy: map[sliceID]int64{{"o", 0}: 100, {"o", 100}: 100, {"o", 200}: 100}},
			want: testDecision{Target: 40},
		},
		{
			name: "the slice at the log end is read even when slices above fill the read-ahead",
			v: testView{LEO: 0, Leader: leader, Slices: []Located{l("o", 0, 9, 2), l("o", 10, 19, 2), l("o", 20, 29, 2), l("o", 30, 39, 2)},
				Busy: map[sliceID]int64{{"o", 100}: 100, {"o", 200}: 100, {"o", 300}: 100}},
			want: testDecision{Read: []Located{l("o", 0, 9, 2)}, Target: 40},
		},
		{
			name: "an old epoch is asked about before it is read",
			v:    testView{LEO: 0, Leader: leader, Slices: []Located{l("o", 0, 9, 1)}},
			want: testDecision{Ask: []int32{1}, Target: 40},
		},
		{
			name: "a gap starts the clock",
			v:    testView{LEO: 0, Leader: leader, Slices: []Located{l("o", 10, 19, 2)}},
			want: testDecision{StuckSince: now, WakeAt: now.Add(time.Second), Target: 40},
		},
		{
			name: "a gap past the timeout falls back up to the next slice",
			v:    testView{LEO: 0, Leader: leader, Slices: []Located{l("o", 10, 19, 2)}, StuckSince: now.Add(-time.Second)},
			want: testDecision{StuckSince: now.Add(-time.Second), Fallback: true, FallbackUntil: 10, GapCause: CauseMetadataGap, Target: 40},
		},
		{
			name: "nothing indexed past the timeout is metadata lag",
			v:    testView{LEO: 0, Leader: leader, StuckSince: now.Add(-2 * time.Second)},
			want: testDecision{StuckSince: now.Add(-2 * time.Second), Fallback: true, FallbackUntil: 40, GapCause: CauseMetadataLag, Target: 40},
		},
		{
			name: "a fenced slice at the log end",
			v: testView{LEO: 0, Leader: leader, Slices: []Located{l("o", 0, 9, 1)}, Fence: map[int32]epochEnd{1: {Epoch: 1, EndOffset: 5}},
				StuckSince: now.Add(-time.Second)},
			want: testDecision{StuckSince: now.Add(-time.Second), Fallback: true, FallbackUntil: 40, GapCause: CauseFenced, Target: 40, Fenced: 1},
		},
		{
			name: "repeated failures fall back past the failing slice",
			v:    testView{LEO: 0, Leader: leader, Slices: []Located{l("o", 0, 9, 2), l("o", 10, 19, 2)}, Failures: 3},
			want: testDecision{Fallback: true, FallbackUntil: 10, Target: 40, Read: []Located{l("o", 10, 19, 2)}},
		},
		{
			name: "backing off after a failure",
			v:    testView{LEO: 0, Leader: leader, Slices: []Located{l("o", 0, 9, 2)}, Failures: 1, RetryAt: now.Add(time.Millisecond)},
			want: testDecision{WakeAt: now.Add(time.Millisecond), Target: 40},
		},
		{
			name: "caught up",
			v:    testView{LEO: 40, Leader: leader, Slices: []Located{l("o", 30, 39, 2)}},
			want: testDecision{Target: 40},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runDecide(now, tt.v, cfg)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("decide:\n got  %+v\n want %+v", got, tt.want)
			}
		})
	}
}

func TestTrimTo(t *testing.T) {
	b0 := kafkalogtest.MakeBatch(0, 1, [][]byte{[]byte("a"), []byte("b")}, 1000) // 0..1
	b1 := kafkalogtest.MakeBatch(2, 1, [][]byte{[]byte("c")}, 2000)              // 2
	b2 := kafkalogtest.MakeBatch(3, 1, [][]byte{[]byte("d"), []byte("e")}, 3000) // 3..4
	all := bytes.Join([][]byte{b0, b1, b2}, nil)
	tests := []struct {
		name    string
		raw     []byte
		from    int64
		torn    bool
		want    []byte
		wantErr error
	}{
		{"from the start", all, 0, false, all, nil},
		{"drops batches below", all, 2, false, all[len(b0):], nil},
		{"all below", all, 5, false, nil, nil},
		{"straddling batch", all, 1, false, nil, ErrMisaligned},
		{"starts above", all[len(b0):], 0, false, nil, ErrMisaligned},
		{"torn tail refused", all[:len(all)-3], 0, false, nil, kafkalog.ErrCorruptBatch},
		{"torn tail dropped", all[:len(all)-3], 0, true, all[:len(b0)+len(b1)], nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := trimTo(tt.raw, tt.from, tt.torn)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("got %d bytes, want %d", len(got), len(tt.want))
			}
		})
	}
	if got := cutBefore(all, 3); !bytes.Equal(got, all[:len(b0)+len(b1)]) {
		t.Fatalf("cutBefore(3): %d bytes", len(got))
	}
	if got := cutBefore(all, 0); !bytes.Equal(got, b0) {
		t.Fatalf("cutBefore keeps at least one batch: %d bytes", len(got))
	}
}

func TestTruncationOffset(t *testing.T) {
	local := []kafkalog.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 50}, {Epoch: 4, StartOffset: 80}}
	const leo = 100
	tests := []struct {
		name   string
		leader map[int32]epochEnd // answers by requested epoch
		want   int64
	}{
		{"same history", map[int32]epochEnd{4: {Epoch: 4, EndOffset: 120}}, leo},
		{"leader ended our latest epoch early", map[int32]epochEnd{4: {Epoch: 4, EndOffset: 90}}, 90},
		{"leader never had our latest epoch", map[int32]epochEnd{4: {Epoch: -1, EndOffset: -1}, 3: {Epoch: 3, EndOffset: 60}}, 60},
		{"leader answers an older epoch: bounded by our end of it", map[int32]epochEnd{4: {Epoch: 2, EndOffset: 70}, 1: {Epoch: 1, EndOffset: 60}}, 50},
		{"leader knows none of our epochs", map[int32]epochEnd{4: {Epoch: -1, EndOffset: -1}, 3: {Epoch: -1, EndOffset: -1}, 1: {Epoch: -1, EndOffset: -1}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := truncationOffset(local, leo, func(e int32) (int32, int64, error) {
				a, ok := tt.leader[e]
				if !ok {
					t.Fatalf("asked about epoch %d", e)
				}
				return a.Epoch, a.EndOffset, nil
			})
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
	if got, err := truncationOffset(nil, 7, nil); got != 7 || err != nil {
		t.Fatalf("empty cache: %d, %v", got, err)
	}
	boom := errors.New("boom")
	if _, err := truncationOffset(local, leo, func(int32) (int32, int64, error) { return 0, 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("error not returned: %v", err)
	}
}

func TestBucket(t *testing.T) {
	b := newBucket(1000, 500, t0)
	if ok, _ := b.take(t0, 400); !ok {
		t.Fatal("burst refused")
	}
	if ok, _ := b.take(t0, 400); !ok {
		t.Fatal("a read larger than what is left goes into debt")
	}
	ok, wait := b.take(t0, 1)
	if ok || wait < 300*time.Millisecond || wait > 302*time.Millisecond {
		t.Fatalf("in debt: ok %v wait %v, want ~300ms", ok, wait)
	}
	if ok, _ := b.take(t0.Add(wait), 1); !ok {
		t.Fatal("refused after the wait")
	}
	// A long idle refills only up to the burst.
	later := t0.Add(time.Hour)
	if ok, _ := b.take(later, 600); !ok {
		t.Fatal("refused after an hour")
	}
	if ok, _ := b.take(later, 1); ok {
		t.Fatal("the burst was exceeded")
	}
	free := newBucket(0, 0, t0)
	if ok, _ := free.take(t0, 1<<40); !ok {
		t.Fatal("no limit refused")
	}
}

package metadata

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore"
)

func TestDecideRetention(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000 + int64(time.Hour/time.Millisecond))
	pol := RetentionPolicy{Retention: 30 * time.Minute, BrokerID: 1}
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	safeAt := func(off int64) SafeOffsetFunc {
		return func(tp TopicPartition) (int64, bool) { return off, tp.Topic == "orders" }
	}
	obj := func(id byte, st SegmentState, ageMin int, broker int32, entries ...SliceEntry) ObjectSnapshot {
		o := testObject(id, 0, st, entries...)
		o.EventTimestampMs = now.Add(-time.Duration(ageMin) * time.Minute).UnixMilli()
		o.BrokerID = broker
		return ObjectSnapshot{ID: o.ID, Key: o.Key, BrokerID: broker, Parts: []ObjectMetadata{*o}}
	}
	e := testEntry("orders", 0, 0, 9)
	cases := []struct {
		name   string
		o      ObjectSnapshot
		safe   SafeOffsetFunc
		want   bool
		resume bool
	}{
		{"old_and_replicated", obj(1, CopySegmentFinished, 31, 1, e), safeAt(10), true, false},
		{"too_young", obj(1, CopySegmentFinished, 29, 1, e), safeAt(10), false, false},
		{"isr_not_past_last_offset", obj(1, CopySegmentFinished, 31, 1, e), safeAt(9), false, false},
		{"unknown_partition", obj(1, CopySegmentFinished, 31, 1, testEntry("other", 0, 0, 9)), safeAt(math.MaxInt64), false, false},
		{"other_broker", obj(1, CopySegmentFinished, 31, 2, e), safeAt(10), false, false},
		{"abandoned_copy", obj(1, CopySegmentStarted, 31, 1, e), safeAt(0), true, false},
		{"young_copy", obj(1, CopySegmentStarted, 5, 1, e), safeAt(0), false, false},
		{"resume_delete_started", obj(1, DeleteSegmentStarted, 0, 1, e), safeAt(0), true, true},
		{"resume_delete_finished", obj(1, DeleteSegmentFinished, 0, 1, e), safeAt(0), true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := DecideRetention(now, pol, []ObjectSnapshot{c.o}, c.safe, nil)
			if (len(got) == 1) != c.want {
				t.Fatalf("got %d actions, want delete=%v", len(got), c.want)
			}
			if c.want && got[0].Resume != c.resume {
				t.Fatalf("resume %v", got[0].Resume)
			}
		})
	}
}

// memStore is the least objstore.Store the retention driver needs.
type memStore struct {
	mu struct {
		sync.Mutex
		objs    map[string][]byte
		deletes int
		fail    error
	}
}

var _ objstore.Store = (*memStore)(nil)

func newMemStore() *memStore { s := &memStore{}; s.mu.objs = map[string][]byte{}; return s }

func (s *memStore) Put(_ context.Context, key string, body []byte, _ objstore.PutOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.objs[key] = append([]byte(nil), body...)
	return nil
}
func (s *memStore) GetRange(context.Context, string, int64, int64) ([]byte, error) {
	return nil, objstore.ErrNotFound
}
func (s *memStore) Head(context.Context, string) (objstore.ObjectInfo, error) {
	return objstore.ObjectInfo{}, objstore.ErrNotFound
}
func (s *memStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.fail != nil {
		return s.mu.fail
	}
	s.mu.deletes++
	delete(s.mu.objs, key)
	return nil
}
func (s *memStore) List(context.Context, objstore.ListOptions) (objstore.Page, error) {
	return objstore.Page{}, nil
}

// statePublisher publishes straight into a State, recording the events.
type statePublisher struct {
	st  *State
	mu  sync.Mutex
	evs []Event
}

func (p *statePublisher) Publish(_ context.Context, evs ...Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range evs {
		if err := p.st.Apply(ev); err != nil {
			return err
		}
		p.evs = append(p.evs, ev)
	}
	return nil
}

func TestRetainerDeletesInOrder(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	st := NewState()
	pub := &statePublisher{st: st}
	store := newMemStore()
	o := bigObject(1, 30)
	o.EventTimestampMs = clk.Now().UnixMilli()
	store.Put(context.Background(), o.Key, []byte("x"), objstore.PutOptions{})
	parts := Split(o, 8)
	for _, p := range parts {
		mustApply(t, st, p)
	}
	safe := int64(0)
	r, err := NewRetainer(RetentionPolicy{Retention: time.Minute, BrokerID: -1}, st, pub, OneStore(store),
		func(TopicPartition) (int64, bool) { return safe, true }, clk, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clk.Advance(2 * time.Minute)
	if n, err := r.RunOnce(ctx); n != 0 || err != nil {
		t.Fatalf("deleted %d (%v) while followers are behind", n, err)
	}
	safe = 1000
	// The store fails: the deletion stops after DELETE_SEGMENT_STARTED and
	// the next run resumes it.
	store.mu.fail = errors.New("503 SlowDown")
	if _, err := r.RunOnce(ctx); err == nil {
		t.Fatal("store failure not reported")
	}
	if s, _ := st.ObjectState(o.Key); s != DeleteSegmentStarted {
		t.Fatalf("state after failed delete %v", s)
	}
	store.mu.fail = nil
	if n, err := r.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	if _, ok := st.ObjectState(o.Key); ok || len(store.mu.objs) != 0 {
		t.Fatal("object not deleted and tombstoned")
	}
	// Order per part: DELETE_STARTED, DELETE_FINISHED, tombstone; the
	// object deleted from the store between STARTED and FINISHED.
	order := map[ObjectRef][]EventType{}
	var states []SegmentState
	for _, ev := range pub.evs {
		switch e := ev.(type) {
		case *ObjectMetadata:
			order[e.Ref()] = append(order[e.Ref()], e.Type())
			states = append(states, e.State)
		case *Tombstone:
			order[e.ObjectRef] = append(order[e.ObjectRef], e.Type())
		}
	}
	if len(order) != len(parts) || len(states) != 2*len(parts) {
		t.Fatalf("events %v", order)
	}
	for i, s := range states {
		want := DeleteSegmentStarted
		if i >= len(parts) {
			want = DeleteSegmentFinished
		}
		if s != want {
			t.Fatalf("event %d state %v, want %v", i, s, want)
		}
	}
	if n, err := r.RunOnce(ctx); n != 0 || err != nil {
		t.Fatalf("second run = %d, %v", n, err)
	}
}

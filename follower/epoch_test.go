package follower

import (
	"math/rand/v2"
	"testing"

	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
)

// divergedLeaders builds a deposed leader A (epoch 1) and a new leader B
// (epoch 2) that had replicated only A's first offsets, [0, cut), before it
// was elected and appended its own. A's log past cut never happened.
func divergedLeaders(t *testing.T, r *rig, rng *rand.Rand) (a, b *kafkalog.Log, cut int64) {
	a = openLog(t, kafkalog.NewMemFS(), "/a", r.clk)
	fillLeader(t, a, rng, 120, 1)
	b = openLog(t, kafkalog.NewMemFS(), "/b", r.clk)
	for _, s := range cutSlices(t, tp0, a, 0, a.LogEndOffset(), rng, 2<<10) {
		if b.LogEndOffset() >= a.LogEndOffset()*6/10 {
			break
		}
		if _, err := b.AppendAsFollower(s.Data); err != nil {
			t.Fatal(err)
		}
	}
	cut = b.LogEndOffset()
	fillLeader(t, b, rng, 100, 2)
	return a, b, cut
}

// TestEpochFencingNewLeaderKnown: the deposed leader's slices past the new
// leader's log end are in the index, mixed with the new leader's; the
// follower, knowing the new epoch, never appends them.
func TestEpochFencingNewLeaderKnown(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(51, 52))
	a, b, cut := divergedLeaders(t, r, rng)
	r.leaders[tp0] = b
	r.leader.set(tp0, b, 2)
	objs := packObjects(t, r.put, "a/", cutSlices(t, tp0, a, 0, a.LogEndOffset(), rng, 4<<10), rng, 3, metadata.CodecNone)
	objs = append(objs, packObjects(t, r.put, "b/", cutSlices(t, tp0, b, cut, b.LogEndOffset(), rng, 4<<10), rng, 3, metadata.CodecNone)...)
	rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	r.start()
	for _, o := range objs {
		r.ix.publish(o.key, o.entries...)
	}
	r.waitCaughtUp(true)
	r.checkAll() // every append was checked against B's bytes
	if m := r.f.Metrics(); m.Truncations != 0 {
		t.Fatalf("truncated with nothing to truncate: %+v", m)
	}
}

// TestEpochFencingTruncates: the follower rebuilt the deposed leader's log
// (epoch 1) past the new leader's end. On the new epoch it truncates to
// the new leader's end for epoch 1, never appends the late slices the
// deposed leader uploads after losing leadership, and converges on B.
func TestEpochFencingTruncates(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(61, 62))
	a, b, cut := divergedLeaders(t, r, rng)
	r.leaders[tp0] = a
	r.leader.set(tp0, a, 1)
	for _, o := range packObjects(t, r.put, "a/", cutSlices(t, tp0, a, 0, a.LogEndOffset(), rng, 4<<10), rng, 3, metadata.CodecNone) {
		r.ix.publish(o.key, o.entries...)
	}
	r.start()
	r.waitCaughtUp(false)
	checkEqual(t, a, r.logs[tp0])
	aEnd := a.LogEndOffset()

	// B is elected; the follower learns it; A, not knowing yet, appends and
	// uploads more under epoch 1, and B uploads its own.
	r.leaders[tp0] = b
	r.leader.set(tp0, b, 2)
	r.f.Notify()
	fillLeader(t, a, rng, 30, 1)
	late := packObjects(t, r.put, "a2/", cutSlices(t, tp0, a, aEnd, a.LogEndOffset(), rng, 4<<10), rng, 2, metadata.CodecNone)
	fresh := packObjects(t, r.put, "b/", cutSlices(t, tp0, b, cut, b.LogEndOffset(), rng, 4<<10), rng, 2, metadata.CodecNone)
	for _, o := range append(late, fresh...) {
		r.ix.publish(o.key, o.entries...)
	}
	r.waitCaughtUp(true)
	r.checkAll()
	m := r.f.Metrics()
	if m.Truncations != 1 {
		t.Fatalf("want one truncation: %+v", m)
	}
	if fe, end := r.logs[tp0].EndOffsetForEpoch(1); fe != 1 || end != cut {
		t.Fatalf("epoch 1 ends at %d (epoch %d) on the follower, want %d", end, fe, cut)
	}
}

// TestEpochRestartTruncates: a follower that appended from a deposed
// leader and restarted checks its log against the new leader before
// appending anything.
func TestEpochRestartTruncates(t *testing.T) {
	r := newRig(t)
	defer r.stop()
	rng := rand.New(rand.NewPCG(71, 72))
	a, b, cut := divergedLeaders(t, r, rng)
	r.leaders[tp0] = a
	r.leader.set(tp0, a, 1)
	for _, o := range packObjects(t, r.put, "a/", cutSlices(t, tp0, a, 0, a.LogEndOffset(), rng, 4<<10), rng, 3, metadata.CodecNone) {
		r.ix.publish(o.key, o.entries...)
	}
	r.start()
	r.waitCaughtUp(false)
	r.f.Close()
	r.leaders[tp0] = b
	r.leader.set(tp0, b, 2)
	for _, o := range packObjects(t, r.put, "b/", cutSlices(t, tp0, b, cut, b.LogEndOffset(), rng, 4<<10), rng, 3, metadata.CodecNone) {
		r.ix.publish(o.key, o.entries...)
	}
	r.restart(rng, false)
	r.waitCaughtUp(true)
	r.checkAll()
}

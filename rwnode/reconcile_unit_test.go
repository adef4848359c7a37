package rwnode

import (
	"testing"

	"github.com/kwal/kwal/metadata"
)

// The deleter rule: the broker that vouched last for an object's least
// partition deletes it; with no vouch for any of its partitions, its
// uploader does.
func TestDeleterRule(t *testing.T) {
	st := metadata.NewState()
	vouch := func(topic string, p, epoch int32, broker int32) {
		if err := st.Apply(&metadata.ReplicatedOffset{TopicPartition: metadata.TopicPartition{Topic: topic, Partition: p},
			LeaderEpoch: epoch, Offset: 10, BrokerID: broker}); err != nil {
			t.Fatal(err)
		}
	}
	obj := func(uploader int32, tps ...metadata.TopicPartition) *metadata.ObjectSnapshot {
		var entries []metadata.SliceEntry
		for _, tp := range tps {
			entries = append(entries, metadata.SliceEntry{TopicPartition: tp})
		}
		return &metadata.ObjectSnapshot{BrokerID: uploader, Parts: []metadata.ObjectMetadata{{Entries: entries}}}
	}
	a0 := metadata.TopicPartition{Topic: "a", Partition: 0}
	a1 := metadata.TopicPartition{Topic: "a", Partition: 1}
	b0 := metadata.TopicPartition{Topic: "b", Partition: 0}
	vouch("a", 1, 0, 1)
	vouch("b", 0, 0, 3)
	rep := func(id int32) *RemoteWALReplicator {
		return &RemoteWALReplicator{cfg: RemoteWALReplicatorConfig{BrokerID: id}, state: st}
	}
	cases := []struct {
		name string
		o    *metadata.ObjectSnapshot
		want int32 // the broker that deletes
	}{
		{"least vouched partition's leader", obj(3, b0, a1), 1},
		{"unvouched partitions skipped", obj(3, a0, b0), 3},
		{"no vouch: the uploader", obj(2, a0), 2},
	}
	for _, c := range cases {
		for id := int32(1); id <= 3; id++ {
			if got := rep(id).deletes(c.o); got != (id == c.want) {
				t.Errorf("%s: broker %d deletes = %v, want broker %d to", c.name, id, got, c.want)
			}
		}
	}
	// Leadership of a-1 moves to broker 2 at epoch 1: it deletes from now on.
	vouch("a", 1, 1, 2)
	if !rep(2).deletes(obj(3, b0, a1)) || rep(1).deletes(obj(3, b0, a1)) {
		t.Fatal("the deleter did not follow the new leader's vouch")
	}
}

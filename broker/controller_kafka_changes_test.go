package broker

import (
	"testing"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestKafkaControllerHeartbeatsDoNotWakeWatchers: heartbeats are records
// of the cluster state log like any other (Changed, closed at every
// record, sees them), but they change no state, so the feed the fetchers'
// watcher (watchCluster) waits on, Broker.clusterChanged, which is
// ClusterChanged, stays open through them; a registration and a topic
// created each close it.
func TestKafkaControllerHeartbeatsDoNotWakeWatchers(t *testing.T) {
	c := newKafkaController(t, startKfake(t), nil)
	b := &Broker{ctrl: c}

	changed := b.clusterChanged()
	reg, err := c.RegisterBroker(BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9001, Rack: "az1"})
	if err != nil {
		t.Fatal(err)
	}
	if !closed(changed) {
		t.Fatal("a registration applied without waking the watcher")
	}

	changed, advanced := b.clusterChanged(), c.Changed()
	const beats = 20
	for range beats {
		// Heartbeat returns once its record is applied.
		if _, err := c.Heartbeat(1, reg.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	if !closed(advanced) {
		t.Fatal("heartbeats answered with no record applied")
	}
	if closed(changed) {
		t.Fatalf("%d heartbeats woke the watcher", beats)
	}
	if _, err := c.CreateTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if !closed(changed) {
		t.Fatal("a topic created without waking the watcher")
	}
}

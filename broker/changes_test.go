package broker

import "testing"

// A waiter that took the channel before a Signal is woken by it; one that
// takes it after waits for the next.
func TestChangeFeed(t *testing.T) {
	var f changeFeed
	f.Signal() // nobody waits: nothing to wake, nothing kept
	a := f.Changed()
	if b := f.Changed(); b != a {
		t.Fatal("two channels between signals")
	}
	select {
	case <-a:
		t.Fatal("closed before a signal")
	default:
	}
	f.Signal()
	select {
	case <-a:
	default:
		t.Fatal("not closed by the signal")
	}
	c := f.Changed()
	select {
	case <-c:
		t.Fatal("a channel taken after the signal is already closed")
	default:
	}
}

// MemController.Changed fires once a record is applied, and the change is
// visible then.
func TestMemControllerChanged(t *testing.T) {
	c := NewMemController(nil, 1)
	ch := c.Changed()
	if _, err := c.RegisterBroker(BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("registration did not signal")
	}
	ch = c.Changed()
	if _, err := c.CreateTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("topic creation did not signal")
	}
	if _, ok := c.Topic("t"); !ok {
		t.Fatal("the topic is not visible after the signal")
	}
}

package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestHWToldIsTheAnswersHW: the high watermark the leader records as told
// to a follower is the one the answer carried. A fetch answer is built
// from one reading of the log; if the HW moves after it (another
// follower's fetch advanced it), recording the newer HW as told would
// leave the follower's next long poll waiting for a change it never got:
// here the answer carried HW 0 while the log is at 1, so the next answer
// must still count 1 as news.
func TestHWToldIsTheAnswersHW(t *testing.T) {
	c := startCluster(t, []string{"az1", "az2"}, nil)
	admin := newClient(t, c)
	const topic = "told"
	createTopic(t, admin, topic, 1, 2, nil)
	tp := TopicPartition{Topic: topic, Partition: 0}
	ts, _ := c.ctrl.Topic(topic)
	leader := c.broker(ts.Partitions[0].Leader)
	var follower *Broker
	for _, b := range c.brokers {
		if b != leader {
			follower = b
		}
	}
	prod := newClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: value(0)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	follower.fetchers.remove(tp) // nothing else tells it anything now
	p := leader.partition(tp)
	id := follower.cfg.BrokerID
	waitFor(t, "the follower's last fetch answered", 10*time.Second, func() bool {
		return p.log.HighWatermark() == 1
	}, leader)
	p.hwChangedFor(id, 1) // whatever it was told so far, it now has 1
	if p.hwChangedFor(id, 1) {
		t.Fatal("HW 1 is news right after it was told")
	}
	// An answer read before the HW moved carries 0, though the log is at 1.
	p.hwChangedFor(id, 0)
	if !p.hwChangedFor(id, 1) {
		t.Fatal("after an answer carrying HW 0, HW 1 is not news: the follower would never be told it")
	}
}

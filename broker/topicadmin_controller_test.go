package broker

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
)

// Both controllers: delete, grow and reconfigure topics, with the
// incarnation and epoch checks; a KafkaController rebuilt from the state
// topic (compacted or not) holds the same topics, ids and epochs.
func TestControllerTopicAdministration(t *testing.T) {
	emb := startKfake(t)
	impls := []struct {
		name string
		open func(t *testing.T) Controller
	}{
		{"mem", func(t *testing.T) Controller { return NewMemController(threeBrokers(), 0) }},
		{"kafka", func(t *testing.T) Controller { return newKafkaController(t, emb, threeBrokers()) }},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			c := impl.open(t)
			var (
				mu   sync.Mutex
				seen []TopicState
			)
			defer c.Subscribe(func(ts TopicState) { mu.Lock(); seen = append(seen, ts); mu.Unlock() })()
			for _, b := range threeBrokers() {
				if _, err := c.RegisterBroker(b); err != nil {
					t.Fatal(err)
				}
			}
			ts, err := c.CreateTopic(TopicSpec{Name: "a", Partitions: 2, ReplicationFactor: 2, Configs: map[string]string{"retention.ms": "1"}})
			if err != nil {
				t.Fatal(err)
			}
			if ts.ID.IsZero() || ts.Epoch != 0 {
				t.Fatalf("created %+v", ts)
			}
			if _, err := c.CreatePartitions("a", 2); !errors.Is(err, ErrInvalidPartitions) {
				t.Fatalf("grow to the same count: %v", err)
			}
			grown, err := c.CreatePartitions("a", 5)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := AssignReplicas("a", 5, 2, threeBrokers())
			if !reflect.DeepEqual(grown.Partitions, want) || grown.Epoch != 1 || grown.ID != ts.ID {
				t.Fatalf("grown %+v, want partitions %+v at epoch 1", grown, want)
			}
			if _, err := c.CreatePartitions("nope", 3); !errors.Is(err, ErrUnknownTopic) {
				t.Fatalf("grow an unknown topic: %v", err)
			}
			refuse := errors.New("refused")
			if _, err := c.AlterTopicConfigs("a", func(map[string]string) (map[string]string, error) { return nil, refuse }); !errors.Is(err, refuse) {
				t.Fatalf("edit refusal: %v", err)
			}
			altered, err := c.AlterTopicConfigs("a", func(cur map[string]string) (map[string]string, error) {
				if cur["retention.ms"] != "1" {
					t.Errorf("edit saw %v", cur)
				}
				cur["segment.bytes"] = "2048"
				return cur, nil
			})
			if err != nil || altered.Epoch != 2 || altered.Configs["segment.bytes"] != "2048" || altered.Configs["retention.ms"] != "1" {
				t.Fatalf("altered %+v %v", altered, err)
			}
			if _, err := c.DeleteTopic("a", newTopicID()); !errors.Is(err, ErrUnknownTopicID) {
				t.Fatalf("delete with a wrong id: %v", err)
			}
			if _, err := c.DeleteTopic("", newTopicID()); !errors.Is(err, ErrUnknownTopicID) {
				t.Fatalf("delete an unknown id: %v", err)
			}
			gone, err := c.DeleteTopic("", ts.ID)
			if err != nil || !gone.Deleted || gone.Name != "a" || len(gone.Partitions) != 5 {
				t.Fatalf("delete by id: %+v %v", gone, err)
			}
			if _, ok := c.Topic("a"); ok || len(c.Topics()) != 0 {
				t.Fatal("deleted topic still listed")
			}
			if _, err := c.DeleteTopic("a", TopicID{}); !errors.Is(err, ErrUnknownTopic) {
				t.Fatalf("second delete: %v", err)
			}
			again, err := c.CreateTopic(TopicSpec{Name: "a", Partitions: 1, ReplicationFactor: 1})
			if err != nil || again.ID == ts.ID || again.Epoch != 0 || len(again.Configs) != 0 {
				t.Fatalf("re-created %+v %v", again, err)
			}
			mu.Lock()
			defer mu.Unlock()
			kinds := []string{}
			for _, s := range seen {
				switch {
				case s.Deleted:
					kinds = append(kinds, "deleted")
				case s.Epoch > 0:
					kinds = append(kinds, "changed")
				default:
					kinds = append(kinds, "created")
				}
			}
			if !reflect.DeepEqual(kinds, []string{"created", "changed", "changed", "deleted", "created"}) {
				t.Fatalf("subscriber saw %v", kinds)
			}
			if kc, ok := c.(*KafkaController); ok {
				wantTopics := kc.Topics()
				kc.Close()
				for _, compact := range []bool{false, true} {
					if compact {
						emb.Compact()
					}
					r := newKafkaController(t, emb, threeBrokers())
					if got := r.Topics(); !reflect.DeepEqual(got, wantTopics) {
						t.Fatalf("compact=%v: rebuilt %+v, want %+v", compact, got, wantTopics)
					}
					r.Close()
				}
			}
		})
	}
}

// The pure rule: a change asked against another incarnation or an older
// topic epoch is refused and changes nothing.
func TestApplyTopicChangeFencing(t *testing.T) {
	id := newTopicID()
	parts, _ := AssignReplicas("t", 1, 1, threeBrokers())
	topics := map[string]*TopicState{"t": {Name: "t", ID: id, Epoch: 3, Partitions: parts, Configs: map[string]string{}}}
	cases := []struct {
		name string
		tc   topicChange
		want error
	}{
		{"other incarnation delete", topicChange{kind: kindDeleteTopic, name: "t", id: newTopicID()}, ErrStaleEpoch},
		{"no id delete", topicChange{kind: kindDeleteTopic, name: "t"}, ErrStaleEpoch},
		{"stale config epoch", topicChange{kind: kindAlterConfigs, name: "t", id: id, epoch: 2, configs: map[string]string{"x": "y"}}, ErrStaleEpoch},
		{"stale partitions epoch", topicChange{kind: kindCreatePartitions, name: "t", id: id, epoch: 4}, ErrStaleEpoch},
		{"shrink", topicChange{kind: kindCreatePartitions, name: "t", id: id, epoch: 3, partitions: parts}, ErrInvalidPartitions},
		{"unknown topic", topicChange{kind: kindAlterConfigs, name: "u", id: id, epoch: 3}, ErrUnknownTopic},
	}
	for _, c := range cases {
		if _, err := applyTopicChange(topics, c.tc); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if ts := topics["t"]; ts.Epoch != 3 || len(ts.Configs) != 0 || len(ts.Partitions) != 1 {
		t.Fatalf("refused changes left a trace: %+v", ts)
	}
}

// A broker that was down while a topic was deleted removes that topic's
// replica directories when it starts against a durable controller; the
// replicas of live topics and directories that are not partitions stay.
func TestStrayReplicasRemovedAtStart(t *testing.T) {
	ctrl := newKafkaController(t, startKfake(t), nil)
	dir := t.TempDir()
	start := func() *Broker {
		b, err := New(Config{BrokerID: 1, Listener: "127.0.0.1:0", LogDir: dir, Controller: ctrl, Logger: quietLogger(), Clock: clock.NewManual(time.Now())})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := start()
	for _, name := range []string{"gone", "kept"} {
		if _, err := ctrl.CreateTopic(TopicSpec{Name: name, Partitions: 2, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"gone-0", "gone-1", "kept-0", "kept-1"} {
		if _, err := os.Stat(filepath.Join(dir, d, partitionMetadataFile)); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.DeleteTopic("gone", TopicID{}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "remote-wal", "wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	b = start()
	defer b.Close()
	for d, want := range map[string]bool{"gone-0": false, "gone-1": false, "kept-0": true, "kept-1": true, "remote-wal": true} {
		_, err := os.Stat(filepath.Join(dir, d))
		if (err == nil) != want {
			t.Errorf("%s present %v after the restart, want %v", d, err == nil, want)
		}
	}
}

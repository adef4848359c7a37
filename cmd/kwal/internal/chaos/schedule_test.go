package chaos

import (
	"reflect"
	"testing"
	"time"
)

func testOptions() Options {
	return Options{Racks: []string{"az1", "az2", "az2"}, Length: 5 * time.Second, Pause: 900 * time.Millisecond}
}

func TestGenerateIsSeeded(t *testing.T) {
	o := testOptions()
	for seed := uint64(0); seed < 200; seed++ {
		a, b := Generate(seed, o), Generate(seed, o)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: two schedules differ:\n%s\n%s", seed, a, b)
		}
	}
	if reflect.DeepEqual(Generate(1, o).Events, Generate(2, o).Events) {
		t.Fatal("seeds 1 and 2 give the same schedule")
	}
}

// TestGenerateInvariants checks what the runner relies on: every fault
// ends within Length, faults of one lane never overlap, targets exist, a
// pair is two brokers, pauses outlast the session timeout, and every
// kind shows up over a few hundred seeds.
func TestGenerateInvariants(t *testing.T) {
	o := testOptions()
	seen := map[Kind]int{}
	for seed := uint64(0); seed < 300; seed++ {
		s := Generate(seed, o)
		end := map[int]time.Duration{}
		for i, e := range s.Events {
			seen[e.Kind]++
			if e.At < 0 || e.For <= 0 || e.At+e.For > o.Length {
				t.Fatalf("seed %d event %d %v outside [0, %v]", seed, i, e, o.Length)
			}
			if i > 0 && s.Events[i-1].At > e.At {
				t.Fatalf("seed %d: events out of order", seed)
			}
			if e.At < end[e.Kind.lane()] {
				t.Fatalf("seed %d: %v overlaps the previous fault of its lane", seed, e)
			}
			end[e.Kind.lane()] = e.At + e.For
			switch e.Kind {
			case KillBroker, PauseBroker, DiskFull, PartitionStore:
				if e.Broker < 1 || e.Broker > 3 {
					t.Fatalf("seed %d: %v: no such broker", seed, e)
				}
				if e.Kind == PauseBroker && e.For < o.Pause {
					t.Fatalf("seed %d: %v shorter than the pause %v", seed, e, o.Pause)
				}
			case PartitionPair:
				if e.Broker == e.Peer || e.Peer < 1 || e.Peer > 3 {
					t.Fatalf("seed %d: %v: bad pair", seed, e)
				}
			case PartitionRack:
				if e.Rack != "az1" && e.Rack != "az2" {
					t.Fatalf("seed %d: %v: no such rack", seed, e)
				}
			}
		}
	}
	for _, k := range AllKinds {
		if seen[k] == 0 {
			t.Errorf("no %s fault in 300 schedules", k)
		}
	}
}

func TestGenerateKinds(t *testing.T) {
	o := testOptions()
	o.Kinds = []Kind{StoreDown}
	for seed := uint64(0); seed < 50; seed++ {
		for _, e := range Generate(seed, o).Events {
			if e.Kind != StoreDown {
				t.Fatalf("seed %d: %v not asked for", seed, e)
			}
		}
	}
}

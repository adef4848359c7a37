package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults a schedule can hold.
const (
	// KillBroker stops a broker as a crash would (no handover, nothing more
	// uploaded) and restarts it on its log directory when the fault ends.
	KillBroker Kind = "kill"
	// PauseBroker stops a broker's heartbeats and cuts its broker-to-broker
	// network past the session timeout, as SIGSTOP would look to the others.
	PauseBroker Kind = "pause"
	// PartitionPair cuts the network between two brokers.
	PartitionPair Kind = "partition-pair"
	// PartitionRack cuts the network between one rack and the rest.
	PartitionRack Kind = "partition-rack"
	// StoreDown makes every object-store request time out.
	StoreDown Kind = "store-down"
	// StoreSlow adds latency to every object-store request.
	StoreSlow Kind = "store-slow"
	// StoreSlowDown answers every object-store request 503 SlowDown.
	StoreSlowDown Kind = "store-slowdown"
	// AmbiguousPut stores half the PUTs and answers them with an error.
	AmbiguousPut Kind = "ambiguous-put"
	// MetadataDown makes the metadata Kafka (the remote-WAL metadata topic
	// and, across processes, the cluster state and heartbeats) close every
	// connection, as a Kafka that is down.
	MetadataDown Kind = "metadata-down"
	// DiskFull fills a broker's log dir: every log write fails (ENOSPC in
	// process, EFBIG past RLIMIT_FSIZE across processes). The fault ends
	// as an operator ends it: space freed, the broker restarted (a log
	// that failed a write refuses writes until reopened, as Kafka takes a
	// failed log dir offline).
	DiskFull Kind = "disk-full"
	// PartitionStore cuts one broker from the object store.
	PartitionStore Kind = "partition-store"
)

// AllKinds lists every kind the generator draws from.
var AllKinds = []Kind{KillBroker, PauseBroker, PartitionPair, PartitionRack, StoreDown, StoreSlow, StoreSlowDown, AmbiguousPut,
	MetadataDown, DiskFull, PartitionStore}

// lane says which faults may overlap: faults of one lane never do, so at
// most one broker is down, paused or out of disk at a time, one partition
// is in force, and one outside dependency fails at a time (the store in
// one mode, or the metadata Kafka: in a lane of its own it was down most
// of every schedule, and across processes a cluster whose leases all run
// out in it serves nothing).
func (k Kind) lane() int {
	switch k {
	case KillBroker, PauseBroker, DiskFull:
		return 0
	case PartitionPair, PartitionRack, PartitionStore:
		return 1
	}
	return 2
}

const lanes = 3

// Event is one fault: it starts At after the workload starts and lasts For.
type Event struct {
	At, For time.Duration
	Kind    Kind
	// Broker is the broker killed or paused, or one side of a pair.
	Broker int32
	// Peer is the other side of PartitionPair.
	Peer int32
	// Rack is the rack cut off by PartitionRack.
	Rack string
}

func (e Event) String() string {
	var target string
	switch e.Kind {
	case KillBroker, PauseBroker, DiskFull:
		target = fmt.Sprintf(" broker %d", e.Broker)
	case PartitionStore:
		target = fmt.Sprintf(" broker %d <-/-> store", e.Broker)
	case PartitionPair:
		target = fmt.Sprintf(" brokers %d <-/-> %d", e.Broker, e.Peer)
	case PartitionRack:
		target = fmt.Sprintf(" rack %s <-/-> rest", e.Rack)
	}
	return fmt.Sprintf("t+%-7s %-15s for %-7s%s", e.At, e.Kind, e.For, target)
}

// Options shape a schedule.
type Options struct {
	// Racks has one entry per broker (ids 1..n).
	Racks []string
	// Length is how long faults may run; every fault ends by then.
	Length time.Duration
	// Kinds to draw from; default AllKinds.
	Kinds []Kind
	// MinFault and MaxFault bound a fault's duration; MaxGap bounds the
	// quiet time between two faults of one lane.
	MinFault, MaxFault, MaxGap time.Duration
	// Pause is how long a PauseBroker lasts (past the session timeout).
	Pause time.Duration
}

func (o *Options) fill() {
	if len(o.Kinds) == 0 {
		o.Kinds = AllKinds
	}
	if o.MinFault <= 0 {
		o.MinFault = 300 * time.Millisecond
	}
	if o.MaxFault < o.MinFault {
		o.MaxFault = 4 * o.MinFault
	}
	if o.MaxGap <= 0 {
		o.MaxGap = o.MinFault
	}
}

// Schedule is a seeded list of faults, ordered by start.
type Schedule struct {
	Seed   uint64
	Events []Event
}

// Generate returns the schedule of seed: the same seed and options give
// the same schedule. It is pure.
func Generate(seed uint64, o Options) Schedule {
	o.fill()
	rng := rand.New(rand.NewPCG(seed, 0x6b77616c63686173))
	byLane := map[int][]Kind{}
	for _, k := range o.Kinds {
		byLane[k.lane()] = append(byLane[k.lane()], k)
	}
	var racks []string
	for _, r := range o.Racks {
		if !slices.Contains(racks, r) {
			racks = append(racks, r)
		}
	}
	n := int32(len(o.Racks))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	s := Schedule{Seed: seed}
	for lane := range lanes {
		kinds := byLane[lane]
		if len(kinds) == 0 {
			continue
		}
		t := between(0, o.MaxGap)
		for {
			e := Event{At: t, Kind: kinds[rng.IntN(len(kinds))]}
			e.For = between(o.MinFault, o.MaxFault)
			switch e.Kind {
			case KillBroker, DiskFull, PartitionStore:
				e.Broker = 1 + rng.Int32N(n)
			case PauseBroker:
				e.Broker = 1 + rng.Int32N(n)
				e.For = max(e.For, o.Pause)
			case PartitionPair:
				e.Broker = 1 + rng.Int32N(n)
				e.Peer = 1 + (e.Broker+rng.Int32N(n-1))%n
			case PartitionRack:
				e.Rack = racks[rng.IntN(len(racks))]
			}
			e.For = e.For.Round(time.Millisecond)
			e.At = e.At.Round(time.Millisecond)
			if e.At+e.For > o.Length {
				break
			}
			s.Events = append(s.Events, e)
			t = e.At + e.For + between(0, o.MaxGap)
		}
	}
	slices.SortStableFunc(s.Events, func(a, b Event) int { return int(a.At - b.At) })
	return s
}

// String prints the schedule, one fault a line.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule seed=%d (%d faults)\n", s.Seed, len(s.Events))
	for _, e := range s.Events {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// Counts returns the number of faults of each kind.
func (s Schedule) Counts() map[Kind]int {
	m := map[Kind]int{}
	for _, e := range s.Events {
		m[e.Kind]++
	}
	return m
}

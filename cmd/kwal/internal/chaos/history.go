package chaos

import "sync"

// Outcome is what a producer was told about a send.
type Outcome int

// Outcomes of a send. A send that failed may still have been written
// (the producer timed out waiting, the leader died after appending), so a
// failure is Unknown: the checker neither requires nor forbids it.
const (
	Acked Outcome = iota + 1
	Unknown
)

// Send is one record a producer sent.
type Send struct {
	Producer  string
	AcksAll   bool // acks=all by an idempotent producer; else acks=1
	Topic     string
	Partition int32
	// Seq orders one producer's sends to one partition.
	Seq     int64
	Value   string
	Outcome Outcome
	// Offset is the acknowledged offset (Acked only).
	Offset int64
	Err    string
}

// Read is one record a consumer read.
type Read struct {
	Consumer  string
	Topic     string
	Partition int32
	Offset    int64
	Value     string
}

// History records sends and reads; it is safe for concurrent use.
type History struct {
	mu struct {
		sync.Mutex
		sends []Send
		reads []Read
	}
}

// AddSend records a send's outcome.
func (h *History) AddSend(s Send) {
	h.mu.Lock()
	h.mu.sends = append(h.mu.sends, s)
	h.mu.Unlock()
}

// AddRead records a read, in the order the consumer saw it.
func (h *History) AddRead(r Read) {
	h.mu.Lock()
	h.mu.reads = append(h.mu.reads, r)
	h.mu.Unlock()
}

// Snapshot returns copies of the sends and reads so far.
func (h *History) Snapshot() ([]Send, []Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Send(nil), h.mu.sends...), append([]Read(nil), h.mu.reads...)
}

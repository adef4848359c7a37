package broker

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/kwal/kwal/clock"
	"github.com/kwal/kwal/objstore/ledger"
)

// TestReplicaPollDeadlineIsOnTheClock: a replica long poll's deadline is
// its max wait plus the request timeout on the broker's clock, the one
// the leader's long poll waits on, not 30 s of wall time. The leader
// (broker 2, played by a listener that reads requests and never answers)
// leaves the poll unanswered: nothing happens while the manual clock
// stands still, and once the clock passes the deadline the fetcher drops
// the connection and fetches again on a new one at once (no back-off on
// a clock that then stands still again).
func TestReplicaPollDeadlineIsOnTheClock(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type request struct {
		conn int
		key  int16
	}
	requests := make(chan request, 64)
	go func() {
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			go func(n int, c net.Conn) {
				for {
					var size [4]byte
					if _, err := io.ReadFull(c, size[:]); err != nil {
						return
					}
					frame := make([]byte, binary.BigEndian.Uint32(size[:]))
					if _, err := io.ReadFull(c, frame); err != nil || len(frame) < 2 {
						return
					}
					requests <- request{conn: n, key: int16(binary.BigEndian.Uint16(frame))}
				}
			}(n, c)
		}
	}()
	clk := clock.NewManual(t0)
	mem := NewMemController(nil, 1000)
	const wait = 500 * time.Millisecond
	b, err := New(Config{
		BrokerID: 1, Rack: "az1", Listener: "127.0.0.1:0", LogDir: t.TempDir(),
		Controller: mem, Ledger: ledger.New(), Logger: testLogger(t, slog.LevelWarn), Clock: clk,
		LeaderImbalanceCheckInterval: 24 * time.Hour, ReplicaLagTimeMax: 24 * time.Hour, ReplicaFetchWaitMax: wait,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	if _, err := mem.RegisterBroker(BrokerInfo{ID: 2, Host: "127.0.0.1", Port: int32(port), Rack: "az2"}); err != nil {
		t.Fatal(err)
	}
	ts, err := mem.CreateTopic(TopicSpec{Name: "poll", Partitions: 1, ReplicationFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "poll", Partition: 0}
	if ts.Partitions[0].Leader != 2 {
		if _, err := mem.ElectLeader(tp, 2); err != nil {
			t.Fatal(err)
		}
	}
	next := func(what string) request {
		t.Helper()
		select {
		case r := <-requests:
			return r
		case <-time.After(20 * time.Second): // bounds a hung test only
			t.Fatalf("no %s reached the leader", what)
		}
		panic("unreachable")
	}
	const fetchKey = 1
	first := next("fetch")
	if first.key != fetchKey {
		t.Fatalf("first request key %d, want a Fetch (an empty log has nothing to truncate)", first.key)
	}
	// Just short of the deadline: the poll stands.
	clk.Advance(wait + replicaRequestTimeout - time.Millisecond)
	select {
	case r := <-requests:
		t.Fatalf("a request (key %d on connection %d) before the poll's deadline", r.key, r.conn)
	default:
	}
	clk.Advance(time.Millisecond)
	again := next("fetch after the deadline")
	if again.key != fetchKey || again.conn == first.conn {
		t.Fatalf("after the deadline: key %d on connection %d, want a Fetch on a new connection (first on %d)", again.key, again.conn, first.conn)
	}
}

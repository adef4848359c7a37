package chaos

import (
	"net"
	"strconv"
	"testing"
)

// TestListenPortsBelowTheEphemeralRange: the ports handed out are
// distinct across calls, bindable, below the ephemeral range (where no
// outgoing connection takes them while a killed broker is down), and a
// port something else holds is skipped.
func TestListenPortsBelowTheEphemeralRange(t *testing.T) {
	first, err := listenPorts(3)
	if err != nil {
		t.Fatal(err)
	}
	// Hold the port the allocator would hand out next.
	ports.mu.Lock()
	held := ports.mu.next
	ports.mu.Unlock()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(held)))
	if err != nil {
		t.Skipf("cannot hold port %d for the test: %v", held, err)
	}
	defer ln.Close()
	second, err := listenPorts(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	low := ephemeralLow()
	for _, p := range append(first, second...) {
		if seen[p] {
			t.Fatalf("port %d handed out twice: %v then %v", p, first, second)
		}
		seen[p] = true
		if p >= low || p < 1024 {
			t.Fatalf("port %d is outside [1024, %d)", p, low)
		}
		if p == held {
			t.Fatalf("port %d handed out while held", p)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d handed out but not bindable: %v", p, err)
		}
		l.Close()
	}
}

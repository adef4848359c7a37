package broker

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchAnswerer serves replica Fetch requests on one end of a pipe: the
// i-th request gets a response whose one partition's record batches are
// payloads[i]. Each response is encoded before the first request, so that
// serving allocates nothing.
func fetchAnswerer(t *testing.T, payloads ...[]byte) *wireClient {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	frames := make([][]byte, len(payloads))
	for i, p := range payloads {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = replicaFetchVersion
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.RecordBatches = int64(i), p
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		frame := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0} // size, correlation id, no tags
		frame = resp.AppendTo(frame)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		frames[i] = frame
	}
	go func() {
		var hdr [12]byte // size, api key, version, correlation id
		req := make([]byte, 0, 4096)
		for _, frame := range frames {
			if _, err := io.ReadFull(server, hdr[:]); err != nil {
				return
			}
			n := int(binary.BigEndian.Uint32(hdr[:4])) - 8
			if _, err := io.ReadFull(server, req[:n]); err != nil {
				return
			}
			copy(frame[4:8], hdr[8:12])
			if _, err := server.Write(frame); err != nil {
				return
			}
		}
	}()
	return &wireClient{conn: client, clientID: "replica-fetcher-test", maxResp: 64 << 20}
}

func replicaFetchRequest() *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = replicaFetchVersion
	return req
}

func recordsOf(t *testing.T, r kmsg.Response) []byte {
	t.Helper()
	resp := r.(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("response %+v", resp)
	}
	return resp.Topics[0].Partitions[0].RecordBatches
}

// TestWireClientReusedResponses: a reused round trip decodes each answer
// whole, reads the next answer into the same buffer (so the last answer's
// bytes are gone: the contract the replica fetcher keeps by appending
// first), and keeps no buffer above maxKeptResponse. A plain round trip's
// answer stays the caller's.
func TestWireClientReusedResponses(t *testing.T) {
	a, b := bytes.Repeat([]byte{'a'}, 64<<10), bytes.Repeat([]byte{'b'}, 32<<10)
	big := bytes.Repeat([]byte{'c'}, maxKeptResponse+1)
	c := fetchAnswerer(t, a, b, big, a, b)
	deadline := time.Now().Add(10 * time.Second)

	r1, err := c.roundTripReused(replicaFetchRequest(), deadline)
	if err != nil {
		t.Fatal(err)
	}
	got1 := recordsOf(t, r1)
	if !bytes.Equal(got1, a) {
		t.Fatalf("first answer: %d bytes, want the %d of a", len(got1), len(a))
	}
	kept := cap(c.resp)
	r2, err := c.roundTripReused(replicaFetchRequest(), deadline)
	if err != nil {
		t.Fatal(err)
	}
	if got := recordsOf(t, r2); !bytes.Equal(got, b) {
		t.Fatalf("second answer: %d bytes, want the %d of b", len(got), len(b))
	}
	if cap(c.resp) != kept {
		t.Errorf("buffer grew from %d to %d for a smaller answer", kept, cap(c.resp))
	}
	if got1[0] != 'b' {
		t.Errorf("the first answer's bytes survived the next reused round trip: not read into the same buffer")
	}

	r3, err := c.roundTripReused(replicaFetchRequest(), deadline)
	if err != nil {
		t.Fatal(err)
	}
	if got := recordsOf(t, r3); !bytes.Equal(got, big) {
		t.Fatalf("oversized answer: %d bytes, want %d", len(got), len(big))
	}
	if cap(c.resp) != kept {
		t.Errorf("kept a buffer of %d bytes for an answer above maxKeptResponse (%d)", cap(c.resp), maxKeptResponse)
	}

	r4, err := c.roundTrip(replicaFetchRequest(), deadline)
	if err != nil {
		t.Fatal(err)
	}
	got4 := recordsOf(t, r4)
	if _, err := c.roundTrip(replicaFetchRequest(), deadline); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got4, a) {
		t.Errorf("a plain round trip's answer changed under the next one")
	}
}

// TestWireClientReusedFetchesAllocateNoBodies: 20 fetches of 1 MiB
// through a reused round trip allocate about one buffer, where plain
// round trips allocate every body (the garbage a classic follower made
// per fetch).
func TestWireClientReusedFetchesAllocateNoBodies(t *testing.T) {
	const n, size = 20, 1 << 20
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{byte(i)}, size)
	}
	measure := func(rt func(c *wireClient) (kmsg.Response, error)) uint64 {
		c := fetchAnswerer(t, payloads...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range n {
			r, err := rt(c)
			if err != nil {
				t.Fatal(err)
			}
			if got := recordsOf(t, r); len(got) != size || got[0] != byte(i) || got[size-1] != byte(i) {
				t.Fatalf("fetch %d: wrong records", i)
			}
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	deadline := time.Now().Add(10 * time.Second)
	reused := measure(func(c *wireClient) (kmsg.Response, error) { return c.roundTripReused(replicaFetchRequest(), deadline) })
	plain := measure(func(c *wireClient) (kmsg.Response, error) { return c.roundTrip(replicaFetchRequest(), deadline) })
	t.Logf("allocated over %d fetches of %d B: reused %d B, plain %d B", n, size, reused, plain)
	if reused > 3*size {
		t.Errorf("reused round trips allocated %d B for %d answers of %d B; want about one buffer", reused, n, size)
	}
	if plain < n*size {
		t.Errorf("plain round trips allocated %d B, under the %d B of their bodies: the comparison measures nothing", plain, n*size)
	}
}

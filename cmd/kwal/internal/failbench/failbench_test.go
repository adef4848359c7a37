package failbench

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// One kill in classic mode on a short session: a new leader is elected,
// acks=all loses nothing, and the report renders.
func TestOneKill(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED: -short")
	}
	rep, err := Run(context.Background(), Config{
		Kills: 1, SessionTimeout: time.Second, HeartbeatInterval: 200 * time.Millisecond,
		Modes: []string{"classic"}, LatencyModel: "none", Dir: t.TempDir(),
	}, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Modes[0]
	if len(m.Kills) != 1 || m.Kills[0].NewLeader == m.Kills[0].Victim || m.Kills[0].ToLeaderMs <= 0 || m.Kills[0].ToFirstAckMs <= 0 {
		t.Fatalf("kill: %+v", m.Kills)
	}
	if m.AcksAllLost != 0 || m.AcksAllDuplicated != 0 || m.AcksAllAcked == 0 {
		t.Fatalf("acks=all: %d acknowledged, %d lost, %d duplicated", m.AcksAllAcked, m.AcksAllLost, m.AcksAllDuplicated)
	}
	var table, js, png bytes.Buffer
	WriteTable(&table, rep)
	if err := WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	if err := WritePNG(&png, rep); err != nil || png.Len() == 0 {
		t.Fatalf("png: %d bytes, %v", png.Len(), err)
	}
	t.Log(table.String())
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

package demo

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The README's main job, small: both modes finish, every record arrives
// once and in order, and the follower logs are byte-identical.
func TestDemoRuns(t *testing.T) {
	for _, mode := range []string{"remotewal", "classic"} {
		t.Run("mode="+mode, func(t *testing.T) {
			var out bytes.Buffer
			err := Run(context.Background(), Config{
				Records: 600, RecordBytes: 200, Rate: 2000, Partitions: 2, Topic: "demo-test", Mode: mode,
				Dir: t.TempDir(), LatencyModel: "s3express", Interval: 10 * time.Millisecond,
				Logger: slog.New(slog.DiscardHandler),
			}, &out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			s := out.String()
			for _, want := range []string{"consumed                          600, duplicates 0, out of order 0", "byte-identical", "yes ("} {
				if !strings.Contains(strings.Join(strings.Fields(s), " "), strings.Join(strings.Fields(want), " ")) {
					t.Fatalf("summary lacks %q:\n%s", want, s)
				}
			}
		})
	}
}

func TestBadConfig(t *testing.T) {
	if err := Run(context.Background(), Config{Records: 0, RecordBytes: 1, Partitions: 1, Mode: "remotewal"}, &bytes.Buffer{}); err == nil {
		t.Fatal("zero records accepted")
	}
	if err := Run(context.Background(), Config{Records: 1, RecordBytes: 1, Partitions: 1, Mode: "bogus"}, &bytes.Buffer{}); err == nil {
		t.Fatal("unknown mode accepted")
	}
}
